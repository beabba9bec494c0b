//! The gateway's own endpoints: `/healthz` (the process is up) and `/readyz` (this gateway can
//! serve: it exists only once its configuration and keys are loaded). Both answer from memory:
//! upstream health never takes the gateway out of its load balancer (it is in `/metrics`).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::AppState;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Always ready once built; the last probe results are shown for people, not acted on.
pub async fn readyz(State(state): State<AppState>) -> Json<Value> {
    let group = |group: &crate::upstream::UpstreamGroup| {
        json!({
            "replicas": group.replicas.len(),
            "ready_replicas": group.ready_replicas(),
        })
    };
    Json(json!({
        "status": "ready",
        "upstreams": {"lingo": group(&state.lingo), "news": group(&state.news)},
    }))
}
