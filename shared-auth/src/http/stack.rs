//! The layers every service's router gets, in the one order that works: the problem fallback
//! for unknown routes, `/metrics` and the request counter, the body limit, panics turned into
//! 500s, answers to writes kept out of caches, and the request context outermost (so every answer, a panic's included, gets a request
//! id and becomes a problem).

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;

use crate::http::head;
use crate::http::metrics::{HttpMetrics, instrument};
use crate::http::request_id::{not_found, request_context};

/// The services' request-body limit (docs: conventions): 128 KiB, so the longest legal comment
/// fits in any script and any JSON encoding of it (10,000 emoji as `\ud83d\ude00` escapes).
pub const MAX_BODY_BYTES: usize = 128 * 1024;

/// Wraps a service's routes (resources and health checks) in the shared layers. The body limit is
/// [`MAX_BODY_BYTES`] for every service: the `Json` and `NoBody` extractors refuse by it too.
pub fn service_stack<S>(routes: Router<S>, metrics: Arc<HttpMetrics>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    instrument(routes.fallback(not_found), metrics)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::new())
        .layer(axum::middleware::from_fn(writes_are_private))
        .layer(axum::middleware::from_fn(check_head))
        .layer(axum::middleware::from_fn(request_context))
}

/// The answer to a write (a like, a comment, a study session) is the caller's own: `Cache-Control:
/// private, no-store` unless the handler set its own, as every personal answer says, so no cache
/// between the client and the gateway keeps it.
async fn writes_are_private(request: Request, next: Next) -> Response {
    if request.method().is_safe() {
        return next.run(request).await;
    }
    crate::http::cache::no_store(request, next).await
}

/// The head rules of [`head::check`], as the gateway applies them.
async fn check_head(request: Request, next: Next) -> Response {
    match head::check(request.version(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(problem) => problem.into_response(),
    }
}
