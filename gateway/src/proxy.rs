//! Forwarding one request to a replica of an upstream group over a pooled HTTP/1.1 client: header
//! hygiene both ways (done in place, without copying the header map), request and response bodies
//! streamed (never buffered whole), the 1 MiB request-body limit, retries only for attempts that
//! never reached an upstream, and the failures of docs/gateway.md as problems.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use axum::response::Response;
use shared_auth::telemetry::ClientSpan;
use shared_auth::{Problem, SharedCode};

use crate::client::{BodyState, OutBody, PooledBody, SendError, UpstreamClient, is_broken_framing};
use crate::client_addr::ClientAddr;
use crate::metrics::Metrics;
use crate::upstream::{NoReplica, Replica, UpstreamGroup};

/// Headers that describe one connection, never the message (RFC 9110 section 7.6.1).
static HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Request headers never passed on: client-sent forwarding headers (replaced by the gateway's
/// own), and `Expect` (`100-continue` was already answered by the gateway's own server).
static NOT_FORWARDED: [HeaderName; 7] = [
    header::EXPECT,
    header::FORWARDED,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-real-ip"),
];

/// End-to-end headers the contract has the gateway pass on, even when a `Connection` header
/// names them: the ones the gateway judged the request by (a token it verified must reach the
/// service too), the body's type, the idempotency key, the request id the gateway answers with
/// and the trace context.
static ALWAYS_FORWARDED: [HeaderName; 6] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    HeaderName::from_static("idempotency-key"),
    HeaderName::from_static("x-request-id"),
    HeaderName::from_static("traceparent"),
    HeaderName::from_static("tracestate"),
];

/// Removes the headers of `lists` from `headers`, and the ones a `Connection` header names (but
/// for [`ALWAYS_FORWARDED`]). The names are looked for in one scan first: the usual message
/// carries none of them, and every removal is a hashed lookup.
fn remove_headers(headers: &mut HeaderMap, lists: &[&[HeaderName]]) {
    let listed = |name: &HeaderName| {
        name == header::CONNECTION || lists.iter().any(|list| list.contains(name))
    };
    if !headers.keys().any(listed) {
        return;
    }
    if headers.contains_key(header::CONNECTION) {
        let named: Vec<HeaderName> = headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
            .filter(|name| !ALWAYS_FORWARDED.contains(name))
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
    for name in lists.iter().copied().flatten() {
        headers.remove(name);
    }
}

/// Removes hop-by-hop headers from `headers`, including those its `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    remove_headers(headers, &[&HOP_BY_HOP]);
}

/// A copy of `headers` without hop-by-hop headers.
pub fn without_hop_by_hop(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    strip_hop_by_hop(&mut kept);
    kept
}

/// Turns the client's headers into the ones sent upstream, in place: the client's end-to-end
/// headers (Authorization, x-request-id and traceparent included, unchanged), minus `Host` and
/// forwarding headers, plus the gateway's own `X-Forwarded-For/Proto/Host`. `X-Forwarded-Proto`
/// is kept only from a trusted proxy.
pub fn to_upstream_headers(headers: &mut HeaderMap, client: ClientAddr) {
    let host = headers.remove(header::HOST);
    let proto = headers
        .remove(&X_FORWARDED_PROTO)
        .filter(|_| client.via_trusted_proxy)
        .and_then(|value| forwarded_scheme(&value))
        .unwrap_or(HeaderValue::from_static("http"));
    remove_headers(headers, &[&HOP_BY_HOP, &NOT_FORWARDED]);
    headers.insert(X_FORWARDED_FOR.clone(), ip_header(client.ip));
    headers.insert(X_FORWARDED_PROTO.clone(), proto);
    if let Some(host) = host.filter(|host| !host.is_empty()) {
        headers.insert(X_FORWARDED_HOST.clone(), host);
    }
}

/// The scheme a trusted proxy reports, in any case; of a list (proxies that append), the first
/// entry, which is what the client used. Anything else is not believed.
fn forwarded_scheme(value: &HeaderValue) -> Option<HeaderValue> {
    let first = value.as_bytes().split(|&byte| byte == b',').next()?;
    match first.trim_ascii() {
        scheme if scheme.eq_ignore_ascii_case(b"https") => Some(HeaderValue::from_static("https")),
        scheme if scheme.eq_ignore_ascii_case(b"http") => Some(HeaderValue::from_static("http")),
        _ => None,
    }
}

/// An address as a header value, written into a stack buffer (no heap string). IPv4, the usual
/// case, is written digit by digit: through `fmt` it cost as much as verifying an HS256 token.
fn ip_header(ip: IpAddr) -> HeaderValue {
    use std::io::Write as _;
    if let IpAddr::V4(v4) = ip {
        return ipv4_header(v4.octets());
    }
    let mut buffer = [0u8; 48];
    let mut cursor = std::io::Cursor::new(&mut buffer[..]);
    let _ = write!(cursor, "{ip}");
    let len = cursor.position() as usize;
    HeaderValue::from_bytes(&buffer[..len]).unwrap_or(HeaderValue::from_static("0.0.0.0"))
}

fn ipv4_header(octets: [u8; 4]) -> HeaderValue {
    let mut buffer = [0u8; 15];
    let mut len = 0;
    for (index, octet) in octets.into_iter().enumerate() {
        if index > 0 {
            buffer[len] = b'.';
            len += 1;
        }
        let digits = [octet / 100, octet / 10 % 10, octet % 10];
        let skip = if octet >= 100 {
            0
        } else if octet >= 10 {
            1
        } else {
            2
        };
        for digit in &digits[skip..] {
            buffer[len] = b'0' + digit;
            len += 1;
        }
    }
    HeaderValue::from_bytes(&buffer[..len]).unwrap_or(HeaderValue::from_static("0.0.0.0"))
}

/// The client span of one attempt at a replica (the service's server span becomes its child),
/// while spans are exported: otherwise nothing collects it, and the client's `traceparent` goes
/// on as is.
fn attempt_span(method: &Method, group: &str, replica: &Replica) -> Option<ClientSpan> {
    ClientSpan::start(
        method,
        &[
            ("upstream.group", group),
            ("server.address", replica.base.as_str()),
        ],
    )
}

shared_auth::error_codes! {
    /// The gateway's own codes beside the shared ones: the contract answers `upstream_unavailable`
    /// with 502 when every replica refused, and with 503 when none is configured or every one
    /// was already marked down and refused again when tried anyway.
    pub enum GatewayCode {
        /// no replica of the group is configured, or every one is marked down and refused again;
        /// retry after `Retry-After` seconds
        NoReplicaReady = (SERVICE_UNAVAILABLE, "upstream_unavailable",
            "no replica of this upstream is ready"),
        /// only `GET /readyz`: this gateway cannot verify tokens yet (its JWKS has not been
        /// fetched); retry after `Retry-After` seconds
        NotReady = (SERVICE_UNAVAILABLE, "not_ready",
            "this gateway cannot serve yet: its token keys are not loaded"),
    }
}

pub fn payload_too_large() -> Problem {
    Problem::from_code(SharedCode::PayloadTooLarge)
        .with_detail("request bodies are limited to 1048576 bytes")
}

/// 400 for a request body that ended before its declared end, or with bad chunked framing.
fn body_broke_off() -> Problem {
    Problem::from_code(SharedCode::BadRequest)
        .with_detail("the request body broke off before its end")
}

fn upstream_unavailable(detail: &'static str) -> Problem {
    Problem::from_code(SharedCode::UpstreamUnavailable).with_detail(detail)
}

fn upstream_timeout() -> Problem {
    Problem::from_code(SharedCode::UpstreamTimeout)
        .with_detail("the upstream did not answer in time")
}

pub struct Proxy {
    client: UpstreamClient,
    timeout: Duration,
    metrics: Arc<Metrics>,
}

/// The parts of a client request the proxy sends on.
pub struct Outgoing {
    pub method: Method,
    /// Normalized path and query, starting with `/`.
    pub path_and_query: PathAndQuery,
    /// Already rewritten by [`to_upstream_headers`].
    pub headers: HeaderMap,
    pub body: Body,
}

/// How one attempt at a replica ended, when it did not produce a response.
enum Failure {
    /// Nothing reached the replica: another one may be tried.
    NotSent,
    /// The answer is final.
    Final(Problem),
}

impl Proxy {
    pub fn new(client: UpstreamClient, timeout: Duration, metrics: Arc<Metrics>) -> Self {
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
        let deadline = tokio::time::Instant::now() + self.timeout;
        let candidates = group
            .candidates(Instant::now())
            .map_err(|why| unavailable(label, why))?;
        let replicas = &candidates.replicas;
        let body = (size.exact() != Some(0)).then(|| BodyState::new(request.body));
        let Outgoing {
            method,
            path_and_query,
            mut headers,
            ..
        } = request;

        let last = replicas.len() - 1;
        for (index, replica) in replicas.iter().enumerate() {
            // The header map is moved into the last attempt; earlier ones need their own copy in
            // case they fail before sending.
            let attempt_headers = if index == last {
                std::mem::take(&mut headers)
            } else {
                headers.clone()
            };
            let attempt = Attempt {
                method: method.clone(),
                path_and_query: path_and_query.clone(),
                headers: attempt_headers,
                body: body.clone(),
            };
            match self.attempt(group, replica, attempt, deadline).await {
                Ok(response) => return Ok(response),
                Err(Failure::Final(problem)) => return Err(problem),
                Err(Failure::NotSent) => continue,
            }
        }
        if candidates.all_down {
            // Marked down before, and still refusing: 503 until a probe finds one back.
            return Err(unavailable(label, group.all_down()));
        }
        Err(upstream_unavailable(
            "no replica of the group accepted a connection",
        ))
    }

    async fn attempt(
        &self,
        group: &UpstreamGroup,
        replica: &Replica,
        attempt: Attempt,
        deadline: tokio::time::Instant,
    ) -> Result<Response, Failure> {
        let label = group.group.label();
        let Some(uri) = replica.uri_for(attempt.path_and_query) else {
            tracing::error!(upstream = %replica.base, "cannot build the upstream URI");
            return Err(Failure::Final(Problem::internal()));
        };
        let mut span = attempt_span(&attempt.method, label, replica);
        let mut headers = attempt.headers;
        if let Some(span) = &span {
            span.inject(&mut headers);
        }
        let body_state = attempt.body;
        let out_body = body_state.clone().map_or(OutBody::Empty, OutBody::Streamed);
        let mut upstream_request = Request::new(out_body);
        *upstream_request.method_mut() = attempt.method;
        *upstream_request.uri_mut() = uri;
        *upstream_request.headers_mut() = headers;

        let sent = tokio::time::timeout_at(
            deadline,
            self.client.send(&replica.endpoint, upstream_request),
        )
        .await;
        let error = match sent {
            Ok(Ok(mut response)) => {
                let status = response.status();
                if let Some(detail) = broken_status(status) {
                    return Err(self.bad_response(label, replica, detail, &status));
                }
                let body = response.body_mut();
                self.first_piece(label, replica, body, body_state.as_deref(), deadline)
                    .await?;
                if let Some(span) = &mut span {
                    span.answered(status.as_u16());
                }
                return Ok(into_response(response));
            }
            Ok(Err(error)) => error,
            Err(_elapsed) => return Err(self.timed_out(label, replica, body_state.as_deref())),
        };
        let body_polled = body_state.as_ref().is_some_and(|b| b.was_polled());
        if matches!(error, SendError::NotSent(_)) && !body_polled {
            self.metrics.upstream_error(label, "connect");
            tracing::warn!(upstream = %replica.base, error = %error, "cannot connect to replica");
            group.mark_refused(replica, Instant::now());
            return Err(Failure::NotSent);
        }
        // The upstream stopped reading the body (or the body broke the limit): a body over the
        // limit is the client's fault whatever the upstream did.
        if let Some(state) = &body_state {
            // Boxed, like every rare path here: it keeps the request's future small.
            let drained = Box::pin(tokio::time::timeout_at(
                deadline,
                state.drain_is_too_large(),
            ))
            .await;
            if state.exceeded() || drained == Ok(true) {
                return Err(Failure::Final(payload_too_large()));
            }
            if state.broke_off() {
                tracing::debug!(upstream = %replica.base, error = %error, "the client's body broke off");
                return Err(Failure::Final(body_broke_off()));
            }
        }
        // The request may have been (partly) sent: never retried.
        if error.is_unreadable_answer() {
            return Err(self.bad_response(label, replica, NOT_HTTP, &error));
        }
        self.metrics.upstream_error(label, "reset");
        tracing::warn!(upstream = %replica.base, error = %error, "upstream failed after the request was sent");
        Err(Failure::Final(upstream_unavailable(
            "the upstream closed the connection before answering",
        )))
    }

    /// Waits, until `deadline`, for the first piece of the answer's body: an upstream that closes
    /// the connection after the head of its answer, before any of its body, is 502 like one that
    /// closes it before answering, and one that stops there is 504 (nothing has gone to the
    /// client yet). The usual body is there with its head and costs no wait.
    async fn first_piece(
        &self,
        label: &'static str,
        replica: &Replica,
        body: &mut PooledBody,
        request_body: Option<&BodyState>,
        deadline: tokio::time::Instant,
    ) -> Result<(), Failure> {
        match tokio::time::timeout_at(deadline, body.read_first_piece()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) if is_broken_framing(&error) => {
                Err(self.bad_response(label, replica, NOT_HTTP, &error))
            }
            Ok(Err(error)) => {
                self.metrics.upstream_error(label, "reset");
                tracing::warn!(upstream = %replica.base, %error, "upstream broke off before its answer's body");
                Err(Failure::Final(upstream_unavailable(
                    "the upstream closed the connection before its answer's body",
                )))
            }
            Err(_elapsed) => Err(self.timed_out(label, replica, request_body)),
        }
    }

    /// The upstream timeout passed: 504, unless the upstream was still reading the client's
    /// body (the client's slowness: 408, not counted as an upstream failure).
    fn timed_out(
        &self,
        label: &'static str,
        replica: &Replica,
        request_body: Option<&BodyState>,
    ) -> Failure {
        if request_body.is_some_and(BodyState::still_arriving) {
            tracing::info!(upstream = %replica.base, "the request body was still arriving at the upstream timeout");
            return Failure::Final(
                Problem::from_code(SharedCode::RequestTimeout)
                    .with_detail("the request body did not arrive within the upstream timeout"),
            );
        }
        self.metrics.upstream_error(label, "timeout");
        tracing::warn!(upstream = %replica.base, "upstream timed out");
        Failure::Final(upstream_timeout())
    }

    /// An answer the client cannot be given (`cause` says what was wrong): 502, counted as
    /// `bad_response`.
    fn bad_response(
        &self,
        label: &'static str,
        replica: &Replica,
        detail: &'static str,
        cause: &dyn std::fmt::Display,
    ) -> Failure {
        self.metrics.upstream_error(label, "bad_response");
        tracing::warn!(upstream = %replica.base, %cause, "upstream gave a broken answer");
        Failure::Final(upstream_unavailable(detail))
    }
}

const NOT_HTTP: &str = "the upstream's answer was not a valid HTTP response";

/// Why an answer with this status cannot be passed on, if it cannot.
fn broken_status(status: StatusCode) -> Option<&'static str> {
    if status.as_u16() >= 600 {
        // HTTP's status codes end at 599 (RFC 9110 15); hyper reads any three digits.
        Some(NOT_HTTP)
    } else if status == StatusCode::SWITCHING_PROTOCOLS {
        // The gateway asks for no upgrade (it strips `Upgrade`): a 101 is a broken answer.
        Some("the upstream answered 101 Switching Protocols to a plain request")
    } else {
        None
    }
}

struct Attempt {
    method: Method,
    path_and_query: PathAndQuery,
    headers: HeaderMap,
    body: Option<Arc<BodyState>>,
}

fn unavailable(label: &str, why: NoReplica) -> Problem {
    match why {
        NoReplica::NoneConfigured => Problem::from_code(GatewayCode::NoReplicaReady)
            .with_retry_after(30)
            .with_detail(format!("no {label} replica is configured")),
        NoReplica::AllDown { retry_after_secs } => Problem::from_code(GatewayCode::NoReplicaReady)
            .with_retry_after(retry_after_secs)
            .with_detail(format!(
                "every {label} replica is marked down and none accepted a connection"
            )),
    }
}

/// The upstream's answer with its body streamed through and its hop-by-hop headers removed.
fn into_response(upstream: axum::http::Response<PooledBody>) -> Response {
    let (mut parts, body) = upstream.into_parts();
    // The gateway speaks its own HTTP version (RFC 9110 2.5), whatever the upstream spoke: an
    // HTTP/1.0 answer goes out as HTTP/1.1, framed by hyper.
    parts.version = axum::http::Version::HTTP_11;
    if parts.headers.contains_key(header::TRANSFER_ENCODING) {
        // The body was framed by its chunks (RFC 9112 section 6.3); a `Content-Length` beside
        // them is wrong and would cut the client's copy short.
        parts.headers.remove(header::CONTENT_LENGTH);
    }
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, Body::new(body))
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
    fn a_trusted_proxys_scheme_is_read_in_any_case_and_from_the_front_of_a_list() {
        for (sent, kept) in [
            ("https", Some("https")),
            ("HTTPS", Some("https")),
            (" Http ", Some("http")),
            ("https, http", Some("https")),
            ("ftp", None),
            ("", None),
        ] {
            let value = HeaderValue::from_str(sent).expect("value");
            let read = forwarded_scheme(&value);
            assert_eq!(read.as_ref().map(|v| v.to_str().unwrap()), kept, "{sent:?}");
        }
    }

    #[test]
    fn addresses_are_written_as_the_standard_text() {
        for text in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.30.40",
            "192.168.100.9",
            "255.255.255.255",
            "::1",
            "2001:db8::8a2e:370:7334",
            "::ffff:10.0.0.1",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(ip_header(ip), text, "{text}");
        }
        for octets in [[1, 9, 10, 99], [100, 199, 200, 255]] {
            let ip = IpAddr::from(octets);
            assert_eq!(ip_header(ip), ip.to_string().as_str());
        }
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
        let client = ClientAddr {
            ip: "10.1.2.3".parse().expect("ip"),
            via_trusted_proxy: false,
        };
        let mut out = incoming.clone();
        to_upstream_headers(&mut out, client);
        assert_eq!(out["x-forwarded-for"], "10.1.2.3");
        assert_eq!(out["x-forwarded-proto"], "http");
        assert_eq!(out["x-forwarded-host"], "api.example");
        assert_eq!(out["x-request-id"], "abc");
        assert!(out.get("host").is_none());
        assert!(out.get("forwarded").is_none());
        assert!(out.get("x-real-ip").is_none());
        assert!(out.get("expect").is_none());
        assert_eq!(out.get_all("x-forwarded-for").iter().count(), 1);

        let mut trusted = incoming.clone();
        let via_proxy = ClientAddr {
            via_trusted_proxy: true,
            ..client
        };
        to_upstream_headers(&mut trusted, via_proxy);
        assert_eq!(trusted["x-forwarded-proto"], "https");
        assert_eq!(trusted["x-forwarded-for"], "10.1.2.3");
    }

    #[test]
    fn ip_headers_fit_the_longest_address() {
        let long: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
            .parse()
            .expect("ip");
        assert_eq!(ip_header(long), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_eq!(ip_header("10.0.0.1".parse().expect("ip")), "10.0.0.1");
    }
}
