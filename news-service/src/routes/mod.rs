//! One router per resource, HTTP only: each declares its routes and their documentation together
//! and calls `store/` for data and `domain/` for rules. No route module imports another.

pub mod articles;
pub mod comments;
pub mod directory;
pub mod document;
pub mod engagement;
pub mod me;
pub mod search;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// Every `/v1/news` route with its documentation, in the order the document lists them.
pub fn router() -> OpenApiRouter<AppState> {
    resources().merge(document::router())
}

/// The routes that use the database: all but the document itself, which is served from memory
/// (and so still answers while the database is down).
pub fn resources() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(articles::router())
        .merge(search::router())
        .merge(comments::router())
        .merge(engagement::router())
        .merge(directory::router())
        .merge(me::router())
}
