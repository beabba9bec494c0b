//! gateway: the front door of the system.
//!
//! It owns the edge: the route table of which endpoints exist and need a token (learned from the
//! services' own OpenAPI documents, never written here), token verification (through shared-auth,
//! with a bounded cache of verified tokens), per-caller rate limits, CORS, the 1 MiB body limit, a
//! shared cache of public answers (cache.rs), and proxying `/v1/lingo/*` and `/v1/news/*` to the
//! services' replicas with streamed bodies, cooldowns, readiness probes, panic routing and the
//! failure answers of docs/gateway.md. It owns no data and must never answer a `/v1` request itself
//! beyond refusing it or replaying a service's public answer: the services decide every success,
//! and they verify the forwarded `Authorization` header again themselves.

pub mod auth;
pub mod cache;
pub mod client;
pub mod client_addr;
pub mod config;
pub mod docs;
pub mod edge;
pub mod learn;
pub mod metrics;
pub mod ops;
pub mod proxy;
pub mod ratelimit;
pub mod routes;
pub mod server;
pub mod upstream;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{FromRef, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::response::Response;
use axum::routing::get;
use shared_auth::Verifier;
use shared_auth::http::request_id::in_request_context;
use shared_auth::http::serve::with_allowed_methods_named;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tower::{Layer as _, ServiceExt as _};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::EdgeAuth;
use crate::cache::AnswerCache;
use crate::client::UpstreamClient;
use crate::client_addr::TrustedProxies;
use crate::config::GatewayConfig;
use crate::metrics::Metrics;
use crate::proxy::Proxy;
use crate::ratelimit::RateLimiter;
use crate::routes::{Group, RouteTable};
use crate::upstream::UpstreamGroup;

/// Everything a request handler needs.
#[derive(Clone)]
pub struct AppState {
    pub auth: Arc<EdgeAuth>,
    pub limiter: Option<Arc<RateLimiter>>,
    pub proxy: Arc<Proxy>,
    pub lingo: Arc<UpstreamGroup>,
    pub news: Arc<UpstreamGroup>,
    pub metrics: Arc<Metrics>,
    pub trusted_proxies: Arc<TrustedProxies>,
    /// Both groups' routes, learned from their documents.
    pub routes: Arc<RouteTable>,
    /// The cache of public answers; `None` when `GATEWAY_CACHE_MAX_BYTES` is 0.
    pub cache: Option<Arc<AnswerCache>>,
}

impl AppState {
    pub fn group(&self, group: Group) -> &UpstreamGroup {
        match group {
            Group::Lingo => &self.lingo,
            Group::News => &self.news,
        }
    }
}

impl FromRef<AppState> for Arc<Metrics> {
    fn from_ref(state: &AppState) -> Self {
        state.metrics.clone()
    }
}

/// A gateway bound to its listener, ready to serve.
pub struct Application {
    listener: TcpListener,
    port: u16,
    frontend: Frontend,
    header_read_timeout: Duration,
    workers: usize,
    background: Vec<JoinHandle<()>>,
}

impl Application {
    /// Binds the listener (port 0 picks a free one), loads the keys and starts the readiness
    /// probes and the route learning (routed by the compiled-in document until then).
    pub async fn build(config: GatewayConfig) -> anyhow::Result<Self> {
        let verifier = Verifier::from_config(&config.auth)
            .await
            .context("auth configuration")?;
        let metrics = Arc::new(Metrics::new());
        // The probes' own client, on the runtime that runs them.
        let client = UpstreamClient::new(config.connect_timeout(), config.upstream_timeout());
        let lingo = Arc::new(UpstreamGroup::new(
            Group::Lingo,
            &config.lingo_upstreams.0,
            config.cooldown(),
            config.down_probe_interval(),
        ));
        let news = Arc::new(UpstreamGroup::new(
            Group::News,
            &config.news_upstreams.0,
            config.cooldown(),
            config.down_probe_interval(),
        ));
        let routes = Arc::new(learn::compiled_routes()?);
        let limiter = config.rate_limit_enabled.then(|| {
            Arc::new(RateLimiter::new(
                Duration::from_secs(config.rate_limit_window_secs),
                config.rate_limit_reads,
                config.rate_limit_writes,
                config.rate_limit_max_keys,
            ))
        });
        let state = AppState {
            auth: Arc::new(EdgeAuth::new(
                verifier,
                config.token_cache_capacity,
                metrics.clone(),
            )),
            limiter,
            proxy: Arc::new(Proxy::new(
                UpstreamClient::new(config.connect_timeout(), config.upstream_timeout()),
                config.upstream_timeout(),
                metrics.clone(),
            )),
            lingo: lingo.clone(),
            news: news.clone(),
            metrics: metrics.clone(),
            trusted_proxies: Arc::new(TrustedProxies::new(config.trusted_proxies.0.clone())),
            routes: routes.clone(),
            cache: AnswerCache::new(
                config.cache_max_bytes,
                2 * (config.connect_timeout() + config.upstream_timeout()),
                metrics.clone(),
            )
            .map(Arc::new),
        };
        let frontend = Frontend::new(state, cors_layer(&config.cors_allowed_origins.0)?);
        let learners = [&lingo, &news].map(|group| {
            tokio::spawn(learn::learn_forever(
                group.clone(),
                routes.clone(),
                UpstreamClient::new(config.connect_timeout(), config.upstream_timeout()),
                metrics.clone(),
                config.routes_refresh_interval(),
            ))
        });
        let probes = tokio::spawn(upstream::probe_forever(
            vec![lingo, news],
            client,
            config.probe_interval(),
            config.down_probe_interval(),
        ));

        let listener = shared_auth::http::serve::bind(config.listen_addr.as_str())
            .await
            .with_context(|| format!("cannot listen on {}", config.listen_addr))?;
        let port = listener.local_addr()?.port();
        let workers = config.worker_count();
        tracing::info!(addr = %listener.local_addr()?, workers, "gateway listening");
        Ok(Self {
            listener,
            port,
            frontend,
            header_read_timeout: config.header_read_timeout(),
            workers,
            background: [
                probes,
                tokio::spawn(client::close_idle_connections_forever()),
            ]
            .into_iter()
            .chain(learners)
            .collect(),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGINT or SIGTERM, then drains in-flight requests.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.run_until(shared_auth::telemetry::shutdown_signal())
            .await
    }

    /// Serves until `shutdown` resolves: from then on no new connection is accepted, and the
    /// call returns once the requests in flight are answered.
    pub async fn run_until<F>(self, shutdown: F) -> std::io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let result = server::serve(
            self.listener,
            self.frontend,
            self.header_read_timeout,
            self.workers,
            shutdown,
        )
        .await;
        for task in self.background {
            task.abort();
        }
        result
    }
}

/// Everything a request goes through, outermost first: the 405 detail, the request context
/// (request id, log line, problem bodies), the request metrics, then CORS and either the edge
/// (every `/v1/*` request) or the router of the gateway's own routes (whose fallback is the edge
/// too). Written as plain calls rather than `from_fn` middleware layers, and with `/v1/*` going
/// straight to the edge: on the proxy path each layer and the router (a service clone and a boxed
/// future per request each) showed as several percent of the gateway's CPU.
#[derive(Clone)]
pub struct Frontend(Arc<FrontendParts>);

struct FrontendParts {
    router: Router,
    /// The same routes without CORS, for `OPTIONS` requests that are no preflight it answers.
    router_without_cors: Router,
    state: AppState,
    cors: Option<Cors>,
}

impl Frontend {
    fn new(state: AppState, cors: Option<Cors>) -> Self {
        let routes = Router::new()
            .route("/healthz", get(ops::healthz))
            .route("/readyz", get(ops::readyz))
            .route("/metrics", get(ops::metrics))
            .merge(docs::router())
            .fallback(edge::handler);
        let router = routes
            .clone()
            .layer(tower::util::option_layer(
                cors.as_ref().map(|c| c.layer.clone()),
            ))
            .with_state(state.clone());
        Self(Arc::new(FrontendParts {
            router,
            router_without_cors: routes.with_state(state.clone()),
            state,
            cors,
        }))
    }

    pub async fn handle(self, request: Request) -> Response {
        let parts = &*self.0;
        let response = in_request_context(request, |request| async move {
            // Boxed: inline, the router's and the edge's futures would make every request's
            // future four times larger (13 KiB), and that future is moved around whole (the
            // copies showed in the profile; without this box the gateway executes 102,800
            // instructions per request instead of 65,800, though server.rs boxes it too).
            metrics::tracked(&parts.state.metrics, request, |request| {
                Box::pin(parts.route(request))
            })
            .await
        })
        .await;
        with_allowed_methods_named(response).await
    }
}

impl FrontendParts {
    async fn route(&self, request: Request) -> Response {
        // tower-http's CORS layer answers every `OPTIONS` request with an empty 200. Only a
        // preflight it can accept goes to it; any other `OPTIONS` is judged like any method
        // (a 405 or a 404), as it is with CORS off.
        let cors = self.cors.as_ref().filter(|cors| {
            request.method() != Method::OPTIONS
                || cors.answers_preflight(&request, &self.state.routes)
        });
        // None of the gateway's own routes is under `/v1/`.
        let answer = if request.uri().path().starts_with("/v1/") {
            match cors {
                None => return edge::handle(&self.state, request).await,
                Some(cors) => {
                    let edge = tower::service_fn(|request| async {
                        Ok(edge::handle(&self.state, request).await)
                    });
                    cors.layer.layer(edge).oneshot(request).await
                }
            }
        } else if cors.is_none() && request.method() == Method::OPTIONS {
            self.router_without_cors.clone().oneshot(request).await
        } else {
            self.router.clone().oneshot(request).await
        };
        match answer {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// CORS for the configured origins: the layer, and which origins its preflights accept.
struct Cors {
    layer: CorsLayer,
    /// `None` for `*`.
    origins: Option<Vec<HeaderValue>>,
}

impl Cors {
    /// Whether `request` is a preflight (the Fetch standard's `OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`) from an allowed origin, to a path that may be an endpoint.
    fn answers_preflight(&self, request: &Request, routes: &RouteTable) -> bool {
        let headers = request.headers();
        let Some(origin) = headers.get(header::ORIGIN) else {
            return false;
        };
        let allowed = self
            .origins
            .as_ref()
            .is_none_or(|origins| origins.contains(origin));
        let path = request.uri().path();
        let no_endpoint = path.starts_with("/v1/") && !routes.has_endpoint(path);
        allowed && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) && !no_endpoint
    }
}

/// An origin of `CORS_ALLOWED_ORIGINS` as a browser's `Origin` header would carry it; refused
/// when it could never match one (a path or trailing slash, upper case, no scheme), rather than
/// silently allowing nobody.
fn as_browsers_send_it(origin: &str) -> anyhow::Result<HeaderValue> {
    let url = reqwest::Url::parse(origin)
        .with_context(|| format!("CORS origin {origin:?} is not a URL like https://app.example"))?;
    let serialized = url.origin().ascii_serialization();
    anyhow::ensure!(
        serialized == origin,
        "CORS origin {origin:?} never matches a browser's Origin header; write it as {serialized:?}"
    );
    HeaderValue::from_str(origin).with_context(|| format!("bad CORS origin {origin:?}"))
}

/// CORS for the configured origins (`*` allows any); `None` when the list is empty.
fn cors_layer(origins: &[String]) -> anyhow::Result<Option<Cors>> {
    if origins.is_empty() {
        return Ok(None);
    }
    let listed = if origins.iter().any(|o| o == "*") {
        None
    } else {
        let values = origins
            .iter()
            .map(|o| as_browsers_send_it(o))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Some(values)
    };
    let allow_origin = match &listed {
        None => AllowOrigin::any(),
        Some(values) => AllowOrigin::list(values.clone()),
    };
    let name = HeaderName::from_static;
    let layer = CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::IF_NONE_MATCH,
            name("idempotency-key"),
            name("x-request-id"),
            name("traceparent"),
        ])
        .expose_headers([
            header::LOCATION,
            header::ETAG,
            header::RETRY_AFTER,
            header::WWW_AUTHENTICATE,
            name("x-request-id"),
            name("idempotency-replayed"),
            name("ratelimit-limit"),
            name("ratelimit-remaining"),
            name("ratelimit-reset"),
        ])
        .max_age(Duration::from_secs(600));
    Ok(Some(Cors {
        layer,
        origins: listed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cors_origins_are_taken_only_as_browsers_send_them() {
        for good in [
            "https://app.example",
            "http://localhost:3000",
            "https://[::1]:8443",
        ] {
            assert!(as_browsers_send_it(good).is_ok(), "{good}");
        }
        for bad in [
            "https://app.example/",
            "https://App.example",
            "https://app.example:443",
            "app.example",
            "https://app.example/path",
        ] {
            assert!(as_browsers_send_it(bad).is_err(), "{bad}");
        }
    }
}
