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
pub mod routes;
pub mod seed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use shared_auth::Verifier;
use shared_auth::load::LoadLimits;
use shared_auth::metrics::HttpMetrics;
use sqlx::PgPool;
use tokio::net::TcpListener;

pub use config::ServeConfig;
pub use db::migrate;
pub use import::{ImportSummary, import};
pub use openapi::openapi;
pub use seed::seed;

/// Request bodies are at most 128 KiB, the limit shared by both services.
pub const MAX_BODY_BYTES: usize = shared_auth::stack::MAX_BODY_BYTES;

/// How long `/readyz` waits for each pool to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(3);

/// The two pools: the primary for writes and for whatever a signed-in caller reads (so they see
/// their own writes at once), the read pool (a replica, or the primary) for anonymous reads.
#[derive(Clone, Debug)]
pub struct Pools {
    pub primary: PgPool,
    pub read: PgPool,
}

impl Pools {
    /// The pool a read should use: personalised reads go to the primary.
    pub fn for_reader(&self, signed_in: bool) -> &PgPool {
        if signed_in { &self.primary } else { &self.read }
    }
}

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
pub fn router(state: AppState, limits: LoadLimits) -> Router {
    let api = Router::new()
        .merge(routes::articles::router())
        .merge(routes::comments::router())
        .merge(routes::engagement::router())
        .merge(routes::directory::router())
        .merge(routes::me::router())
        .route("/openapi.json", get(openapi::serve));
    let pools = vec![
        ("primary", state.pools.primary.clone()),
        ("read", state.pools.read.clone()),
    ];
    let metrics = HttpMetrics::new("news", pools.clone());
    metrics.spawn_pool_sampler(Duration::from_secs(5));
    let health = shared_auth::health::router(pools, READY_TIMEOUT, error::RETRY_AFTER_SECS);
    let api = shared_auth::load::guard(api, limits);
    let api = shared_auth::pool_pressure::track(
        api,
        vec![state.pools.primary.clone(), state.pools.read.clone()],
    );
    let routes = Router::new().nest("/v1/news", api).merge(health);
    shared_auth::stack::service_stack(routes, metrics, MAX_BODY_BYTES).with_state(state)
}

/// A bound, ready-to-run news service.
pub struct Application {
    port: u16,
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
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
        let timeouts = db::PoolTimeouts {
            acquire: Duration::from_millis(config.db_acquire_timeout_ms),
            statement: Duration::from_millis(config.request_timeout_ms),
        };
        let primary = db::lazy_pool(
            &config.database_url,
            config.db_max_connections,
            "news-service",
            timeouts,
        )?;
        let read = match &config.database_read_url {
            Some(url) if !url.is_empty() => db::lazy_pool(
                url,
                config.db_max_connections,
                "news-service-read",
                timeouts,
            )?,
            _ => primary.clone(),
        };
        let verifier = Verifier::from_config(&config.auth).await?;
        let state = AppState {
            pools: Pools { primary, read },
            verifier,
        };
        let listener = TcpListener::bind(config.listen_addr).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            port,
            listener,
            router: router(state, config.load_limits()),
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
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
        shared_auth::serve::serve(
            self.listener,
            self.router,
            self.header_read_timeout,
            shared_auth::telemetry::shutdown_signal(),
        )
        .await
    }
}
