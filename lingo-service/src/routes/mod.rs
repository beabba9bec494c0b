//! One router per resource; all lingo resources live under `/v1/lingo` (the gateway proxies
//! paths unchanged). Health checks (`/healthz`, `/readyz`) come from shared-auth, mounted in
//! `lib.rs` with the pool they check.

pub mod analytics;
pub mod languages;
pub mod phrases;
pub mod progress;
pub mod recommendations;
pub mod study_sessions;

use axum::Router;

use crate::AppState;

pub const PREFIX: &str = "/v1/lingo";

pub fn router() -> Router<AppState> {
    let lingo = Router::new()
        .merge(languages::router())
        .merge(phrases::router())
        .merge(progress::router())
        .merge(study_sessions::router())
        .merge(recommendations::router())
        .merge(analytics::router());
    Router::new()
        .merge(crate::openapi::router())
        .nest(PREFIX, lingo)
}
