//! The request id of the request a task is serving: a task-local set by the request-context
//! middleware and read wherever an answer is rendered. A leaf, so the problem type and the
//! middleware that renders problems can both depend on it.

use std::future::Future;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request this task is serving, if any.
pub fn current() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Runs `work` as the serving of the request `id`.
pub async fn scope<F: Future>(id: String, work: F) -> F::Output {
    REQUEST_ID.scope(id, work).await
}
