//! The service skeleton: [`router`] (the whole HTTP surface) and [`Application`] (bind, serve,
//! stop, and the idempotency cleanup task that runs alongside).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use shared_auth::Verifier;
use shared_auth::http::cache::no_store;
use shared_auth::http::load::LoadLimits;
use shared_auth::http::metrics::HttpMetrics;
use shared_auth::pg::pool::DATABASE_RETRY_AFTER_SECS;
use shared_auth::pg::pool_health::{CheckEvery, PoolHealth};
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

use crate::config::ServeConfig;
use crate::state::{ApiDocument, AppState};
use crate::{db, idempotency, openapi, routes};

/// Request bodies are JSON objects of at most 128 KiB, the limit shared by both services.
pub const MAX_BODY_BYTES: usize = shared_auth::http::stack::MAX_BODY_BYTES;

/// How long `/readyz` waits for the database to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The whole HTTP surface: `/healthz`, `/readyz`, `/v1/lingo/openapi.json` and the resources of
/// `routes/`, with the request-id and problem middleware outermost. Only the resources are under
/// `limits` and the pool-pressure check, so health checks and metrics answer under overload.
pub fn router(state: AppState, limits: LoadLimits) -> Router {
    let pools = vec![("primary", state.db.primary.clone())];
    let every = CheckEvery {
        timeout: READY_TIMEOUT,
        ..CheckEvery::default()
    };
    let pool_health = PoolHealth::spawn(pools.clone(), every);
    let metrics = HttpMetrics::with_extra("lingo", pools, |registry| {
        pool_health.register_metrics(registry);
    });
    metrics.spawn_pool_sampler(Duration::from_secs(5));
    let health = shared_auth::pg::health::router_for(pool_health, DATABASE_RETRY_AFTER_SECS);
    let (resources, _) = routes::resources().split_for_parts();
    let (document, _) = routes::document().split_for_parts();
    let resources = shared_auth::http::load::guard(resources, limits);
    let resources =
        shared_auth::pg::pool_pressure::track(resources, vec![state.db.primary.clone()]);
    let routes = resources.merge(document).merge(health);
    shared_auth::http::stack::service_stack(routes, metrics)
        .layer(middleware::from_fn(private_answers))
        .with_state(state)
}

/// Every `/me/*` answer is the caller's own, and every `/analytics/*` answer holds learners'
/// progress, errors included (a 503 of the load guard, a 404 of an unknown path below them):
/// `Cache-Control: private, no-store`, never stored by a shared cache.
async fn private_answers(request: Request, next: Next) -> Response {
    if routes::is_private(request.uri().path()) {
        no_store(request, next).await
    } else {
        next.run(request).await
    }
}

/// A bound, ready-to-run service.
pub struct Application {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: AppState,
    /// The sweep of expired `Idempotency-Key` records, aborted when the application is dropped:
    /// one built and never run, or one that stopped, leaves no sweep behind.
    cleanup: AbortOnDropHandle<()>,
    limits: LoadLimits,
    header_read_timeout: Duration,
}

impl Application {
    /// Migrates first when `migrate_on_start` is set, builds the verifier and the (lazy) pool,
    /// binds `listen_addr` (port 0 picks a free port; see [`Application::port`]) and starts the
    /// sweep of expired `Idempotency-Key` records.
    pub async fn build(config: ServeConfig) -> anyhow::Result<Self> {
        if config.migrate_on_start {
            let owner_url = config
                .owner_database_url
                .as_deref()
                .context("LINGO_MIGRATE_ON_START needs LINGO_OWNER_DATABASE_URL")?;
            db::migrate(owner_url).await.context("migrating on start")?;
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
        let listener = shared_auth::http::serve::bind(config.listen_addr)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen_addr))?;
        let local_addr = listener.local_addr()?;
        let cleanup_every = Duration::from_secs(config.idempotency_cleanup_secs.max(1));
        let cleanup = AbortOnDropHandle::new(tokio::spawn(idempotency::cleanup_task(
            db.clone(),
            cleanup_every,
        )));
        Ok(Self {
            listener,
            local_addr,
            state: AppState {
                db: db::Db { primary: db },
                verifier,
                document: ApiDocument(Arc::new(openapi::openapi())),
            },
            cleanup,
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
        &self.state.db.primary
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
        let db = self.state.db.primary.clone();
        let router = router(self.state, self.limits);
        let served = shared_auth::http::serve::serve(
            self.listener,
            router,
            self.header_read_timeout,
            signal,
        )
        .await;
        drop(self.cleanup);
        // Close connections cleanly so the database does not log aborted sessions.
        db.close().await;
        tracing::info!("lingo-service stopped");
        served.context("serving HTTP")
    }
}
