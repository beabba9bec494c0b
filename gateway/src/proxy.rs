//! Forwarding one request to a replica of an upstream group over a pooled HTTP/1.1 client:
//! request and response bodies streamed (never buffered whole), the 1 MiB request-body limit,
//! retries only for attempts that never reached an upstream, and the failures of docs/gateway.md
//! as problems (error.rs). What headers pass, both ways, is headers.rs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::body::HttpBody as _;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::Response;
use shared_auth::telemetry::{ClientSpan, Value};
use shared_auth::{Problem, SharedCode};

use crate::client::{BodyState, OutBody, PooledBody, SendError, UpstreamClient, is_broken_framing};
use crate::error::{
    body_broke_off, payload_too_large, unavailable, upstream_timeout, upstream_unavailable,
};
use crate::headers::strip_hop_by_hop;
use crate::metrics::Metrics;
use crate::upstream::{Replica, UpstreamGroup};

/// The client span of one attempt at a replica (the service's server span becomes its child),
/// while spans are exported: otherwise nothing collects it, and the client's `traceparent` goes
/// on as is.
fn attempt_span(method: &Method, group: &'static str, replica: &Replica) -> Option<ClientSpan> {
    let port = replica
        .span_port
        .map(|port| ("server.port", Value::Int(i64::from(port))));
    let attributes = [
        ("upstream.group", Value::Static(group)),
        (
            "server.address",
            Value::Shared(replica.span_address.clone()),
        ),
    ];
    ClientSpan::start(method, attributes.into_iter().chain(port))
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
    /// Already rewritten by [`crate::headers::to_upstream_headers`].
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
            // Every replica was marked down before, and refused again: 503 until a probe finds
            // one back. (Otherwise some were available and every replica, those marked down
            // included, refused this request: 502.)
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
