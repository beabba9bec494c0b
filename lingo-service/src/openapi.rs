//! The OpenAPI 3.1 document of `/v1/lingo` (served by `routes/document.rs`).
//!
//! The paths come from the routers themselves (`routes::router()`, split with
//! `split_for_parts`), so a route and its documentation are declared once. This module adds what
//! no single route owns: the info, the tags, the `bearer` scheme, the `Problem` schema, and the
//! responses every operation can give (401, 500, 503, the `x-request-id` header).

use shared_auth::http::openapi::{
    BearerSecurity, ProblemDocument, request_id_header, string_header,
};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::{ObjectBuilder, OpenApi as Document, RefOr, Type};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::problems::problem;
use crate::routes;
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "lingo-service",
        description = "The lingo learning API (`/v1/lingo`). Errors are RFC 9457 problem details \
                       (`application/problem+json`) with a stable `code`. Timestamps are RFC 3339 \
                       in UTC with a `Z`. Every response carries `x-request-id`."
    ),
    components(schemas(ProblemDocument)),
    tags(
        (name = "lingo", description = "Catalogue and the caller's learning"),
        (name = "lingo-analytics", description = "Exports for analytics tools (scope `lingo:analytics`)"),
        (name = "lingo-meta", description = "This service's own OpenAPI document"),
    )
)]
struct ApiDoc;

/// The full document of the service (info, the `bearer` scheme, every `/v1/lingo/...` path), as
/// `/v1/lingo/openapi.json` serves it. Deterministic: the gateway compares the merged documents
/// with a committed file.
pub fn openapi() -> Document {
    let (_, mut document) = OpenApiRouter::<AppState>::with_openapi(ApiDoc::openapi())
        .merge(routes::router())
        .split_for_parts();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    BearerSecurity.modify(&mut document);
    StandardResponses.modify(&mut document);
    document
}

/// Adds what every operation can answer, so handlers list only their own outcomes.
struct StandardResponses;

impl Modify for StandardResponses {
    fn modify(&self, openapi: &mut Document) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let private = routes::is_private(path);
            for operation in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                add_standard_responses(operation);
                if private {
                    mark_private(operation);
                }
            }
        }
    }
}

fn add_standard_responses(operation: &mut Operation) {
    let optional_auth = operation
        .security
        .as_ref()
        .is_some_and(|requirements| requirements.iter().any(is_empty_requirement));
    let unauthorized = if optional_auth {
        "`invalid_authorization_header` or `invalid_token`: an `Authorization` header was sent \
         but is not a valid bearer token (no token at all is fine here)"
    } else {
        "`missing_token`, `invalid_authorization_header` or `invalid_token`: no valid bearer token"
    };
    let responses = &mut operation.responses.responses;
    responses.entry("401".to_owned()).or_insert_with(|| {
        RefOr::T(
            problem(unauthorized)
                .header("WWW-Authenticate", www_authenticate())
                .build(),
        )
    });
    responses.entry("500".to_owned()).or_insert_with(|| {
        RefOr::T(
            problem("`internal_error`: an unexpected failure (details are logged, never sent)")
                .build(),
        )
    });
    responses.entry("503".to_owned()).or_insert_with(|| {
        RefOr::T(
            problem(
                "`database_unavailable`: the database cannot be used (unreachable, login \
                 refused, not migrated); `timeout`: the request passed its deadline and was \
                 cancelled; `overloaded`: the service is at its in-flight limit or no database \
                 connection came free in time; `service_unavailable`: a token was sent but the \
                 token keys are not loaded yet. Retry after `Retry-After` seconds",
            )
            .header("Retry-After", retry_after())
            .build(),
        )
    });
    for response in responses.values_mut() {
        if let RefOr::T(response) = response {
            response
                .headers
                .insert("x-request-id".to_owned(), RefOr::T(request_id_header()));
        }
    }
}

/// Every answer of a private path (`/me/*`, `/analytics/*`) says `private, no-store`.
fn mark_private(operation: &mut Operation) {
    for response in operation.responses.responses.values_mut() {
        if let RefOr::T(response) = response {
            response.headers.insert(
                "Cache-Control".to_owned(),
                RefOr::T(string_header("`private, no-store`.")),
            );
        }
    }
}

/// `{}` in a `security` list: the operation also works without credentials.
fn is_empty_requirement(requirement: &utoipa::openapi::security::SecurityRequirement) -> bool {
    serde_json::to_value(requirement)
        .is_ok_and(|value| value.as_object().is_some_and(|o| o.is_empty()))
}

fn www_authenticate() -> utoipa::openapi::header::Header {
    string_header(
        "`Bearer realm=\"lingo-news\"`, with `error=\"invalid_request\"` or \
         `error=\"invalid_token\", error_description=\"...\"` when a header was sent",
    )
}

fn retry_after() -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        ))
        .description(Some("Seconds to wait before retrying"))
        .build()
}
