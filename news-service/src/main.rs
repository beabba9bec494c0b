//! The news-service binary: parses the command line, starts telemetry and runs one command
//! (`serve`, `migrate`, `seed`, `import`, `recount`, `mint-token`); everything else is in the
//! library.

use std::process::ExitCode;

use clap::Parser;
use news_service::config::{Cli, Command};
use news_service::{Application, import, migrate, recount, seed};
use shared_auth::telemetry;

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    // The server also exports spans (when OTLP is configured), flushed on the way out; the
    // one-shot commands only log.
    let spans = match &cli.command {
        Command::Serve(_) => Some(telemetry::init("news-service", cli.log_format)),
        _ => {
            telemetry::init_logging(cli.log_format);
            None
        }
    };
    let outcome = run(cli.command).await;
    if let Some(spans) = spans {
        spans.shutdown().await;
    }
    outcome
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(config) => {
            Application::build(config)
                .await?
                .run_until_stopped()
                .await?
        }
        Command::Migrate(args) => {
            migrate(&args.owner_database_url).await?;
            tracing::info!("migrations applied");
        }
        Command::Seed(args) => {
            let summary = seed(&args.pipeline_database_url, args.articles).await?;
            println!("{summary}");
        }
        Command::Import(args) => {
            let summary =
                import(&args.pipeline_database_url, &args.file, !args.no_progress).await?;
            println!("{summary}");
            // Good lines are kept either way; a pipeline learns from the exit code that some were not.
            if !summary.bad_lines.is_empty() {
                return Ok(ExitCode::from(2));
            }
        }
        Command::Recount(args) => {
            let summary = recount(&args.pipeline_database_url).await?;
            println!("{summary}");
        }
        Command::MintToken(args) => println!("{}", shared_auth::auth::mint::mint(&args)?),
    }
    Ok(ExitCode::SUCCESS)
}
