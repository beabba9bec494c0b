//! The service's OpenAPI 3.1 document, assembled from the routers (each route declares its own
//! documentation with `utoipa-axum`, its problem answers from `problems`). This module adds what
//! no single route owns: the info, the tags, the `bearer` scheme, the `Problem` schema and the
//! `x-request-id` header of every answer. The gateway merges the document with lingo's, so
//! operation ids carry a `news_` prefix and the output is deterministic (no hash maps).

use shared_auth::http::openapi::{BearerSecurity, ProblemDocument, request_id_header};
use utoipa::openapi::RefOr;

use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::routes;
use crate::state::AppState;

/// The full document of the service, every path under `/v1/news`, as
/// `/v1/news/openapi.json` serves it.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut document) = OpenApiRouter::<AppState>::with_openapi(NewsApi::openapi())
        .merge(routes::router())
        .split_for_parts();
    RequestIdHeader.modify(&mut document);
    document
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "news-service",
        description = "The news API: articles, comments, likes, bookmarks, follows and the \
            caller's feed. Errors are RFC 9457 problem details (`application/problem+json`) with \
            a stable `code`. Every response carries `x-request-id`. Request bodies are JSON of at \
            most 128 KiB; unknown fields are rejected (422 `validation_failed`)."
    ),
    components(schemas(ProblemDocument)),
    modifiers(&BearerSecurity),
    tags(
        (name = "news-articles", description = "Articles, newest first."),
        (name = "news-comments", description = "Comment threads."),
        (name = "news-engagement", description = "Likes, bookmarks and follows: idempotent \
            POST (add) and DELETE (remove), no body."),
        (name = "news-directory", description = "Organisations and journalists."),
        (name = "news-me", description = "The caller's own lists."),
        (name = "news-meta", description = "This document."),
    )
)]
struct NewsApi;

/// Adds `x-request-id` to every response of every operation: the request's own id when it sent a
/// sane one, else a generated one.
struct RequestIdHeader;

impl Modify for RequestIdHeader {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let header = request_id_header();
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post, &mut item.delete];
            for operation in operations.into_iter().flatten() {
                for response in operation.responses.responses.values_mut() {
                    if let RefOr::T(response) = response {
                        response
                            .headers
                            .insert("x-request-id".into(), header.clone().into());
                    }
                }
            }
        }
    }
}
