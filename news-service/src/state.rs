//! What every handler can reach: the two pools (with the routing of reads between them, see
//! `read_routing`), the token verifier and the OpenAPI document. Route modules depend on it and
//! never on the crate root that assembles them.

use std::sync::Arc;

use axum::extract::FromRef;
use shared_auth::Verifier;

pub use crate::read_routing::Pools;

/// The service's OpenAPI document, built once from the routers and served as it is.
#[derive(Clone)]
pub struct ApiDocument(pub Arc<utoipa::openapi::OpenApi>);

#[derive(Clone)]
pub struct AppState {
    pub pools: Pools,
    pub verifier: Arc<Verifier>,
    pub document: ApiDocument,
}

impl FromRef<AppState> for Arc<Verifier> {
    fn from_ref(state: &AppState) -> Self {
        state.verifier.clone()
    }
}

impl FromRef<AppState> for Pools {
    fn from_ref(state: &AppState) -> Self {
        state.pools.clone()
    }
}

impl FromRef<AppState> for ApiDocument {
    fn from_ref(state: &AppState) -> Self {
        state.document.clone()
    }
}
