//! Configuration, declared once with clap so `--help` lists every environment variable.

use std::net::SocketAddr;
use std::time::Duration;

use shared_auth::AuthConfig;
use shared_auth::http::load::LoadLimits;

/// Everything `serve` needs; also what tests build to start the service in-process. No `Debug`:
/// it holds database URLs with their passwords (see `AuthConfig`).
#[derive(clap::Args, Clone)]
pub struct ServeConfig {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "LINGO_LISTEN_ADDR", default_value = "127.0.0.1:8081")]
    pub listen_addr: SocketAddr,
    /// Database URL of the runtime role `lingo_app`.
    #[arg(long, env = "LINGO_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Database URL of the schema owner `lingo_owner`; used only with LINGO_MIGRATE_ON_START.
    #[arg(long, env = "LINGO_OWNER_DATABASE_URL", hide_env_values = true)]
    pub owner_database_url: Option<String>,
    /// Run the migrations (as the owner role) before serving; for development.
    #[arg(
        long,
        env = "LINGO_MIGRATE_ON_START",
        default_value_t = false,
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub migrate_on_start: bool,
    /// Maximum connections of the runtime pool.
    #[arg(long, env = "LINGO_DB_MAX_CONNECTIONS", default_value_t = 20)]
    pub db_max_connections: u32,
    /// Milliseconds to wait for a pooled connection before answering 503 (`overloaded` when every
    /// connection is busy, `database_unavailable` when none can be opened); well below the deadline.
    #[arg(long, env = "LINGO_DB_ACQUIRE_TIMEOUT_MS", default_value_t = 2_000)]
    pub db_acquire_timeout_ms: u64,
    /// Deadline of a request in milliseconds (also the database's statement_timeout): past it, 503 `timeout`.
    #[arg(long, env = "LINGO_REQUEST_TIMEOUT_MS", default_value_t = shared_auth::http::load::DEFAULT_REQUEST_TIMEOUT_MS)]
    pub request_timeout_ms: u64,
    /// Requests served at once; the excess is refused with 503 `overloaded`.
    #[arg(long, env = "LINGO_MAX_IN_FLIGHT", default_value_t = shared_auth::http::load::DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Milliseconds a client may take to send a request head before its connection is closed.
    #[arg(long, env = "LINGO_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// Seconds between sweeps of expired Idempotency-Key records.
    #[arg(long, env = "LINGO_IDEMPOTENCY_CLEANUP_SECS", default_value_t = 600)]
    pub idempotency_cleanup_secs: u64,
    #[command(flatten)]
    pub auth: AuthConfig,
}

impl ServeConfig {
    /// A configuration with the defaults of the command line, for tests and embedding:
    /// listen on `listen_addr` (use `127.0.0.1:0` for a free port) as the runtime role.
    pub fn new(listen_addr: SocketAddr, database_url: impl Into<String>, auth: AuthConfig) -> Self {
        Self {
            listen_addr,
            database_url: database_url.into(),
            owner_database_url: None,
            migrate_on_start: false,
            db_max_connections: 20,
            db_acquire_timeout_ms: 2_000,
            request_timeout_ms: shared_auth::http::load::DEFAULT_REQUEST_TIMEOUT_MS,
            max_in_flight: shared_auth::http::load::DEFAULT_MAX_IN_FLIGHT,
            header_read_timeout_ms: 10_000,
            idempotency_cleanup_secs: 600,
            auth,
        }
    }
}

impl ServeConfig {
    /// The deadline and in-flight limit of the resource routes.
    pub fn load_limits(&self) -> LoadLimits {
        LoadLimits {
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            max_in_flight: self.max_in_flight,
        }
    }
}

/// The former name of [`ServeConfig`], kept while the gateway's tests still use it.
pub type Config = ServeConfig;

/// `migrate`: runs the migrations as the schema owner.
#[derive(clap::Args, Clone)]
pub struct MigrateArgs {
    /// Database URL of the schema owner `lingo_owner`.
    #[arg(long, env = "LINGO_OWNER_DATABASE_URL", hide_env_values = true)]
    pub owner_database_url: String,
}

/// `seed`: writes the demo catalogue and analytics data as the pipeline role.
#[derive(clap::Args, Clone)]
pub struct SeedArgs {
    /// Database URL of the upstream pipeline role `lingo_pipeline`.
    #[arg(long, env = "LINGO_PIPELINE_DATABASE_URL", hide_env_values = true)]
    pub pipeline_database_url: String,
    /// Database URL of the runtime role `lingo_app`: when given, `demo-learner` also gets three
    /// weeks of answered study sessions (once), so `GET /me/reviews` has phrases due.
    #[arg(long, env = "LINGO_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Generic learners (`learner-001`, ...) to create analytics data for, besides `demo-learner`.
    #[arg(long, default_value_t = crate::seed::DEFAULT_LEARNERS)]
    pub learners: usize,
}
