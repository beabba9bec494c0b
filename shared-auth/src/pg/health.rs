//! `GET /healthz` (the process is up) and `GET /readyz` (the service can serve something), the
//! same in both services. `/readyz` answers from the background pool check
//! ([`crate::pg::pool_health`]), never with a query of its own: 200 while at least one database
//! pool is up, with every pool's state in the body; 503 `database_unavailable` with
//! `Retry-After` only when no pool is up, so an orchestrator keeps a replica whose read pool
//! alone is down.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Map, Value, json};

use crate::http::codes::SharedCode;
use crate::http::problem::Problem;
use crate::pg::pool_health::{PoolHealth, PoolState};

/// What `/readyz` reads: the background check, how long a just-started process waits for its
/// first result, and the `Retry-After` of the 503.
struct Readiness {
    health: PoolHealth,
    first_check_wait: Duration,
    retry_after_secs: u32,
}

/// `/healthz` and `/readyz` reading a background check the service also uses elsewhere.
pub fn router_for<S>(health: PoolHealth, retry_after_secs: u32) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let readiness = Arc::new(Readiness {
        health,
        first_check_wait: Duration::from_secs(3),
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
    readiness
        .health
        .first_check(readiness.first_check_wait)
        .await;
    let pools = readiness.health.snapshot();
    if pools.iter().any(|(_, state)| *state == PoolState::Up) {
        let states: Map<String, Value> = pools
            .iter()
            .map(|(name, state)| ((*name).to_owned(), json!(state.as_str())))
            .collect();
        return Ok(Json(json!({"status": "ready", "pools": states})));
    }
    let states: Vec<String> = pools
        .iter()
        .map(|(name, state)| format!("{name}: {}", state.as_str()))
        .collect();
    Err(Problem::from_code(SharedCode::DatabaseUnavailable)
        .with_retry_after(readiness.retry_after_secs)
        .with_detail(format!("no database is reachable ({})", states.join(", "))))
}
