//! Per-request plumbing every binary mounts outermost: the `x-request-id`, one log line per request,
//! and the guarantee that no 4xx/5xx leaves without a problem body (axum's own rejections, tower
//! layers and unknown routes included).

use std::borrow::Cow;
use std::future::Future;
use std::time::Instant;

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::http::codes::SharedCode;
use crate::http::context;
use crate::http::problem::{PROBLEM_JSON, Problem};
use crate::telemetry::{self, ServerSpan, Value};

pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A client's id is kept when it is short and plain, so it can be logged and echoed safely.
fn is_sane(value: &str) -> bool {
    (1..=128).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// The client's id when it is sane, else a new UUID v7. Kept as a header value: it is sent
/// upstream, echoed and held for the request's problem bodies, and each of those is a cheap clone.
fn request_id_of(request: &Request) -> HeaderValue {
    request
        .headers()
        .get(&X_REQUEST_ID)
        .filter(|value| value.to_str().is_ok_and(is_sane))
        .cloned()
        .unwrap_or_else(new_request_id)
}

fn new_request_id() -> HeaderValue {
    let mut buffer = uuid::Uuid::encode_buffer();
    let id = uuid::Uuid::now_v7().hyphenated().encode_lower(&mut buffer);
    HeaderValue::from_str(id).unwrap_or(HeaderValue::from_static("unknown"))
}

/// Middleware: assign the request id, log the request, and turn bare error responses into problems.
pub async fn request_context(request: Request, next: Next) -> Response {
    in_request_context(request, |request| next.run(request)).await
}

/// What [`request_context`] does around `inner`, for a binary that calls its router itself (the
/// gateway, where each middleware layer is a measurable share of a proxied request's cost).
pub async fn in_request_context<F, Fut>(mut request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let id = request_id_of(&request);
    // Handlers and the gateway's proxy see (and forward) the id we settled on.
    request
        .headers_mut()
        .insert(X_REQUEST_ID.clone(), id.clone());
    let method = request.method().clone();
    // For the log line: a clone of a URI shares its bytes, unlike a copy of its path.
    let uri = request.uri().clone();
    let span = log_span(&request, id.to_str().unwrap_or_default());
    let trace = server_span(&request, &id);
    if let Some(trace) = &trace
        && telemetry::logs_trace_ids()
    {
        let hex = trace.trace_id_hex();
        span.record("trace_id", std::str::from_utf8(&hex).unwrap_or_default());
    }
    let started = Instant::now();

    let work = context::scope(id.clone(), async move {
        let response = inner(request).await;
        ensure_problem_body(response).await
    })
    .instrument(span.clone());
    let (mut response, trace) = match trace {
        Some(trace) => {
            let mut scoped = std::pin::pin!(trace.scope(work));
            let response = scoped.as_mut().await;
            (response, ServerSpan::after(scoped))
        }
        None => (work.await, None),
    };

    response.headers_mut().insert(X_REQUEST_ID.clone(), id);
    span.record("http.response.status_code", response.status().as_u16());
    if let Some(trace) = trace {
        trace.end(response.status().as_u16());
    }
    span.in_scope(|| {
        let status = response.status().as_u16();
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        if status >= 500 {
            tracing::warn!(%method, path = uri.path(), status, elapsed_ms, "request failed");
        } else {
            tracing::info!(%method, path = uri.path(), status, elapsed_ms, "request served");
        }
    });
    response
}

/// The span of a request in the log lines: every line inside it names the request id and (while
/// spans are exported, and log lines show spans) the trace id.
fn log_span(request: &Request, request_id: &str) -> tracing::Span {
    tracing::info_span!(
        "request",
        http.request.method = request.method().as_str(),
        url.path = request.uri().path(),
        http.response.status_code = tracing::field::Empty,
        request_id = request_id,
        trace_id = tracing::field::Empty,
    )
}

/// The OpenTelemetry server span of a request, while spans are exported: a child of the caller's
/// `traceparent` when there is one, named by method and route, or by the method alone when no
/// route matched (OpenTelemetry's HTTP conventions: a raw path would make one span name per
/// article, which trace backends index). The gateway names it after its own route table's match
/// ([`telemetry::name_request_span`]). Without an exporter there is no trace to join or to name:
/// the log lines carry no trace id (rather than one of zeros), and the caller's `traceparent` goes
/// upstream unchanged.
fn server_span(request: &Request, request_id: &HeaderValue) -> Option<ServerSpan> {
    if !telemetry::exporting() {
        return None;
    }
    let method = request.method();
    let name = match request.extensions().get::<MatchedPath>() {
        // Not `format!`: its machinery cost ~1,000 instructions per request here.
        Some(route) => {
            let mut name = String::with_capacity(method.as_str().len() + 1 + route.as_str().len());
            name.push_str(method.as_str());
            name.push(' ');
            name.push_str(route.as_str());
            Cow::Owned(name)
        }
        None => telemetry::method_name(method),
    };
    let text = |value: &str| Value::Text(value.to_owned());
    ServerSpan::start(
        request.headers(),
        name,
        [
            ("http.request.method", telemetry::method_name(method).into()),
            ("url.path", text(request.uri().path())),
            ("request_id", text(request_id.to_str().unwrap_or_default())),
        ],
    )
}

fn is_problem(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()))
}

/// Rewrites an error response that is not yet a problem (axum's plain-text rejections, an empty
/// 405, tower-http's 413) into one, keeping headers such as `Allow` and `Retry-After`.
async fn ensure_problem_body(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_problem(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut problem = Problem::from_status(status);
    // axum's rejection texts are written for clients ("Failed to parse the request body as
    // JSON: ..."); a server error's text may hold internals, so it is dropped.
    let is_text = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if status.is_client_error()
        && is_text
        && let Ok(bytes) = to_bytes(body, 2048).await
    {
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        if !text.is_empty() {
            problem.detail = Some(text);
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    let rendered = problem.into_response();
    let (new_parts, new_body) = rendered.into_parts();
    parts.headers.extend(new_parts.headers);
    Response::from_parts(parts, Body::new(new_body))
}

/// Fallback for unknown routes: 404 `not_found`.
pub async fn not_found() -> Problem {
    Problem::from_code(SharedCode::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_short_ids_are_kept() {
        assert!(is_sane("0193a1b2-c3d4"));
        assert!(is_sane("abc.DEF_1:2"));
        assert!(!is_sane(""));
        assert!(!is_sane("has space"));
        assert!(!is_sane("new\nline"));
        assert!(!is_sane(&"x".repeat(129)));
    }
}
