//! The HTTP surface of `/v1/lingo`, one module per resource. Each module is a leaf: it declares
//! its handlers with their OpenAPI annotations in one `router()` (utoipa-axum's `routes!`), with
//! paths relative to [`PREFIX`] (nested below it here), reads and writes through `store/`,
//! applies the rules of `domain/`, and never imports another route module. The gateway proxies these
//! paths unchanged. Health checks are mounted around these routes by `app.rs`.

pub mod analytics;
pub mod document;
pub mod languages;
pub mod phrase_progress;
pub mod phrases;
pub mod progress;
pub mod recommendations;
pub mod study_sessions;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub const PREFIX: &str = "/v1/lingo";

/// Whether answers under `path` hold one caller's data (`/me/*`) or learners' progress
/// (`/analytics/*`): `Cache-Control: private, no-store` on every one of them, errors included.
pub fn is_private(path: &str) -> bool {
    let below = |section: &str| {
        path.strip_prefix(PREFIX)
            .and_then(|rest| rest.strip_prefix(section))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    below("/me") || below("/analytics")
}

/// Every route with its documentation, under [`PREFIX`], in the order the document lists them.
pub fn router() -> OpenApiRouter<AppState> {
    resources().merge(document())
}

/// The routes that use the database, under [`PREFIX`]: all but the document itself, which is
/// served from memory (and so still answers while the database is down).
pub fn resources() -> OpenApiRouter<AppState> {
    // The `/me/*` and `/analytics/*` answers are marked `private, no-store` by `app.rs`, outside
    // the load guard, so that its 503s are marked too.
    let lingo = OpenApiRouter::new()
        .merge(languages::router())
        .merge(phrases::router())
        .merge(progress::router())
        .merge(study_sessions::router())
        .merge(phrase_progress::router())
        .merge(recommendations::router())
        .merge(analytics::router());
    OpenApiRouter::new().nest(PREFIX, lingo)
}

/// `GET /v1/lingo/openapi.json`, under [`PREFIX`].
pub fn document() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().nest(PREFIX, document::router())
}
