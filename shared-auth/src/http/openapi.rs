//! OpenAPI pieces every service document shares: the problem-details schema, the bearer security
//! scheme, and the merge of the services' documents that the gateway serves.

use std::collections::BTreeMap;

use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, ObjectBuilder, OpenApiBuilder, Ref, RefOr, Response, Type,
};
use utoipa::{IntoResponses, Modify, ToSchema};

/// An OpenAPI document as [`merge`] takes it: the gateway reads the services' published JSON
/// back into it (`serde_json::from_slice::<OpenApi>`) to serve their merged document.
pub use utoipa::openapi::OpenApi;

use crate::http::problem::FieldError;

/// Name of the security scheme in every document (`security(("bearer" = []))`).
pub const BEARER: &str = "bearer";

/// RFC 9457 problem details, as every 4xx and 5xx of the system is written.
#[derive(ToSchema)]
#[schema(as = Problem, example = json!({
    "type": "about:blank", "title": "Unprocessable Content", "status": 422,
    "code": "validation_failed", "detail": "phrases_correct must be <= phrases_seen",
    "request_id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    "errors": [{"field": "phrases_correct", "message": "must be <= phrases_seen"}]
}))]
pub struct ProblemDocument {
    /// Always `about:blank`.
    #[schema(rename = "type")]
    pub kind: String,
    /// The HTTP status text.
    pub title: String,
    pub status: u16,
    /// Stable snake_case machine code (part of the contract).
    pub code: String,
    pub detail: Option<String>,
    /// The `x-request-id` of the request.
    pub request_id: Option<String>,
    /// One entry per bad field, on 422 validation failures.
    pub errors: Option<Vec<FieldError>>,
}

/// Adds the bearer (JWT) security scheme.
pub struct BearerSecurity;

impl Modify for BearerSecurity {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// A string response header with its description.
pub fn string_header(description: &str) -> Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(description))
        .build()
}

/// 304 to an anonymous read whose `If-None-Match` matches (see [`crate::http::cache`]): no body.
/// Both services list it for their cacheable reads.
pub struct NotModified;

impl IntoResponses for NotModified {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        BTreeMap::from([("304".to_owned(), RefOr::T(not_modified()))])
    }
}

/// The 304 of [`NotModified`], as the documents describe it.
pub fn not_modified() -> Response {
    ResponseBuilder::new()
        .description("Not modified: the stored answer with this `ETag` is still current.")
        .header("Cache-Control", string_header("`public, max-age=30`."))
        .header("ETag", string_header("The current strong validator."))
        .header("Vary", string_header("`authorization`."))
        .build()
}

/// The gateway's document: both services' paths and components under one title, with the
/// answers the gateway gives itself added to every operation. Documents that already went
/// through it (parts of the merged document) come out unchanged: the answers are added once.
pub fn merge(documents: impl IntoIterator<Item = OpenApi>) -> OpenApi {
    let mut merged = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("lingo-news API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The lingo and news APIs behind the gateway. Errors are RFC 9457 problem \
                     details (application/problem+json) with a stable `code`. Every answer under \
                     `/v1` carries the gateway's `RateLimit-Limit`, `RateLimit-Remaining` and \
                     `RateLimit-Reset` headers (the caller's budget) besides `x-request-id`, \
                     except the 404 and 405 of its route table and CORS preflights, which \
                     count against no budget.",
                ))
                .build(),
        )
        .build();
    for document in documents {
        merged.merge(document);
    }
    add_gateway_responses(&mut merged);
    merged
}

/// The `x-request-id` header every answer carries, as every document describes it.
pub fn request_id_header() -> Header {
    string_header(
        "The request's id: the client's own `x-request-id` when it is 1 to 128 characters of \
         `[A-Za-z0-9._:-]`, else a generated UUIDv7. Always present.",
    )
}

fn integer_header(description: &str) -> Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
        .description(Some(description))
        .build()
}

fn problem_response(description: &str, retry_after: Option<&str>) -> Response {
    let mut response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .header("x-request-id", request_id_header());
    if let Some(about) = retry_after {
        response = response.header("Retry-After", integer_header(about));
    }
    response.build()
}

/// A 429 of the gateway's rate limiter, with the headers it (like every answer under `/v1`)
/// carries.
fn rate_limited_response() -> Response {
    let mut response = problem_response(
        "`rate_limited`: the caller's read or write budget at the gateway is spent.",
        Some("Seconds until the budget refills."),
    );
    let headers = [
        ("RateLimit-Limit", "Requests allowed per window."),
        ("RateLimit-Remaining", "Requests left in this window."),
        ("RateLimit-Reset", "Seconds until the window resets."),
    ];
    for (name, about) in headers {
        response
            .headers
            .insert(name.to_owned(), RefOr::T(integer_header(about)));
    }
    response
}

/// Adds what the gateway itself may answer to an operation: its own problems (429, 502, 504; 408
/// while a body arrives; 400 for broken framing; 503 when no replica is ready, beside the
/// service's own 503s).
fn add_gateway_responses(document: &mut OpenApi) {
    let own_answers = [
        ("429", rate_limited_response()),
        (
            "502",
            problem_response(
                "`upstream_unavailable`: no replica of the service accepted the connection, it \
                 closed the connection before answering (or before the first byte of its \
                 answer's body), or its answer was not valid HTTP (gateway).",
                None,
            ),
        ),
        (
            "504",
            problem_response(
                "`upstream_timeout`: the service did not answer (or sent the head of its answer \
                 but none of its body) within the gateway's timeout.",
                None,
            ),
        ),
    ];
    let shared_answers = [
        (
            "400",
            "`bad_request` (gateway): the request's framing is broken: a body that ends before \
             its declared length or bad chunks, a transfer coding other than chunked, or not \
             exactly one `Host` of the form `host[:port]`.",
            None,
        ),
        (
            "503",
            "`upstream_unavailable` (gateway): no replica of the service could take the \
             request (none configured, or every one was marked down and refused again when \
             tried anyway); retry after `Retry-After` seconds.",
            Some("Seconds to wait before retrying"),
        ),
    ];
    let timeout = problem_response(
        "`request_timeout` (gateway): the request's body was still arriving when the gateway's \
         upstream timeout passed.",
        None,
    );
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            for (status, response) in &own_answers {
                responses
                    .entry((*status).to_owned())
                    .or_insert_with(|| RefOr::T(response.clone()));
            }
            if operation.request_body.is_some() {
                responses
                    .entry("408".to_owned())
                    .or_insert_with(|| RefOr::T(timeout.clone()));
            }
            for (status, description, retry_after) in shared_answers {
                match responses.get_mut(status) {
                    Some(RefOr::T(response)) if response.description.contains(description) => {}
                    Some(RefOr::T(response)) => {
                        let service_part = response.description.trim_end_matches('.');
                        response.description = format!("{service_part}. {description}");
                    }
                    Some(RefOr::Ref(_)) => {}
                    None => {
                        let response = problem_response(description, retry_after);
                        responses.insert(status.to_owned(), RefOr::T(response));
                    }
                }
            }
        }
    }
}
