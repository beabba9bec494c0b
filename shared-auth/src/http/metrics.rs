//! `/metrics` for the services, in the Prometheus text format: HTTP requests by route template,
//! method and status, and a latency histogram per route. Metrics that are sampled rather than
//! counted (the database pools of `pg::metrics`) plug in as [`Sampled`] sources, so this module
//! knows no database. One registry per application, so several services can run in one test
//! process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::http::problem::Problem;

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

pub type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The buckets of every duration histogram.
pub fn seconds_histogram() -> Histogram {
    // 0.5 ms .. ~8 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

/// A source of metrics that are sampled, not counted per request.
pub trait Sampled: Send + Sync + 'static {
    /// Brings the source's gauges up to date; called before every scrape.
    fn refresh(&self);
    /// Starts sampling in the background every `every`; the task ends when the source is
    /// dropped with the metrics that own it.
    fn spawn_sampler(self: Arc<Self>, every: Duration);
}

pub struct HttpMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<RouteLabels>,
    sampled: Vec<Arc<dyn Sampled>>,
}

/// Registers the request metrics first, then lets sampled sources register theirs.
pub struct HttpMetricsBuilder {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<RouteLabels>,
    sampled: Vec<Arc<dyn Sampled>>,
}

impl HttpMetrics {
    /// Metrics named `<prefix>_...` (e.g. `lingo_http_requests_total`).
    pub fn builder(prefix: &str) -> HttpMetricsBuilder {
        let mut registry = Registry::with_prefix(prefix);
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily<RouteLabels> = Family::new_with_constructor(seconds_histogram);
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
        HttpMetricsBuilder {
            registry,
            requests,
            latency,
            sampled: Vec::new(),
        }
    }

    /// Starts the background sampler of every sampled source.
    pub fn spawn_samplers(&self, every: Duration) {
        for source in &self.sampled {
            source.clone().spawn_sampler(every);
        }
    }

    pub fn render(&self) -> Result<String, std::fmt::Error> {
        for source in &self.sampled {
            source.refresh();
        }
        encode(&self.registry)
    }
}

/// The metrics of `registry` in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

/// The answer to `GET /metrics` (the gateway's and the services'): the `rendered` metrics as
/// OpenMetrics text, or a 500 problem when they could not be written (the cause is logged, not
/// shown).
pub fn openmetrics_answer(rendered: Result<String, std::fmt::Error>) -> Response {
    match rendered {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
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

impl HttpMetricsBuilder {
    /// The registry, for a sampled source to register its metrics in.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.registry
    }

    pub fn with_sampled(mut self, source: Arc<dyn Sampled>) -> Self {
        self.sampled.push(source);
        self
    }

    pub fn build(self) -> Arc<HttpMetrics> {
        Arc::new(HttpMetrics {
            registry: self.registry,
            requests: self.requests,
            latency: self.latency,
            sampled: self.sampled,
        })
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
    openmetrics_answer(metrics.render())
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
