//! news-service: the news API (`/v1/news`; the contract is in docs/).
//!
//! It owns the `news` schema: the curated catalogue (organisations, journalists, articles), which
//! it only reads at run time, and the engagement tables (likes, bookmarks, follows, comments) it
//! writes. It serves article reads (anonymous ones from a read pool, cacheable), engagement,
//! personal lists and its own OpenAPI 3.1 document (`openapi()`, at `/v1/news/openapi.json`),
//! plus the `migrate`, `seed` and `import` commands. It must not read any other service's
//! schema, trust an identity header, or write curated tables as its runtime role: it verifies
//! every token itself through shared-auth.
//!
//! Where things live: `routes/` (HTTP only, one module per resource), `store/` (all SQL),
//! `domain/` (pure rules), `views` (the answer shapes several routes share), `error` (the
//! error enum and codes), `openapi` (document assembly and the catalogue of problem answers).

pub mod cache;
pub mod config;
pub mod curated;
pub mod db;
pub mod domain;
pub mod error;
pub mod idempotency;
pub mod import;
pub mod openapi;
pub mod routes;
pub mod seed;
pub mod state;
pub mod store;
pub mod views;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use shared_auth::Verifier;
use shared_auth::metrics::HttpMetrics;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::ServeConfig;
pub use db::migrate;
pub use error::{Error, Result};
pub use import::{ImportSummary, import};
pub use seed::seed;
pub use state::{ApiDocument, AppState, Pools};

/// Request bodies are at most 16 KiB at the services (the contract's limits).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// How long `/readyz` waits for each pool to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(3);

/// The service's OpenAPI document, as `/v1/news/openapi.json` serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    openapi::document(routes::router())
}

/// The full router: `/v1/news/...`, `/healthz`, `/readyz`, problems for everything else.
pub fn router(state: AppState) -> Router {
    let (api, _) = routes::router().split_for_parts();
    let pools = vec![
        ("primary", state.pools.primary.clone()),
        ("read", state.pools.read.clone()),
    ];
    let metrics = HttpMetrics::new("news", pools.clone());
    metrics.spawn_pool_sampler(Duration::from_secs(5));
    let health = shared_auth::health::router(pools, READY_TIMEOUT, error::RETRY_AFTER_SECS);
    let routes = api.merge(health);
    shared_auth::stack::service_stack(routes, metrics, MAX_BODY_BYTES).with_state(state)
}

/// A bound, ready-to-run news service.
pub struct Application {
    port: u16,
    listener: TcpListener,
    router: Router,
    cleanup: CleanupTask,
}

/// The idempotency-key sweep, stopped when the application it belongs to goes away.
struct CleanupTask(JoinHandle<()>);

impl Drop for CleanupTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Application {
    /// Builds pools and the verifier, migrates when asked, binds the listener (port 0 in tests)
    /// and starts the sweep of expired idempotency keys.
    pub async fn build(config: ServeConfig) -> anyhow::Result<Self> {
        if config.migrate_on_start {
            let owner = config.owner_database_url.as_deref().ok_or_else(|| {
                anyhow::anyhow!("NEWS_MIGRATE_ON_START needs NEWS_OWNER_DATABASE_URL")
            })?;
            migrate(owner).await?;
        }
        let primary = db::lazy_pool(
            &config.database_url,
            config.db_max_connections,
            "news-service",
        )?;
        let read = match &config.database_read_url {
            Some(url) if !url.is_empty() => {
                db::lazy_pool(url, config.db_max_connections, "news-service-read")?
            }
            _ => primary.clone(),
        };
        let verifier = Verifier::from_config(&config.auth).await?;
        let cleanup = CleanupTask(tokio::spawn(idempotency::cleanup_task(
            primary.clone(),
            Duration::from_secs(config.idempotency_cleanup_secs.max(1)),
        )));
        let state = AppState {
            pools: Pools { primary, read },
            verifier,
            document: ApiDocument(Arc::new(openapi())),
        };
        let listener = TcpListener::bind(config.listen_addr).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            port,
            listener,
            router: router(state),
            cleanup,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGINT/SIGTERM, then drains in-flight requests.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        tracing::info!(port = self.port, "news-service listening");
        let _cleanup = self.cleanup;
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shared_auth::telemetry::shutdown_signal())
            .await
    }
}
