//! What every handler can reach: the two pools, the token verifier and the OpenAPI document.
//! A leaf module, so route modules depend on it and never on the crate root that assembles them.

use std::sync::Arc;

use axum::extract::FromRef;
use shared_auth::Verifier;
use sqlx::PgPool;

/// The two pools: the primary for writes and for whatever a signed-in caller reads (so they see
/// their own writes at once), the read pool (a replica, or the primary) for anonymous reads.
#[derive(Clone, Debug)]
pub struct Pools {
    pub primary: PgPool,
    pub read: PgPool,
}

impl Pools {
    /// The pool a read should use: personalised reads go to the primary.
    pub fn for_reader(&self, signed_in: bool) -> &PgPool {
        if signed_in { &self.primary } else { &self.read }
    }
}

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
