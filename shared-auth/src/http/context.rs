//! The request id of the request a task is serving: a task-local set by the request-context
//! middleware and read wherever an answer is rendered. A leaf, so the problem type and the
//! middleware that renders problems can both depend on it.

use std::future::Future;

use axum::http::HeaderValue;

tokio::task_local! {
    /// Held as the `x-request-id` header value it is echoed as (a cheap clone per request).
    static REQUEST_ID: HeaderValue;
}

/// The id of the request this task is serving, if any.
pub fn current() -> Option<String> {
    REQUEST_ID
        .try_with(|id| id.to_str().ok().map(str::to_owned))
        .ok()
        .flatten()
}

/// Runs `work` as the serving of the request `id`.
pub async fn scope<F: Future>(id: HeaderValue, work: F) -> F::Output {
    REQUEST_ID.scope(id, work).await
}
