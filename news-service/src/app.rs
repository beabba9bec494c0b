//! The service skeleton: [`router`] (the whole HTTP surface) and [`Application`] (bind, serve,
//! stop, and the idempotency cleanup task that runs alongside).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use shared_auth::Verifier;
use shared_auth::http::load::LoadLimits;
use shared_auth::http::metrics::HttpMetrics;
use shared_auth::pg::pool::DATABASE_RETRY_AFTER_SECS;
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

use crate::config::ServeConfig;
use crate::state::{ApiDocument, AppState, Db, SearchSlots};
use crate::{counter_fold, db, idempotency, openapi, routes};

/// Request bodies are at most 128 KiB, the limit shared by both services.
pub const MAX_BODY_BYTES: usize = shared_auth::http::stack::MAX_BODY_BYTES;

/// The full router: `/v1/news/...`, `/healthz`, `/readyz`, problems for everything else. Only
/// the resources are under `limits` and the pool-pressure check (both pools), so health checks,
/// metrics and the document answer under overload and while the database is down.
pub fn router(state: AppState, limits: LoadLimits) -> Router {
    let (api, _) = routes::resources().split_for_parts();
    let (document, _) = routes::document().split_for_parts();
    let api = shared_auth::http::load::guard(api, limits);
    let api = shared_auth::pg::pool_pressure::track(
        api,
        vec![state.db.primary.clone(), state.db.read.clone()],
    );
    let metrics = HttpMetrics::with_extra("news", state.db.named(), |registry| {
        state.db.register_metrics(registry);
    });
    metrics.spawn_pool_sampler(Duration::from_secs(5));
    let health = shared_auth::pg::health::router_for(state.db.health(), DATABASE_RETRY_AFTER_SECS);
    let routes = api.merge(document).merge(health);
    shared_auth::http::stack::service_stack(routes, metrics).with_state(state)
}

/// A bound, ready-to-run news service.
pub struct Application {
    port: u16,
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    /// The sweep of expired `Idempotency-Key` records. Both tasks are aborted when the
    /// application is dropped: one built and never run, or one that stopped, leaves none behind.
    cleanup: AbortOnDropHandle<()>,
    /// The counter slot folder; `None` when NEWS_COUNTER_FOLD_INTERVAL_MS is 0.
    folder: Option<AbortOnDropHandle<()>>,
}

impl Application {
    /// Builds pools and the verifier, migrates when asked, binds the listener (port 0 in tests)
    /// and starts the sweep of expired idempotency keys and the counter slot folder.
    pub async fn build(config: ServeConfig) -> anyhow::Result<Self> {
        if config.migrate_on_start {
            let owner = config.owner_database_url.as_deref().ok_or_else(|| {
                anyhow::anyhow!("NEWS_MIGRATE_ON_START needs NEWS_OWNER_DATABASE_URL")
            })?;
            db::migrate(owner).await?;
        }
        let db = Db::connect(
            &config.database_url,
            config.database_read_url.as_deref(),
            config.db_max_connections,
            db::PoolTimeouts {
                acquire: Duration::from_millis(config.db_acquire_timeout_ms),
                statement: Duration::from_millis(config.request_timeout_ms),
            },
            &config.read_routing,
        )?;
        let verifier = Verifier::from_config(&config.auth).await?;
        let cleanup = AbortOnDropHandle::new(tokio::spawn(idempotency::cleanup_task(
            db.primary.clone(),
            Duration::from_secs(config.idempotency_cleanup_secs.max(1)),
        )));
        let folder = (config.counter_fold_interval_ms > 0).then(|| {
            AbortOnDropHandle::new(tokio::spawn(counter_fold::fold_task(
                db.primary.clone(),
                Duration::from_millis(config.counter_fold_interval_ms),
            )))
        });
        let state = AppState {
            db,
            verifier,
            document: ApiDocument(Arc::new(openapi::openapi())),
            search_slots: SearchSlots::for_pool(
                config.db_max_connections,
                Duration::from_millis(config.db_acquire_timeout_ms),
            ),
            query_parses: Arc::default(),
        };
        let listener = shared_auth::http::serve::bind(config.listen_addr).await?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            port,
            listener,
            router: router(state, config.load_limits()),
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
            cleanup,
            folder,
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
        let _folder = self.folder;
        shared_auth::http::serve::serve(
            self.listener,
            self.router,
            self.header_read_timeout,
            shared_auth::telemetry::shutdown_signal(),
        )
        .await
    }
}
