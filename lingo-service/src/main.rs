//! The `lingo-service` binary: parse the command line, start logging, run one subcommand.

use clap::{Parser, Subcommand};
use lingo_service::config::{MigrateArgs, SeedArgs, ServeConfig};
use shared_auth::auth::mint::MintArgs;
use shared_auth::telemetry::{LogFormat, init_logging};

#[derive(Parser)]
#[command(
    name = "lingo-service",
    version,
    about = "The lingo learning API (/v1/lingo)"
)]
struct Cli {
    /// Log output: human-readable lines or one JSON object per line.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_enum,
        default_value = "human",
        global = true
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API.
    Serve(Box<ServeConfig>),
    /// Apply the database migrations (as the schema owner).
    Migrate(MigrateArgs),
    /// Write the demo catalogue and analytics data (as the pipeline role); idempotent.
    Seed(SeedArgs),
    /// Print a development token signed with the configured key.
    MintToken(Box<MintArgs>),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(config) => serve(*config, cli.log_format).await,
        Command::Migrate(args) => {
            init_logging(cli.log_format);
            lingo_service::migrate(&args.owner_database_url).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Seed(args) => {
            init_logging(cli.log_format);
            let summary =
                lingo_service::seed_with(&args.pipeline_database_url, args.learners).await?;
            tracing::info!(?summary, "demo data seeded");
            if let Some(app_url) = &args.database_url {
                let sessions = lingo_service::seed_demo_sessions(app_url).await?;
                tracing::info!(sessions, "demo study sessions seeded");
            }
            Ok(())
        }
        Command::MintToken(args) => {
            println!("{}", shared_auth::auth::mint::mint(&args)?);
            Ok(())
        }
    }
}

/// The server also exports spans (when OTLP is configured); they are flushed on the way out.
async fn serve(config: ServeConfig, log_format: LogFormat) -> anyhow::Result<()> {
    let telemetry = shared_auth::telemetry::init("lingo-service", log_format);
    let served = async {
        lingo_service::Application::build(config)
            .await?
            .run_until_stopped()
            .await
    }
    .await;
    telemetry.shutdown().await;
    served
}
