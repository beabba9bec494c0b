//! Forwarding one request to a replica of an upstream group: header hygiene both ways, request and
//! response bodies streamed (never buffered whole), the 1 MiB request-body limit, retries only for
//! attempts that never reached an upstream, and the failures of API.md section 5 as problems.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use shared_auth::Problem;
use tracing::Instrument;

use crate::metrics::Metrics;
use crate::upstream::{NoReplica, UpstreamGroup};

/// Largest request body the gateway passes on (API.md section 1).
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;

/// Headers that describe one connection, never the message (RFC 9110 section 7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Client-sent forwarding headers: replaced by the gateway's own, never passed on.
const FORWARDING: &[&str] = &[
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-real-ip",
];

/// Copies `headers` without hop-by-hop headers, including those the `Connection` header names.
pub fn without_hop_by_hop(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let name_str = name.as_str();
        if HOP_BY_HOP.contains(&name_str) || named.iter().any(|n| n == name_str) {
            continue;
        }
        kept.append(name.clone(), value.clone());
    }
    kept
}

/// The headers sent upstream: the client's end-to-end headers (Authorization, x-request-id and
/// traceparent included, unchanged), minus `Host` and forwarding headers, plus the gateway's own
/// `X-Forwarded-For/Proto/Host`.
pub fn upstream_headers(incoming: &HeaderMap, client_ip: IpAddr) -> HeaderMap {
    let host = incoming.get(header::HOST).cloned();
    let mut headers = without_hop_by_hop(incoming);
    headers.remove(header::HOST);
    // `Expect: 100-continue` was already answered by the gateway's own server.
    headers.remove(header::EXPECT);
    for name in FORWARDING {
        headers.remove(*name);
    }
    if let Ok(ip) = HeaderValue::from_str(&client_ip.to_string()) {
        headers.insert(HeaderName::from_static("x-forwarded-for"), ip);
    }
    headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static("http"),
    );
    if let Some(host) = host {
        headers.insert(HeaderName::from_static("x-forwarded-host"), host);
    }
    headers
}

/// The gateway's HTTP client: pooled keep-alive connections, no redirects followed, no proxy
/// from the environment, no body timeout (only the time to response headers is bounded).
/// The client span of one attempt at a replica: the service's server span becomes its child.
fn attempt_span(method: &Method, group: &str, replica: &impl std::fmt::Display) -> tracing::Span {
    tracing::info_span!(
        "upstream",
        otel.name = method.as_str(),
        otel.kind = "client",
        upstream.group = group,
        server.address = %replica,
        http.response.status_code = tracing::field::Empty,
    )
}

/// The attempt's headers: the request's, with `traceparent` naming the attempt's span. Without
/// tracing installed the span has no context and the client's `traceparent` goes on unchanged.
fn headers_for(span: &tracing::Span, headers: &HeaderMap) -> HeaderMap {
    let mut headers = headers.clone();
    shared_auth::telemetry::inject_context(span, &mut headers);
    headers
}

pub fn build_client(connect_timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(64)
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
}

/// The incoming body, shared between attempts: an attempt whose connection failed never polled
/// it, so the next replica can still send it whole.
struct SharedBody {
    slot: Arc<Mutex<Option<Body>>>,
    polled: Arc<AtomicBool>,
    exceeded: Arc<AtomicBool>,
    seen: Arc<AtomicU64>,
}

impl SharedBody {
    fn new(body: Body) -> Self {
        Self {
            slot: Arc::new(Mutex::new(Some(body))),
            polled: Arc::new(AtomicBool::new(false)),
            exceeded: Arc::new(AtomicBool::new(false)),
            seen: Arc::new(AtomicU64::new(0)),
        }
    }

    fn was_polled(&self) -> bool {
        self.polled.load(Ordering::SeqCst)
    }

    fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::SeqCst)
    }

    /// A streaming body for one attempt, failing once more than [`MAX_BODY_BYTES`] went through.
    fn for_attempt(&self) -> reqwest::Body {
        let slot = self.slot.clone();
        let polled = self.polled.clone();
        let exceeded = self.exceeded.clone();
        let seen = self.seen.clone();
        let stream = futures_util::stream::poll_fn(move |cx| {
            polled.store(true, Ordering::SeqCst);
            let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(body) = guard.as_mut() else {
                return Poll::Ready(None);
            };
            loop {
                let frame = match Pin::new(&mut *body).poll_frame(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Ready(Some(Err(error))) => {
                        return Poll::Ready(Some(Err(io::Error::other(error))));
                    }
                    Poll::Ready(Some(Ok(frame))) => frame,
                };
                // Trailers are not forwarded: skip to the next frame.
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let total = seen.fetch_add(data.len() as u64, Ordering::SeqCst) + data.len() as u64;
                if total > MAX_BODY_BYTES {
                    exceeded.store(true, Ordering::SeqCst);
                    *guard = None;
                    return Poll::Ready(Some(Err(io::Error::other("request body too large"))));
                }
                return Poll::Ready(Some(Ok(data)));
            }
        });
        reqwest::Body::wrap_stream(stream)
    }
}

pub fn payload_too_large() -> Problem {
    Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").with_detail(format!(
        "request bodies are limited to {MAX_BODY_BYTES} bytes"
    ))
}

fn upstream_unavailable(status: StatusCode, detail: &str) -> Problem {
    Problem::new(status, "upstream_unavailable").with_detail(detail.to_owned())
}

fn upstream_timeout() -> Problem {
    Problem::new(StatusCode::GATEWAY_TIMEOUT, "upstream_timeout")
        .with_detail("the upstream did not answer in time")
}

pub struct Proxy {
    client: reqwest::Client,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

/// The parts of a client request the proxy sends on.
pub struct Outgoing {
    pub method: Method,
    /// Normalized path and query, starting with `/`.
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Body,
}

impl Proxy {
    pub fn new(client: reqwest::Client, timeout: Duration, metrics: Arc<Metrics>) -> Self {
        Self {
            client,
            timeout,
            metrics,
        }
    }

    /// Sends `request` to the first replica of `group` that accepts a connection, and streams
    /// its answer back.
    pub async fn forward(
        &self,
        group: &UpstreamGroup,
        request: Outgoing,
    ) -> Result<Response, Problem> {
        let label = group.group.label();
        let size = request.body.size_hint();
        if size.lower() > MAX_BODY_BYTES {
            return Err(payload_too_large());
        }
        let has_body = size.exact() != Some(0);
        let now = Instant::now();
        let deadline = tokio::time::Instant::now() + self.timeout;
        let replicas = group
            .candidates(now)
            .map_err(|why| unavailable(label, why))?;
        let body = SharedBody::new(request.body);

        for replica in replicas {
            let Some(url) = replica.url_for(&request.path_and_query) else {
                tracing::error!(upstream = %replica.base, "cannot build the upstream URL");
                return Err(Problem::internal());
            };
            let span = attempt_span(&request.method, label, &replica.base);
            let mut builder = self
                .client
                .request(request.method.clone(), url)
                .headers(headers_for(&span, &request.headers));
            if has_body {
                builder = builder.body(body.for_attempt());
            }
            let outcome = tokio::time::timeout_at(deadline, builder.send())
                .instrument(span.clone())
                .await;
            let error = match outcome {
                Ok(Ok(response)) => {
                    span.record("http.response.status_code", response.status().as_u16());
                    return Ok(into_response(response));
                }
                Ok(Err(error)) => error,
                Err(_elapsed) => {
                    self.metrics.upstream_error(label, "timeout");
                    tracing::warn!(upstream = %replica.base, "upstream timed out");
                    return Err(upstream_timeout());
                }
            };
            if body.exceeded() {
                return Err(payload_too_large());
            }
            if error.is_connect() && !body.was_polled() {
                // Nothing reached this replica: the request may go to another one.
                self.metrics.upstream_error(label, "connect");
                tracing::warn!(upstream = %replica.base, error = %error, "cannot connect to replica");
                group.mark_refused(&replica, Instant::now());
                continue;
            }
            // The request may have been (partly) sent: never retried.
            self.metrics.upstream_error(label, "reset");
            tracing::warn!(upstream = %replica.base, error = %error, "upstream failed after the request was sent");
            return Err(upstream_unavailable(
                StatusCode::BAD_GATEWAY,
                "the upstream closed the connection before answering",
            ));
        }
        Err(upstream_unavailable(
            StatusCode::BAD_GATEWAY,
            &format!("no {label} replica accepted a connection"),
        ))
    }
}

fn unavailable(label: &str, why: NoReplica) -> Problem {
    match why {
        NoReplica::NoneConfigured => Problem::unavailable("upstream_unavailable", 30)
            .with_detail(format!("no {label} replica is configured")),
        NoReplica::AllDown { retry_after_secs } => {
            Problem::unavailable("upstream_unavailable", retry_after_secs)
                .with_detail(format!("every {label} replica is marked down"))
        }
    }
}

/// The upstream's answer with its body streamed through.
fn into_response(upstream: reqwest::Response) -> Response {
    let status = upstream.status();
    let headers = without_hop_by_hop(upstream.headers());
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        headers
    }

    #[test]
    fn hop_by_hop_headers_and_the_ones_connection_names_are_dropped() {
        let incoming = map(&[
            ("connection", "keep-alive, X-Secret-Hop"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("x-secret-hop", "1"),
            ("authorization", "Bearer abc"),
            (
                "traceparent",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
        ]);
        let kept = without_hop_by_hop(&incoming);
        let names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, vec!["authorization", "traceparent"]);
    }

    #[test]
    fn forwarding_headers_are_the_gateways_own() {
        let incoming = map(&[
            ("host", "api.example"),
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-proto", "https"),
            ("forwarded", "for=6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("x-request-id", "abc"),
            ("expect", "100-continue"),
        ]);
        let out = upstream_headers(&incoming, "10.1.2.3".parse().expect("ip"));
        assert_eq!(out["x-forwarded-for"], "10.1.2.3");
        assert_eq!(out["x-forwarded-proto"], "http");
        assert_eq!(out["x-forwarded-host"], "api.example");
        assert_eq!(out["x-request-id"], "abc");
        assert!(out.get("host").is_none());
        assert!(out.get("forwarded").is_none());
        assert!(out.get("x-real-ip").is_none());
        assert!(out.get("expect").is_none());
        assert_eq!(out.get_all("x-forwarded-for").iter().count(), 1);
    }
}
