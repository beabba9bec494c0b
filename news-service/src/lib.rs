//! news-service: the news API (`/v1/news`) of API.md section 4.
//!
//! It owns the `news` schema: the curated catalogue (organisations, journalists, articles), which
//! it only reads at run time, and the engagement tables (likes, bookmarks, follows, comments) it
//! writes. It serves article reads (anonymous ones from a read pool, cacheable), engagement,
//! personal lists and its own OpenAPI 3.1 document (`openapi()`, at `/v1/news/openapi.json`),
//! plus the `migrate`, `seed` and `import` commands. It must not read any other service's
//! schema, trust an identity header, or write curated tables as its runtime role: it verifies
//! every token itself through shared-auth.

pub mod cache;
pub mod config;
pub mod curated;
pub mod db;
pub mod domain;
pub mod error;
pub mod idempotency;
pub mod import;
pub mod openapi;
pub mod read_routing;
pub mod routes;
pub mod seed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use shared_auth::Verifier;
use shared_auth::metrics::HttpMetrics;
use tokio::net::TcpListener;

pub use config::ServeConfig;
pub use db::migrate;
pub use import::{ImportSummary, import};
pub use openapi::openapi;
pub use seed::seed;

/// Request bodies are at most 16 KiB at the services (API.md section 1).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

pub use read_routing::Pools;

#[derive(Clone)]
pub struct AppState {
    pub pools: Pools,
    pub verifier: Arc<Verifier>,
}

impl FromRef<AppState> for Arc<Verifier> {
    fn from_ref(state: &AppState) -> Self {
        state.verifier.clone()
    }
}

/// The full router: `/v1/news/...`, `/healthz`, `/readyz`, problems for everything else.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .merge(routes::articles::router())
        .merge(routes::comments::router())
        .merge(routes::engagement::router())
        .merge(routes::directory::router())
        .merge(routes::me::router())
        .route("/openapi.json", get(openapi::serve));
    let metrics = HttpMetrics::with_extra("news", state.pools.named(), |registry| {
        state.pools.register_metrics(registry);
    });
    metrics.spawn_pool_sampler(Duration::from_secs(5));
    let health = shared_auth::health::router_for(state.pools.health(), error::RETRY_AFTER_SECS);
    let routes = Router::new().nest("/v1/news", api).merge(health);
    shared_auth::stack::service_stack(routes, metrics, MAX_BODY_BYTES).with_state(state)
}

/// A bound, ready-to-run news service.
pub struct Application {
    port: u16,
    listener: TcpListener,
    router: Router,
}

impl Application {
    /// Builds pools and the verifier, migrates when asked, and binds the listener (port 0 in tests).
    pub async fn build(config: ServeConfig) -> anyhow::Result<Self> {
        if config.migrate_on_start {
            let owner = config.owner_database_url.as_deref().ok_or_else(|| {
                anyhow::anyhow!("NEWS_MIGRATE_ON_START needs NEWS_OWNER_DATABASE_URL")
            })?;
            migrate(owner).await?;
        }
        let pools = Pools::connect(
            &config.database_url,
            config.database_read_url.as_deref(),
            config.db_max_connections,
            &config.read_routing,
        )?;
        let verifier = Verifier::from_config(&config.auth).await?;
        let state = AppState { pools, verifier };
        let listener = TcpListener::bind(config.listen_addr).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            port,
            listener,
            router: router(state),
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
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shared_auth::telemetry::shutdown_signal())
            .await
    }
}
