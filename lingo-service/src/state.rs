//! What every handler can reach: the database handle, the token verifier and the OpenAPI
//! document, each extractable on its own with `State<_>` (`FromRef`). Handlers take `State<Db>`,
//! never a pool or the whole state.

use std::sync::Arc;

use axum::extract::FromRef;
use shared_auth::Verifier;

pub use crate::db::Db;

/// The service's OpenAPI document, built once from the routers and served as it is.
#[derive(Clone)]
pub struct ApiDocument(pub Arc<utoipa::openapi::OpenApi>);

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub verifier: Arc<Verifier>,
    pub document: ApiDocument,
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

impl FromRef<AppState> for ApiDocument {
    fn from_ref(state: &AppState) -> Self {
        state.document.clone()
    }
}
