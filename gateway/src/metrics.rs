//! `/metrics`: request counts by route group, method and status, a latency histogram, upstream
//! errors by kind, requests in flight, token-cache hits, the verification keys loaded, the route
//! documents read (by outcome) and the answer cache's lookups and size, in the Prometheus /
//! OpenMetrics text format. One registry per [`crate::Application`], so several gateways can run
//! in one test process.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use shared_auth::http::metrics::{HistogramFamily, encode, method_label, openmetrics_answer};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    group: &'static str,
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamErrorLabels {
    group: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteDocumentLabels {
    group: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    result: &'static str,
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: HistogramFamily<GroupLabels>,
    upstream_errors: Family<UpstreamErrorLabels, Counter>,
    in_flight: Gauge,
    /// The two token-cache counters, resolved once (no label lookup per request).
    token_cache_hits: Counter,
    token_cache_misses: Counter,
    ready_replicas: Family<GroupLabels, Gauge>,
    token_keys_loaded: Gauge,
    route_documents: Family<RouteDocumentLabels, Counter>,
    answer_cache: AnswerCacheMetrics,
}

/// The answer cache's counters (resolved once, like the token cache's) and its size.
struct AnswerCacheMetrics {
    hits: Counter,
    misses: Counter,
    coalesced: Counter,
    passes: Counter,
    bytes: Gauge,
    entries: Gauge,
    /// The bytes being read to be stored, all fills together: the fill budget's own counter.
    filling: Gauge,
    unbuffered: Counter,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gateway");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: HistogramFamily<GroupLabels> = Family::new_with_constructor(latency_histogram);
        let upstream_errors = Family::<UpstreamErrorLabels, Counter>::default();
        let in_flight = Gauge::default();
        let token_cache = Family::<CacheLabels, Counter>::default();
        let ready_replicas = Family::<GroupLabels, Gauge>::default();
        let token_keys_loaded = Gauge::default();
        let route_documents = Family::<RouteDocumentLabels, Counter>::default();
        // Named like the services' request metrics (`<binary>_http_…`), one scheme for all three.
        registry.register(
            "http_requests",
            "Requests answered, by route group, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time until the response headers, by route group",
            latency.clone(),
        );
        registry.register(
            "upstream_errors",
            "Failed upstream attempts, by group and kind",
            upstream_errors.clone(),
        );
        registry.register(
            "in_flight_requests",
            "Requests being handled",
            in_flight.clone(),
        );
        registry.register(
            "token_cache",
            "Token verifications answered from the cache (hit) or not (miss)",
            token_cache.clone(),
        );
        registry.register(
            "upstream_ready_replicas",
            "Replicas of each upstream group whose last readiness probe succeeded",
            ready_replicas.clone(),
        );
        registry.register(
            "token_keys_loaded",
            "Verification keys loaded (the HS256 secret and the JWKS's usable keys); 0 until a \
             configured JWKS was loaded, when no token can be verified",
            token_keys_loaded.clone(),
        );
        registry.register(
            "route_documents",
            "Route documents read from replicas, by group and outcome (ok, unavailable, invalid, \
             wrong_prefix, too_large)",
            route_documents.clone(),
        );
        let counter = |result| token_cache.get_or_create(&CacheLabels { result }).clone();
        let answer_cache = AnswerCacheMetrics::register(&mut registry);
        Self {
            registry,
            requests,
            latency,
            upstream_errors,
            in_flight,
            token_cache_hits: counter("hit"),
            token_cache_misses: counter("miss"),
            ready_replicas,
            token_keys_loaded,
            route_documents,
            answer_cache,
        }
    }

    /// A GET or HEAD answered from the answer cache without waiting.
    pub fn answer_cache_hit(&self) {
        self.answer_cache.hits.inc();
    }

    /// A cacheable request that went to the upstream itself (and may have filled the cache).
    pub fn answer_cache_miss(&self) {
        self.answer_cache.misses.inc();
    }

    /// A miss that waited for another request's upstream call to the same URL.
    pub fn answer_cache_coalesced(&self) {
        self.answer_cache.coalesced.inc();
    }

    /// A request for a URL whose answer was lately found not storable: sent on without waiting.
    pub fn answer_cache_pass(&self) {
        self.answer_cache.passes.inc();
    }

    /// The gauge of the bytes being read to be stored, which the cache's fill budget counts in.
    pub fn answer_cache_filling(&self) -> Gauge {
        self.answer_cache.filling.clone()
    }

    /// A storable answer streamed through uncached: the fill budget had no room for it.
    pub fn answer_cache_unbuffered(&self) {
        self.answer_cache.unbuffered.inc();
    }

    /// What the answer cache holds after a change.
    pub fn set_answer_cache_size(&self, bytes: u64, entries: usize) {
        self.answer_cache
            .bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.answer_cache
            .entries
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
    }

    pub fn token_cache_hit(&self) {
        self.token_cache_hits.inc();
    }

    pub fn token_cache_miss(&self) {
        self.token_cache_misses.inc();
    }

    /// The number of ready replicas of `group` after a probe round.
    pub fn set_ready_replicas(&self, group: &'static str, ready: usize) {
        self.ready_replicas
            .get_or_create(&GroupLabels { group })
            .set(i64::try_from(ready).unwrap_or(i64::MAX));
    }

    /// The number of verification keys loaded now.
    pub fn set_token_keys_loaded(&self, keys: usize) {
        self.token_keys_loaded
            .set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// One replica's route document was read: `ok`, or why it was not used.
    pub fn route_document(&self, group: &'static str, outcome: &'static str) {
        self.route_documents
            .get_or_create(&RouteDocumentLabels { group, outcome })
            .inc();
    }

    /// One failed attempt at an upstream: `connect`, `timeout`, `reset`, `body`.
    pub fn upstream_error(&self, group: &'static str, kind: &'static str) {
        self.upstream_errors
            .get_or_create(&UpstreamErrorLabels { group, kind })
            .inc();
    }

    pub fn render(&self) -> Result<String, std::fmt::Error> {
        encode(&self.registry)
    }
}

impl AnswerCacheMetrics {
    fn register(registry: &mut Registry) -> Self {
        let lookups = Family::<CacheLabels, Counter>::default();
        let bytes = Gauge::default();
        let entries = Gauge::default();
        let filling = Gauge::default();
        let unbuffered = Counter::default();
        registry.register(
            "answer_cache",
            "Cacheable requests (anonymous GET and HEAD) by result: hit (answered from the cache), \
             miss (sent upstream), coalesced (waited for another request's upstream call), pass \
             (the URL's answer was lately not storable)",
            lookups.clone(),
        );
        registry.register(
            "answer_cache_bytes",
            "Bytes the answer cache holds (bodies, heads, keys and a fixed overhead per entry)",
            bytes.clone(),
        );
        registry.register(
            "answer_cache_entries",
            "Entries the answer cache holds",
            entries.clone(),
        );
        registry.register(
            "answer_cache_filling_bytes",
            "Bytes of answers being read to be stored (all fills together, at most a quarter of \
             GATEWAY_CACHE_MAX_BYTES)",
            filling.clone(),
        );
        registry.register(
            "answer_cache_unbuffered",
            "Storable answers streamed through without being stored because the bytes being read \
             to be stored were at their limit",
            unbuffered.clone(),
        );
        let counter = |result| lookups.get_or_create(&CacheLabels { result }).clone();
        Self {
            hits: counter("hit"),
            misses: counter("miss"),
            coalesced: counter("coalesced"),
            passes: counter("pass"),
            bytes,
            entries,
            filling,
            unbuffered,
        }
    }
}

/// The label of a path: `lingo`, `news`, or `gateway` for the gateway's own routes (and 404s).
fn route_group(path: &str) -> &'static str {
    let matches = |prefix: &str| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if matches("/v1/lingo") {
        "lingo"
    } else if matches("/v1/news") {
        "news"
    } else {
        "gateway"
    }
}

/// Decrements the in-flight gauge even when the request future is dropped (client gone).
struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Runs `inner` for `request`, counting it (called inside the request context, so statuses are
/// final).
pub async fn tracked<F, Fut>(metrics: &Metrics, request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let group = route_group(request.uri().path());
    let method = method_label(request.method());
    metrics.in_flight.inc();
    let guard = InFlight(metrics.in_flight.clone());
    let started = Instant::now();
    let response = inner(request).await;
    drop(guard);
    metrics
        .latency
        .get_or_create(&GroupLabels { group })
        .observe(started.elapsed().as_secs_f64());
    metrics
        .requests
        .get_or_create(&RequestLabels {
            group,
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}

/// `GET /metrics`.
pub async fn handler(State(metrics): State<Arc<Metrics>>) -> Response {
    openmetrics_answer(metrics.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_the_prefix_exactly() {
        assert_eq!(route_group("/v1/lingo"), "lingo");
        assert_eq!(route_group("/v1/lingo/me/xp"), "lingo");
        assert_eq!(route_group("/v1/news/articles"), "news");
        assert_eq!(route_group("/v1/newsroom"), "gateway");
        assert_eq!(route_group("/metrics"), "gateway");
    }

    #[test]
    fn renders_counters() {
        let metrics = Metrics::new();
        metrics.token_cache_hit();
        metrics.upstream_error("news", "connect");
        metrics.set_ready_replicas("lingo", 0);
        metrics.set_ready_replicas("news", 2);
        let text = metrics.render().expect("render");
        assert!(
            text.contains("gateway_token_cache_total{result=\"hit\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gateway_upstream_errors_total{group=\"news\",kind=\"connect\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gateway_upstream_ready_replicas{group=\"lingo\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("gateway_upstream_ready_replicas{group=\"news\"} 2"),
            "{text}"
        );
    }
}
