//! OpenAPI pieces every service document shares: the problem-details schema, the bearer security
//! scheme, and the merge of the services' documents that the gateway serves.

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, OpenApiBuilder, Ref, RefOr, Response, Type,
};
use utoipa::{Modify, ToSchema};

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

/// The gateway's document: both services' paths and components under one title, with the
/// answers only the gateway gives (429, 502, 504) added to every operation.
pub fn merge(documents: impl IntoIterator<Item = OpenApi>) -> OpenApi {
    let mut merged = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("lingo-news API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The lingo and news APIs behind the gateway. Errors are RFC 9457 problem \
                     details (application/problem+json) with a stable `code`.",
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

fn problem_response(description: &str, headers: &[(&str, &str)]) -> Response {
    let mut response = ResponseBuilder::new().description(description).content(
        "application/problem+json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build(),
    );
    for (name, about) in headers {
        response = response.header(
            *name,
            HeaderBuilder::new()
                .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
                .description(Some(*about))
                .build(),
        );
    }
    response.build()
}

fn add_gateway_responses(document: &mut OpenApi) {
    let gateway_answers = [
        (
            "429",
            problem_response(
                "`rate_limited`: the caller's read or write budget at the gateway is spent.",
                &[
                    ("Retry-After", "Seconds until the budget refills."),
                    ("RateLimit-Limit", "Requests allowed per window."),
                    ("RateLimit-Remaining", "Requests left in this window."),
                    ("RateLimit-Reset", "Seconds until the window resets."),
                ],
            ),
        ),
        (
            "502",
            problem_response(
                "`upstream_unavailable`: no replica of the service accepted the connection, or it \
                 closed the connection before answering (gateway).",
                &[],
            ),
        ),
        (
            "504",
            problem_response(
                "`upstream_timeout`: the service did not answer within the gateway's timeout.",
                &[],
            ),
        ),
    ];
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            for (status, response) in &gateway_answers {
                operation
                    .responses
                    .responses
                    .entry((*status).to_owned())
                    .or_insert_with(|| RefOr::T(response.clone()));
            }
        }
    }
}
