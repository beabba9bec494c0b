//! `/healthz` (the process is up) and `/readyz` (the database answers).

use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use shared_auth::Problem;
use sqlx::PgPool;

use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn ping(pool: &PgPool) -> bool {
    let query = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(3), query).await,
        Ok(Ok(1))
    )
}

async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    let (primary, read) = tokio::join!(ping(&state.pools.primary), ping(&state.pools.read));
    if primary && read {
        Ok(Json(json!({"status": "ready"})))
    } else {
        Err(
            Problem::unavailable("database_unavailable", 5).with_detail(format!(
                "database not reachable (primary: {}, read: {})",
                if primary { "up" } else { "down" },
                if read { "up" } else { "down" }
            )),
        )
    }
}
