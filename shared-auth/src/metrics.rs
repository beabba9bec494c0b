//! `/metrics` for the services, in the Prometheus text format: HTTP requests by route template,
//! method and status, a latency histogram per route, and the database pools (connections in use
//! and idle, and a sampled wait for a connection). One registry per application, so several
//! services can run in one test process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use sqlx::PgPool;

use crate::problem::Problem;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: &'static str,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolName {
    pool: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_histogram() -> Histogram {
    // 0.5 ms .. ~8 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

pub struct HttpMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<RouteLabels>,
    pool_connections: Family<PoolLabels, Gauge>,
    pool_wait: HistogramFamily<PoolName>,
    pools: Vec<(&'static str, PgPool)>,
}

impl HttpMetrics {
    /// Metrics named `<prefix>_...` (e.g. `lingo_http_requests_total`) for the given pools.
    pub fn new(prefix: &str, pools: Vec<(&'static str, PgPool)>) -> Arc<Self> {
        Self::with_extra(prefix, pools, |_| {})
    }

    /// Like [`HttpMetrics::new`], letting the service register metrics of its own (pool health,
    /// read routing) under the same prefix and `/metrics`.
    pub fn with_extra(
        prefix: &str,
        pools: Vec<(&'static str, PgPool)>,
        register: impl FnOnce(&mut Registry),
    ) -> Arc<Self> {
        let mut registry = Registry::with_prefix(prefix);
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily<RouteLabels> = Family::new_with_constructor(seconds_histogram);
        let pool_connections = Family::<PoolLabels, Gauge>::default();
        let pool_wait: HistogramFamily<PoolName> = Family::new_with_constructor(seconds_histogram);
        registry.register(
            "http_requests",
            "Requests answered, by route template, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to the response headers, by route template",
            latency.clone(),
        );
        registry.register(
            "db_pool_connections",
            "Database connections by pool and state (in_use, idle)",
            pool_connections.clone(),
        );
        registry.register(
            "db_pool_wait_seconds",
            "Time to acquire a connection, sampled every few seconds, by pool",
            pool_wait.clone(),
        );
        register(&mut registry);
        Arc::new(Self {
            registry,
            requests,
            latency,
            pool_connections,
            pool_wait,
            pools,
        })
    }

    /// Samples how long acquiring a connection takes, every `every`, for as long as the metrics
    /// live (the handlers use the pools directly, so there is no per-query hook to time).
    pub fn spawn_pool_sampler(self: &Arc<Self>, every: Duration) {
        let metrics = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                let Some(metrics) = metrics.upgrade() else {
                    return;
                };
                for (name, pool) in &metrics.pools {
                    let started = Instant::now();
                    if let Ok(connection) = pool.acquire().await {
                        drop(connection);
                        metrics
                            .pool_wait
                            .get_or_create(&PoolName { pool: name })
                            .observe(started.elapsed().as_secs_f64());
                    }
                }
            }
        });
    }

    pub fn render(&self) -> Result<String, std::fmt::Error> {
        for (name, pool) in &self.pools {
            let idle = pool.num_idle() as i64;
            let size = i64::from(pool.size());
            let gauge = |state| {
                self.pool_connections
                    .get_or_create(&PoolLabels { pool: name, state })
            };
            gauge("idle").set(idle);
            gauge("in_use").set((size - idle).max(0));
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// A fixed label set for methods, so clients cannot grow the metric's cardinality.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Middleware counting every request by its route template (unknown paths share one label).
pub async fn track(
    State(metrics): State<Arc<HttpMetrics>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    metrics
        .latency
        .get_or_create(&RouteLabels {
            route: route.clone(),
        })
        .observe(started.elapsed().as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// `GET /metrics`.
pub async fn handler(State(metrics): State<Arc<HttpMetrics>>) -> Response {
    match metrics.render() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            text,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "rendering metrics failed");
            Problem::internal().into_response()
        }
    }
}

/// Mounts `GET /metrics` and the request counter on a service's router (call it after the routes
/// and the fallback, before the request-context layer, so every answer is counted).
pub fn instrument<S>(router: axum::Router<S>, metrics: Arc<HttpMetrics>) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router
        .route(
            "/metrics",
            axum::routing::get(handler).with_state(metrics.clone()),
        )
        .layer(axum::middleware::from_fn_with_state(metrics, track))
}
