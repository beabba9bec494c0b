//! The gateway's own endpoints: `/healthz` (the process is up) and `/readyz` (this gateway can
//! serve: its configuration and keys are loaded). Both answer from memory:
//! upstream health never takes the gateway out of its load balancer (it is in `/metrics`).

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde_json::{Value, json};
use shared_auth::Problem;

use crate::docs;
use crate::error::GatewayCode;
use crate::state::AppState;

pub(crate) const HEALTHZ: &str = "/healthz";
pub(crate) const READYZ: &str = "/readyz";
pub(crate) const METRICS: &str = "/metrics";

/// Whether `path` is one of the gateway's own routes: these and the documentation's (none is
/// under `/v1/`).
pub(crate) fn is_own_route(path: &str) -> bool {
    matches!(path, HEALTHZ | READYZ | METRICS) || docs::PATHS.contains(&path)
}

/// How soon a load balancer should ask again while the keys are not loaded.
const NOT_READY_RETRY_SECS: u32 = 5;

pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready once the token keys are loaded (a JWKS URL may be unreachable at start-up: until it has
/// been fetched, every signed token would be refused). The replicas that would be tried now are
/// shown for people, not acted on.
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    if !state.auth.keys_loaded() {
        return Err(
            Problem::from_code(GatewayCode::NotReady).with_retry_after(NOT_READY_RETRY_SECS)
        );
    }
    let group = |group: &crate::upstream::UpstreamGroup| {
        json!({
            "replicas": group.replicas.len(),
            "ready_replicas": group.ready_replicas(),
        })
    };
    Ok(Json(json!({
        "status": "ready",
        "upstreams": {"lingo": group(&state.lingo), "news": group(&state.news)},
    })))
}

/// `/metrics`, with the ready replicas of each group and the verification keys loaded as of now
/// (those gauges are set here only): a replica cooling down after a refused connection is not
/// counted, though its last probe was good.
pub async fn metrics(State(state): State<AppState>) -> Response {
    for group in [&state.lingo, &state.news] {
        state
            .metrics
            .set_ready_replicas(group.group.label(), group.ready_replicas());
    }
    state.metrics.set_token_keys_loaded(state.auth.key_count());
    crate::metrics::handler(State(state.metrics.clone())).await
}
