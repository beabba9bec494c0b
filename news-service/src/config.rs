//! Configuration, declared once with clap so `--help` lists every environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use shared_auth::AuthConfig;
use shared_auth::auth::mint::MintArgs;
use shared_auth::telemetry::LogFormat;

pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:8082";
pub const DEFAULT_SEED_ARTICLES: u64 = 5000;

#[derive(clap::Parser)]
#[command(
    name = "news-service",
    version,
    about = "The news API: articles, engagement, comments"
)]
pub struct Cli {
    /// Log output: human lines or one JSON object per line.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Human, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// Serve the HTTP API.
    Serve(ServeConfig),
    /// Apply the database migrations (as the schema owner, news_owner).
    Migrate(MigrateArgs),
    /// Load deterministic demo data (as the pipeline role, news_pipeline); idempotent.
    Seed(SeedArgs),
    /// Upsert organisations, journalists and articles from a JSON Lines file (as news_pipeline).
    Import(ImportArgs),
    /// Recompute every like/bookmark/comment/follower counter from the rows and report the drift
    /// fixed (as news_pipeline or news_owner); safe alongside live writes.
    Recount(RecountArgs),
    /// Print a development token signed with the configured key.
    MintToken(MintArgs),
}

/// Everything `serve` needs; also what tests build to start the service in-process. No `Debug`:
/// it holds database URLs with their passwords (see `AuthConfig`).
#[derive(clap::Args, Clone)]
pub struct ServeConfig {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "NEWS_LISTEN_ADDR", default_value = DEFAULT_LISTEN_ADDR)]
    pub listen_addr: SocketAddr,
    /// Primary database, as the runtime role news_app: engagement writes and personal reads.
    #[arg(long, env = "NEWS_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Database for anonymous reads (a read replica); defaults to NEWS_DATABASE_URL.
    #[arg(long, env = "NEWS_DATABASE_READ_URL", hide_env_values = true)]
    pub database_read_url: Option<String>,
    /// Owner role (news_owner) URL, used only when NEWS_MIGRATE_ON_START is true.
    #[arg(long, env = "NEWS_OWNER_DATABASE_URL", hide_env_values = true)]
    pub owner_database_url: Option<String>,
    /// Apply migrations before serving (development).
    #[arg(long, env = "NEWS_MIGRATE_ON_START", default_value_t = false, action = clap::ArgAction::Set)]
    pub migrate_on_start: bool,
    /// Connections per pool (primary and read pool each).
    #[arg(long, env = "NEWS_DB_MAX_CONNECTIONS", default_value_t = 20)]
    pub db_max_connections: u32,
    /// Milliseconds to wait for a pooled connection before answering 503 (`overloaded` when every
    /// connection is busy, `database_unavailable` when none can be opened); well below the deadline.
    #[arg(long, env = "NEWS_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 2_000)]
    pub db_acquire_timeout_ms: u64,
    /// Deadline of a request in milliseconds (also the database's statement_timeout): past it, 503 `timeout`.
    #[arg(long, env = "NEWS_REQUEST_TIMEOUT_MS", default_value_t = shared_auth::http::load::DEFAULT_REQUEST_TIMEOUT_MS)]
    pub request_timeout_ms: u64,
    /// Requests served at once; the excess is refused with 503 `overloaded`.
    #[arg(long, env = "NEWS_MAX_IN_FLIGHT", default_value_t = shared_auth::http::load::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Milliseconds a client may take to send a request head before its connection is closed.
    #[arg(long, env = "NEWS_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// Seconds between sweeps of expired Idempotency-Key records.
    #[arg(long, env = "NEWS_IDEMPOTENCY_CLEANUP_SECS", default_value_t = 600)]
    pub idempotency_cleanup_secs: u64,
    /// Milliseconds between sweeps that fold each counter's slot rows back into one row (a hot
    /// article is then read from one row, not up to 16); 0 turns folding off (counts stay exact
    /// either way).
    #[arg(long, env = "NEWS_COUNTER_FOLD_INTERVAL_MS", default_value_t = 1_000)]
    pub counter_fold_interval_ms: u64,
    #[command(flatten)]
    pub read_routing: crate::read_routing::ReadRoutingConfig,
    #[command(flatten)]
    pub auth: AuthConfig,
}

impl ServeConfig {
    /// A configuration listening on 127.0.0.1 with a free port, for tests and embedding.
    pub fn new(database_url: impl Into<String>, auth: AuthConfig) -> Self {
        Self {
            listen_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            database_url: database_url.into(),
            database_read_url: None,
            owner_database_url: None,
            migrate_on_start: false,
            db_max_connections: 20,
            db_acquire_timeout_ms: 2_000,
            request_timeout_ms: shared_auth::http::load::DEFAULT_REQUEST_TIMEOUT_MS,
            max_in_flight: shared_auth::http::load::DEFAULT_MAX_IN_FLIGHT,
            header_read_timeout_ms: 10_000,
            idempotency_cleanup_secs: 600,
            counter_fold_interval_ms: 1_000,
            read_routing: crate::read_routing::ReadRoutingConfig::default(),
            auth,
        }
    }

    /// The deadline and in-flight limit of the resource routes.
    pub fn load_limits(&self) -> shared_auth::http::load::LoadLimits {
        shared_auth::http::load::LoadLimits {
            request_timeout: std::time::Duration::from_millis(self.request_timeout_ms),
            max_in_flight: self.max_in_flight,
        }
    }
}

#[derive(clap::Args, Clone)]
pub struct MigrateArgs {
    /// Owner role (news_owner) URL.
    #[arg(long, env = "NEWS_OWNER_DATABASE_URL", hide_env_values = true)]
    pub owner_database_url: String,
}

#[derive(clap::Args, Clone)]
pub struct SeedArgs {
    /// Pipeline role (news_pipeline) URL.
    #[arg(long, env = "NEWS_PIPELINE_DATABASE_URL", hide_env_values = true)]
    pub pipeline_database_url: String,
    /// Number of articles to generate.
    #[arg(long, default_value_t = DEFAULT_SEED_ARTICLES)]
    pub articles: u64,
}

#[derive(clap::Args, Clone)]
pub struct ImportArgs {
    /// Pipeline role (news_pipeline) URL.
    #[arg(long, env = "NEWS_PIPELINE_DATABASE_URL", hide_env_values = true)]
    pub pipeline_database_url: String,
    /// JSON Lines file: one organisation, journalist or article per line (field "type").
    pub file: PathBuf,
    /// Hide the progress bar (it is hidden anyway when stderr is not a terminal).
    #[arg(long, default_value_t = false)]
    pub no_progress: bool,
}

#[derive(clap::Args, Clone)]
pub struct RecountArgs {
    /// Pipeline role (news_pipeline) URL; the owner role (news_owner) works too.
    #[arg(long, env = "NEWS_PIPELINE_DATABASE_URL", hide_env_values = true)]
    pub pipeline_database_url: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn serve_reads_defaults_and_flags() {
        let cli = Cli::try_parse_from([
            "news-service",
            "serve",
            "--database-url",
            "postgres://news_app@localhost/db",
            "--migrate-on-start",
            "true",
        ])
        .expect("parses");
        let Command::Serve(config) = cli.command else {
            panic!("expected serve");
        };
        assert_eq!(config.listen_addr.to_string(), DEFAULT_LISTEN_ADDR);
        assert!(config.migrate_on_start);
        assert_eq!(config.db_max_connections, 20);
        assert!(config.database_read_url.is_none());
        assert_eq!(config.counter_fold_interval_ms, 1_000);
    }

    #[test]
    fn seed_defaults_to_5000_articles() {
        let cli = Cli::try_parse_from([
            "news-service",
            "seed",
            "--pipeline-database-url",
            "postgres://x@y/z",
        ])
        .expect("parses");
        let Command::Seed(args) = cli.command else {
            panic!("expected seed");
        };
        assert_eq!(args.articles, 5000);
    }
}
