//! `GET /healthz` (the process is up) and `GET /readyz` (the database answers).

use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use shared_auth::Problem;
use sqlx::PgPool;

use crate::AppState;

const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(db): State<PgPool>) -> Result<Json<Value>, Problem> {
    let ping = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&db);
    match tokio::time::timeout(READY_TIMEOUT, ping).await {
        Ok(Ok(_)) => Ok(Json(json!({"status": "ready"}))),
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness check failed");
            Err(not_ready())
        }
        Err(_) => {
            tracing::warn!("readiness check timed out");
            Err(not_ready())
        }
    }
}

fn not_ready() -> Problem {
    Problem::unavailable("database_unavailable", 2).with_detail("the database is not reachable")
}
