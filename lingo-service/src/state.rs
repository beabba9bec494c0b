//! What every handler can reach: the database handle and the token verifier, each extractable on
//! its own with `State<_>` (`FromRef`). Handlers take `State<Db>`, never a pool or the whole
//! state.

use std::sync::Arc;

use axum::extract::FromRef;
use shared_auth::Verifier;

pub use crate::db::Db;

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub verifier: Arc<Verifier>,
}

impl FromRef<AppState> for Arc<Verifier> {
    fn from_ref(state: &AppState) -> Self {
        state.verifier.clone()
    }
}

impl FromRef<AppState> for Db {
    fn from_ref(state: &AppState) -> Self {
        state.db.clone()
    }
}
