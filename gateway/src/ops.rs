//! The gateway's own endpoints: `/healthz` (the process is up) and `/readyz` (every upstream group
//! has a replica answering its `/readyz`).

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shared_auth::Problem;

use crate::AppState;

pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(state): State<AppState>) -> Response {
    let (lingo, news) = tokio::join!(
        state.lingo.probe(&state.client),
        state.news.probe(&state.client)
    );
    let label = |ready: bool| if ready { "ready" } else { "unavailable" };
    if lingo && news {
        return Json(json!({
            "status": "ready",
            "upstreams": {"lingo": label(lingo), "news": label(news)},
        }))
        .into_response();
    }
    let missing: Vec<&str> = [("lingo", lingo), ("news", news)]
        .into_iter()
        .filter(|(_, ready)| !ready)
        .map(|(name, _)| name)
        .collect();
    Problem::unavailable("not_ready", 5)
        .with_detail(format!("no ready replica for: {}", missing.join(", ")))
        .into_response()
}
