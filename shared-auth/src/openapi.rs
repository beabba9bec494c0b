//! OpenAPI pieces every service document shares: the problem-details schema, the bearer security
//! scheme, and the merge of the services' documents that the gateway serves.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{InfoBuilder, OpenApi, OpenApiBuilder};
use utoipa::{Modify, ToSchema};

use crate::problem::FieldError;

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

/// The gateway's document: both services' paths and components under one title.
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
    merged
}
