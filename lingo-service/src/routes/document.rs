//! `GET /v1/lingo/openapi.json`: the service's OpenAPI document, served from memory. Needs no
//! token, but like every optional endpoint it refuses an invalid one (fail closed).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use shared_auth::OptionalCaller;
use shared_auth::http::cache::{IfNoneMatch, json_read};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::problems::NotModified;
use crate::state::{ApiDocument, AppState};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(serve))
}

/// `GET /v1/lingo/openapi.json`: this document. Public like the catalogue, and cached like it:
/// no token needed, but an invalid one is refused (fail closed).
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "lingo_openapi",
    tag = "lingo-meta",
    params(IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "This OpenAPI 3.1 document.", body = Object,
            content_type = "application/json",
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        NotModified,
    )
)]
async fn serve(
    State(ApiDocument(document)): State<ApiDocument>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
) -> Response {
    json_read(&headers, caller.is_some(), &*document)
}
