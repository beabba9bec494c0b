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

/// Every field is its own `State<_>`: the derive writes a `FromRef` for each field's type.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub db: Db,
    pub verifier: Arc<Verifier>,
    pub document: ApiDocument,
}
