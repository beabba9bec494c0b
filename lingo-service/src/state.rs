//! What every handler can reach: the runtime pool and the token verifier, each extractable on
//! its own with `State<_>` (`FromRef`).

use std::sync::Arc;

use axum::extract::FromRef;
use shared_auth::Verifier;
use sqlx::PgPool;

#[derive(Clone)]
pub struct AppState {
    pub db: PgPool,
    pub verifier: Arc<Verifier>,
}

impl FromRef<AppState> for Arc<Verifier> {
    fn from_ref(state: &AppState) -> Self {
        state.verifier.clone()
    }
}

impl FromRef<AppState> for PgPool {
    fn from_ref(state: &AppState) -> Self {
        state.db.clone()
    }
}
