//! lingo-service: the learning API of `/v1/lingo` (API.md section 3).
//!
//! It owns the `lingo` schema: the curated catalogue (languages, phrases, translations) and the
//! analytics tables, which it only reads, and the learners' study sessions, totals and
//! idempotency records, which it writes. It verifies every token itself (analytics tools call it
//! without the gateway). It must never read another service's schema, write the catalogue or
//! analytics tables, or trust an identity that does not come from a verified token.
//!
//! Embedding (tests of other crates): [`migrate`] as `lingo_owner`, optionally [`seed`] as
//! `lingo_pipeline`, then [`Application::build`] with a [`config::Config`] for `lingo_app`.

pub mod config;
pub mod db;
pub mod domain;
pub mod error;
pub mod idempotency;
pub mod openapi;
pub mod routes;
pub mod seed;
pub mod time;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::FromRef;
use shared_auth::Verifier;
use shared_auth::load::LoadLimits;
use shared_auth::metrics::HttpMetrics;
use sqlx::PgPool;
use tokio::net::TcpListener;

pub use config::Config;
pub use db::migrate;
pub use error::{Error, Result};
pub use openapi::openapi;
pub use seed::{SeedSummary, seed, seed_with};

/// Request bodies are JSON objects of at most 128 KiB, the limit shared by both services.
pub const MAX_BODY_BYTES: usize = shared_auth::stack::MAX_BODY_BYTES;

/// How long `/readyz` waits for the database to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub db: PgPool,
    pub verifier: Arc<Verifier>,
}

impl FromRef<AppState> for Arc<Verifier> {
    fn from_ref(state: &AppState) -> Self {
        state.verifier.clone()
    }
}

impl FromRef<AppState> for PgPool {
    fn from_ref(state: &AppState) -> Self {
        state.db.clone()
    }
}

/// The whole HTTP surface: `/healthz`, `/readyz` and `/v1/lingo/...`, with the request-id and
/// problem middleware outermost.
pub fn app_router(state: AppState, limits: LoadLimits) -> Router {
    let pools = vec![("primary", state.db.clone())];
    let metrics = HttpMetrics::new("lingo", pools.clone());
    metrics.spawn_pool_sampler(Duration::from_secs(5));
    let health = shared_auth::health::router(pools, READY_TIMEOUT, error::RETRY_AFTER_SECS);
    let resources = shared_auth::load::guard(routes::router(), limits);
    let resources = shared_auth::pool_pressure::track(resources, vec![state.db.clone()]);
    let routes = resources.merge(health);
    shared_auth::stack::service_stack(routes, metrics, MAX_BODY_BYTES).with_state(state)
}

/// A bound, ready-to-run service.
pub struct Application {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: AppState,
    cleanup_every: Duration,
    limits: LoadLimits,
    header_read_timeout: Duration,
}

impl Application {
    /// Migrates first when `migrate_on_start` is set, builds the verifier and the (lazy) pool,
    /// and binds `listen_addr` (port 0 picks a free port; see [`Application::port`]).
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        if config.migrate_on_start {
            let owner_url = config
                .owner_database_url
                .as_deref()
                .context("LINGO_MIGRATE_ON_START needs LINGO_OWNER_DATABASE_URL")?;
            migrate(owner_url).await.context("migrating on start")?;
        }
        let verifier = Verifier::from_config(&config.auth)
            .await
            .context("auth configuration")?;
        let db = db::runtime_pool(
            &config.database_url,
            config.db_max_connections,
            Duration::from_millis(config.db_acquire_timeout_ms),
            Duration::from_millis(config.request_timeout_ms),
        )
        .context("LINGO_DATABASE_URL")?;
        let listener = TcpListener::bind(config.listen_addr)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen_addr))?;
        let local_addr = listener.local_addr()?;
        Ok(Self {
            listener,
            local_addr,
            state: AppState { db, verifier },
            cleanup_every: Duration::from_secs(config.idempotency_cleanup_secs.max(1)),
            limits: config.load_limits(),
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
        })
    }

    pub fn port(&self) -> u16 {
        self.local_addr.port()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The runtime pool (role `lingo_app`).
    pub fn pool(&self) -> &PgPool {
        &self.state.db
    }

    /// Serves until SIGINT or SIGTERM, then drains in-flight requests.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        self.run_with_shutdown(shared_auth::telemetry::shutdown_signal())
            .await
    }

    /// Serves until `signal` resolves, then drains in-flight requests.
    pub async fn run_with_shutdown(
        self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        tracing::info!(addr = %self.local_addr, "lingo-service listening");
        let cleanup = tokio::spawn(idempotency::cleanup_task(
            self.state.db.clone(),
            self.cleanup_every,
        ));
        let db = self.state.db.clone();
        let router = app_router(self.state, self.limits);
        let served =
            shared_auth::serve::serve(self.listener, router, self.header_read_timeout, signal)
                .await;
        cleanup.abort();
        // Close connections cleanly so the database does not log aborted sessions.
        db.close().await;
        tracing::info!("lingo-service stopped");
        served.context("serving HTTP")
    }
}
