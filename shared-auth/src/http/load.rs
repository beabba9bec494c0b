//! Time and load limits of every service (docs: conventions, "Time and load"): each request has a
//! deadline, past which it is answered 503 `timeout` and its work is dropped; and an in-flight
//! limit, past which new requests are refused at once with 503 `overloaded` instead of queueing
//! without bound. Both answers carry `Retry-After`. Mount these around the resource routes only,
//! so `/healthz`, `/readyz` and `/metrics` keep answering under overload.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::http::codes::SharedCode;
use crate::http::problem::Problem;

/// The deadline of a request when the service is not told otherwise.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Requests a service works on at once before it sheds the excess.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// `Retry-After` of `timeout` and `overloaded`: the condition is expected to pass quickly.
pub const RETRY_AFTER_SECS: u32 = 1;

tokio::task_local! {
    /// When the request being served must be answered by (set by [`guard`]).
    static DEADLINE: Instant;
}

/// How much of the current request's deadline is left; `None` outside a guarded request (a
/// background task, a command-line pipeline).
pub fn time_left() -> Option<Duration> {
    DEADLINE
        .try_with(|deadline| deadline.saturating_duration_since(Instant::now()))
        .ok()
}

/// Whether the current request's deadline has passed (false outside a guarded request).
pub fn past_deadline() -> bool {
    time_left().is_some_and(|left| left.is_zero())
}

/// Runs `work` as a request to be answered by `answer_by`: what [`time_left`] and
/// [`past_deadline`] see inside it. [`guard`] runs every request so.
pub async fn answering_by<F: std::future::Future>(answer_by: Instant, work: F) -> F::Output {
    DEADLINE.scope(answer_by, work).await
}

/// The limits a service applies to its resource routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadLimits {
    pub request_timeout: Duration,
    pub max_in_flight: usize,
}

impl Default for LoadLimits {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

/// 503 `timeout`: the request ran past its deadline and its work was abandoned.
pub fn timeout_problem() -> Problem {
    Problem::from_code(SharedCode::Timeout).with_retry_after(RETRY_AFTER_SECS)
}

/// 503 `overloaded`: the service cannot take more work now (the in-flight limit is full, or no
/// database connection came free in time).
pub fn overloaded_problem() -> Problem {
    Problem::from_code(SharedCode::Overloaded).with_retry_after(RETRY_AFTER_SECS)
}

/// Wraps `routes` in the in-flight limit (outer) and the deadline (inner). The limit is one
/// semaphore shared by every route (axum layers each route separately, so a per-layer limit
/// such as tower's `ConcurrencyLimitLayer` would be per route).
pub fn guard<S>(routes: Router<S>, limits: LoadLimits) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let in_flight = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    routes
        .layer(from_fn_with_state(limits.request_timeout, enforce_deadline))
        .layer(from_fn_with_state(in_flight, shed_excess))
}

async fn shed_excess(
    State(in_flight): State<Arc<Semaphore>>,
    request: Request,
    next: Next,
) -> Response {
    // Refuse at once rather than wait: a queue here only moves the overload into latency.
    let Ok(_permit) = in_flight.try_acquire_owned() else {
        return overloaded_problem().into_response();
    };
    next.run(request).await
}

async fn enforce_deadline(
    State(deadline): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let answer_by = Instant::now() + deadline;
    match tokio::time::timeout(deadline, answering_by(answer_by, next.run(request))).await {
        Ok(response) => response,
        Err(_) => {
            // The handler's future is dropped here; a statement it was running is ended by its
            // transaction's `statement_timeout` (`pg::pool::begin_within_deadline`: the time that
            // was left), or else by the pools' own, never longer than this deadline.
            tracing::warn!(%method, %path, deadline_ms = deadline.as_millis() as u64, "request deadline passed");
            timeout_problem().into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn limits_answer_with_contract_codes_and_retry_after() {
        for (problem, code) in [
            (timeout_problem(), "timeout"),
            (overloaded_problem(), "overloaded"),
        ] {
            assert_eq!(problem.status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(problem.code, code);
            assert!(
                problem
                    .headers
                    .iter()
                    .any(|(name, _)| name == axum::http::header::RETRY_AFTER)
            );
        }
    }
}
