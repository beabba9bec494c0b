//! `GET /healthz` (the process is up) and `GET /readyz` (every database pool answers), the same
//! in both services. `/readyz` answers 503 `database_unavailable` with `Retry-After` when a pool
//! does not answer `SELECT 1` in time, so orchestrators stop routing to the replica.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::http::codes::SharedCode;
use crate::http::problem::Problem;

/// What `/readyz` checks: named pools (the names show in the 503 detail), how long each may
/// take, and the `Retry-After` of the 503.
struct Readiness {
    pools: Vec<(&'static str, PgPool)>,
    timeout: Duration,
    retry_after_secs: u32,
}

/// `/healthz` and `/readyz`, with their own state so they merge into any service's router.
pub fn router<S>(
    pools: Vec<(&'static str, PgPool)>,
    timeout: Duration,
    retry_after_secs: u32,
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let readiness = Arc::new(Readiness {
        pools,
        timeout,
        retry_after_secs,
    });
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(readiness): State<Arc<Readiness>>) -> Result<Json<Value>, Problem> {
    let pings = readiness
        .pools
        .iter()
        .map(|(name, pool)| ping(name, pool, readiness.timeout));
    let up = futures_util::future::join_all(pings).await;
    if up.iter().all(|up| *up) {
        return Ok(Json(json!({"status": "ready"})));
    }
    let states: Vec<String> = readiness
        .pools
        .iter()
        .zip(&up)
        .map(|((name, _), up)| format!("{name}: {}", if *up { "up" } else { "down" }))
        .collect();
    Err(Problem::from_code(SharedCode::DatabaseUnavailable)
        .with_retry_after(readiness.retry_after_secs)
        .with_detail(format!(
            "the database is not reachable ({})",
            states.join(", ")
        )))
}

async fn ping(name: &str, pool: &PgPool, timeout: Duration) -> bool {
    let query = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(pool);
    match tokio::time::timeout(timeout, query).await {
        Ok(Ok(_)) => true,
        Ok(Err(error)) => {
            tracing::warn!(pool = name, %error, "readiness check failed");
            false
        }
        Err(_) => {
            tracing::warn!(pool = name, "readiness check timed out");
            false
        }
    }
}
