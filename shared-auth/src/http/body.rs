//! Request bodies are read whole, to the body limit, before a resource's handler runs, and a body
//! that is refused is still read to its end before the answer goes out.
//!
//! Why: a server that answers and closes a connection while request bytes are still unread makes
//! the kernel reset the connection, and the reset can destroy the answer before the client reads
//! it. Behind the gateway that turned a 413 into a 502 `upstream_unavailable` now and then (a 502
//! the client is told it may retry). Reading first also gives every route the same rules for a
//! body, including routes that take none (like, bookmark, follow): JSON only (415), at most the
//! limit (413).
//!
//! Mounted inside the load guard ([`crate::http::load::guard`]), so reading a body counts against
//! the request's deadline and its in-flight permit.

use axum::Router;
use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use crate::http::codes::SharedCode;
use crate::http::json::is_json;
use crate::http::problem::Problem;

/// How much of a refused body is read and thrown away so that the connection can carry the answer
/// (and the next request): more than the gateway passes on (1 MiB). A client that sends more
/// directly is disconnected after the answer instead.
const MAX_DISCARDED_BYTES: usize = 2 * 1024 * 1024;

/// Reads each request's body whole (at most `max_body_bytes`) before `routes` see it.
pub fn read_whole<S>(routes: Router<S>, max_body_bytes: usize) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes.layer(from_fn_with_state(max_body_bytes, read_body_first))
}

async fn read_body_first(
    State(max_body_bytes): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // A client waiting for `100 Continue` has sent nothing yet: it is refused without reading,
    // and hyper then closes the connection rather than invite the body.
    let waits_to_send = parts
        .headers
        .get(header::EXPECT)
        .is_some_and(|expect| expect.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let (code, rest) = if !is_json(&parts.headers) {
        (SharedCode::UnsupportedMediaType, body)
    } else {
        match read_to_limit(body, max_body_bytes).await {
            Read::Whole(bytes) => {
                let request = Request::from_parts(parts, Body::from(bytes));
                return next.run(request).await;
            }
            Read::TooLarge(rest) => (SharedCode::PayloadTooLarge, rest),
            Read::Broken => {
                return Problem::from_code(SharedCode::BadRequest)
                    .with_detail("the request body could not be read")
                    .into_response();
            }
        }
    };
    let read_to_end = !waits_to_send && discard(rest).await;
    let mut response = Problem::from_code(code).into_response();
    if !read_to_end {
        // Bytes of the body may still come: this connection cannot carry another request.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

enum Read {
    Whole(Bytes),
    /// Over the limit; what is left of the body.
    TooLarge(Body),
    Broken,
}

async fn read_to_limit(mut body: Body, max_body_bytes: usize) -> Read {
    let declared = body.size_hint().exact();
    if declared.is_some_and(|len| len > max_body_bytes as u64) {
        return Read::TooLarge(body);
    }
    let mut read = Vec::with_capacity(declared.map_or(0, |len| len as usize));
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Read::Broken;
        };
        if let Some(data) = frame.data_ref() {
            if read.len() + data.len() > max_body_bytes {
                return Read::TooLarge(body);
            }
            read.extend_from_slice(data);
        }
    }
    Read::Whole(Bytes::from(read))
}

/// Reads `body` to its end, keeping nothing; false when it gave up first (past
/// [`MAX_DISCARDED_BYTES`], or the body broke off).
async fn discard(mut body: Body) -> bool {
    let mut discarded = 0;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return false };
        discarded += frame.data_ref().map_or(0, Bytes::len);
        if discarded > MAX_DISCARDED_BYTES {
            return false;
        }
    }
    true
}
