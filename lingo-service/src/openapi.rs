//! The OpenAPI 3.1 document of `/v1/lingo`, generated from the handlers' annotations, and
//! `GET /v1/lingo/openapi.json` serving it.
//!
//! Responses every operation shares (401, 500, 503, the `x-request-id` header) are added by
//! [`StandardResponses`] instead of being repeated on each handler.

use std::sync::OnceLock;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Router, body::Bytes};
use shared_auth::OptionalCaller;
use shared_auth::http::openapi::BearerSecurity;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::{
    ContentBuilder, ObjectBuilder, OpenApi as Document, Ref, RefOr, ResponseBuilder, Type,
};
use utoipa::{Modify, OpenApi};

pub use shared_auth::http::openapi::ProblemDocument;

use crate::AppState;
use crate::routes::study_sessions;
use crate::routes::{PREFIX, analytics, languages, phrases, progress, recommendations};

/// Media type of every 4xx and 5xx body.
pub const PROBLEM: &str = shared_auth::http::problem::PROBLEM_JSON;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "lingo-service",
        description = "The lingo learning API (`/v1/lingo`). Errors are RFC 9457 problem details \
                       (`application/problem+json`) with a stable `code`. Timestamps are RFC 3339 \
                       in UTC with a `Z`. Every response carries `x-request-id`."
    ),
    paths(
        languages::list,
        phrases::list,
        phrases::show,
        progress::progress,
        progress::xp,
        study_sessions::create,
        study_sessions::list,
        study_sessions::show,
        recommendations::list,
        analytics::export,
    ),
    components(schemas(ProblemDocument)),
    modifiers(&BearerSecurity, &StandardResponses),
    tags(
        (name = "lingo", description = "Catalogue and the caller's learning"),
        (name = "lingo-analytics", description = "Exports for analytics tools (scope `lingo:analytics`)"),
    )
)]
struct ApiDoc;

/// The full document of the service (info, the `bearer` scheme, every `/v1/lingo/...` path).
/// Deterministic: the gateway compares the merged documents with a committed file.
pub fn openapi() -> Document {
    let mut document = ApiDoc::openapi();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    document
}

pub fn router() -> Router<AppState> {
    Router::new().route(&format!("{PREFIX}/openapi.json"), get(serve))
}

/// The document as JSON, rendered once.
fn rendered() -> &'static Bytes {
    static JSON: OnceLock<Bytes> = OnceLock::new();
    JSON.get_or_init(|| Bytes::from(openapi().to_pretty_json().unwrap_or_default()))
}

/// Public like the catalogue: no token needed, but an invalid one is refused (fail closed).
async fn serve(OptionalCaller(_caller): OptionalCaller) -> Response {
    let mut response = rendered().clone().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Adds what every operation can answer, so handlers list only their own outcomes.
struct StandardResponses;

impl Modify for StandardResponses {
    fn modify(&self, openapi: &mut Document) {
        for item in openapi.paths.paths.values_mut() {
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
    responses
        .entry("401".to_owned())
        .or_insert_with(|| problem(unauthorized, Some(www_authenticate())));
    responses.entry("500".to_owned()).or_insert_with(|| {
        problem(
            "`internal_error`: an unexpected failure (details are logged, never sent)",
            None,
        )
    });
    responses.entry("503".to_owned()).or_insert_with(|| {
        problem(
            "`database_unavailable`: the database cannot be reached; retry after `Retry-After` seconds",
            Some(retry_after()),
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

/// `{}` in a `security` list: the operation also works without credentials.
fn is_empty_requirement(requirement: &utoipa::openapi::security::SecurityRequirement) -> bool {
    serde_json::to_value(requirement)
        .is_ok_and(|value| value.as_object().is_some_and(|o| o.is_empty()))
}

fn problem(
    description: &str,
    header: Option<(&'static str, utoipa::openapi::header::Header)>,
) -> RefOr<utoipa::openapi::Response> {
    let mut builder = ResponseBuilder::new().description(description).content(
        PROBLEM,
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build(),
    );
    if let Some((name, header)) = header {
        builder = builder.header(name, header);
    }
    RefOr::T(builder.build())
}

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(description))
        .build()
}

fn request_id_header() -> utoipa::openapi::header::Header {
    string_header(
        "The request's id: the client's own `x-request-id` when it is 1 to 128 characters of \
         `[A-Za-z0-9._:-]`, else a generated UUIDv7. Always present.",
    )
}

fn www_authenticate() -> (&'static str, utoipa::openapi::header::Header) {
    (
        "WWW-Authenticate",
        string_header(
            "`Bearer realm=\"lingo-news\"`, with `error=\"invalid_request\"` or \
             `error=\"invalid_token\", error_description=\"...\"` when a header was sent",
        ),
    )
}

fn retry_after() -> (&'static str, utoipa::openapi::header::Header) {
    (
        "Retry-After",
        HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            ))
            .description(Some("Seconds to wait before retrying"))
            .build(),
    )
}
