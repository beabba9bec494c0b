//! The HTTP surface of `/v1/news`, one module per resource, HTTP only. Each module is a leaf: it
//! declares its handlers with their OpenAPI annotations in one `router()` (utoipa-axum's
//! `routes!`), with paths relative to [`PREFIX`] (nested below it here), reads and writes
//! through `store/`, applies the rules of `domain/`, and never imports another route module.
//! Health checks are mounted around these routes by `app.rs`.

pub mod articles;
pub mod comments;
pub mod directory;
pub mod document;
pub mod engagement;
pub mod me;
pub mod search;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// Where every route of the service lives; the route modules declare their paths below it.
pub const PREFIX: &str = "/v1/news";

/// Every route with its documentation, under [`PREFIX`], in the order the document lists them.
pub fn router() -> OpenApiRouter<AppState> {
    resources().merge(document())
}

/// The routes that use the database, under [`PREFIX`]: all but the document itself, which is
/// served from memory (and so still answers while the database is down).
pub fn resources() -> OpenApiRouter<AppState> {
    let news = OpenApiRouter::new()
        .merge(articles::router())
        .merge(search::router())
        .merge(comments::router())
        .merge(engagement::router())
        .merge(directory::router())
        .merge(me::router());
    OpenApiRouter::new().nest(PREFIX, news)
}

/// `GET /v1/news/openapi.json`, under [`PREFIX`].
pub fn document() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().nest(PREFIX, document::router())
}
