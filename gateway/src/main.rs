//! The `gateway` binary: `serve` runs the front door, `mint-token` signs a development token
//! (cargo feature `mint-token`, on by default; the release images are built without it).

use clap::{Parser, Subcommand};
use gateway::Application;
use gateway::config::GatewayConfig;
#[cfg(feature = "mint-token")]
use shared_auth::auth::mint::{MintArgs, mint};
use shared_auth::telemetry::{self, LogFormat};

#[derive(Parser)]
#[command(name = "gateway", version, about = "The front door of lingo and news")]
struct Cli {
    /// Log lines for humans or as JSON.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Human, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP until SIGINT or SIGTERM.
    Serve(Box<GatewayConfig>),
    /// Print a development token signed with the configured keys.
    #[cfg(feature = "mint-token")]
    MintToken(Box<MintArgs>),
}

// The main thread runs start-up, the readiness probes and signals; connections are served by
// the worker threads of `server`, each with its own event loop.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(config) => {
            let telemetry = telemetry::init("gateway", cli.log_format);
            let served = serve(*config).await;
            if let Err(error) = &served {
                tracing::error!(
                    error = format!("{error:#}"),
                    "gateway stopped with an error"
                );
            }
            telemetry.shutdown().await;
            served
        }
        #[cfg(feature = "mint-token")]
        Command::MintToken(args) => {
            println!("{}", mint(&args)?);
            Ok(())
        }
    }
}

async fn serve(config: GatewayConfig) -> anyhow::Result<()> {
    Application::build(config)
        .await?
        .run_until_stopped()
        .await?;
    Ok(())
}
