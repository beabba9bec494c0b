//! The service's OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations,
//! and served at `GET /v1/news/openapi.json`. The gateway merges it with lingo's, so operation ids
//! carry a `news_` prefix and the output is deterministic (no hash maps).
//!
//! Problem answers are described once here (`ToResponse` types, inlined into each operation) so
//! every operation lists exactly the statuses its handler can produce.

use std::sync::LazyLock;

use axum::http::HeaderMap;
use axum::response::Response;
use shared_auth::OptionalCaller;
use shared_auth::http::openapi::{BearerSecurity, ProblemDocument};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response as ApiResponse, ResponseBuilder};
use utoipa::{IntoParams, Modify, OpenApi, ToResponse};

use crate::cache::json_read;
use crate::routes::{articles, comments, directory, engagement, me};

/// The full document of the service, every path under `/v1/news`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    NewsApi::openapi()
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "news-service",
        description = "The news API: articles, comments, likes, bookmarks, follows and the \
            caller's feed. Errors are RFC 9457 problem details (`application/problem+json`) with \
            a stable `code`. Every response carries `x-request-id`. Request bodies are JSON of at \
            most 16 KiB; unknown fields are rejected (422 `validation_failed`)."
    ),
    paths(
        articles::list_articles,
        articles::get_article,
        comments::list_comments,
        comments::create_comment,
        comments::get_comment,
        engagement::like,
        engagement::unlike,
        engagement::bookmark,
        engagement::unbookmark,
        engagement::follow_journalist,
        engagement::unfollow_journalist,
        engagement::follow_organization,
        engagement::unfollow_organization,
        directory::list_organizations,
        directory::list_journalists,
        me::my_bookmarks,
        me::my_following,
        me::my_feed,
        serve,
    ),
    components(schemas(ProblemDocument)),
    modifiers(&BearerSecurity, &RequestIdHeader),
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
/// sane one, else a generated one (API.md section 1).
struct RequestIdHeader;

impl Modify for RequestIdHeader {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let header = HeaderBuilder::new()
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .description(Some(
                "The request id: the client's `x-request-id` when it is 1..=128 characters of \
                 `[A-Za-z0-9._:-]`, else a generated UUIDv7. Always sent.",
            ))
            .build();
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

/// `GET /v1/news/openapi.json`: this document. Needs no token, but like every optional endpoint
/// it refuses an invalid one (fail closed).
#[utoipa::path(
    get,
    path = "/v1/news/openapi.json",
    operation_id = "news_openapi",
    tag = "news-meta",
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
        (status = 304, response = inline(NotModified)),
        (status = 401, response = inline(Unauthorized)),
    )
)]
pub async fn serve(OptionalCaller(caller): OptionalCaller, headers: HeaderMap) -> Response {
    static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(openapi);
    json_read(&headers, caller.is_some(), &*DOCUMENT)
}

// --- parameters shared by several operations ---------------------------------------------------

/// `If-None-Match` of the cacheable reads.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IfNoneMatch {
    /// ETags of a stored answer (or `*`): an anonymous request whose tag matches gets 304.
    #[param(rename = "If-None-Match", value_type = String, required = false)]
    pub if_none_match: Option<String>,
}

/// `Idempotency-Key` of `POST /comments`.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// Scoped to the caller, kept 24 h. A repeat with the same body replays the first answer
    /// (`Idempotency-Replayed: true`) and changes nothing; with another body it is 422
    /// `idempotency_key_reused`; while the first is still running, 409 `idempotency_key_in_use`.
    /// A request that fails validation stores nothing.
    #[param(
        rename = "Idempotency-Key",
        value_type = String,
        required = false,
        min_length = 1,
        max_length = 255,
        pattern = "^[!-~]{1,255}$"
    )]
    pub idempotency_key: Option<String>,
}

// --- responses shared by several operations ----------------------------------------------------

const PROBLEM_JSON: &str = "application/problem+json";

fn string_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(description))
        .build()
}

fn problem(description: &str, headers: &[(&str, &str)]) -> RefOr<ApiResponse> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .build();
    let mut builder = ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_JSON, content);
    for (name, description) in headers {
        builder = builder.header(*name, string_header(description));
    }
    builder.build().into()
}

const WWW_AUTHENTICATE: (&str, &str) = (
    "WWW-Authenticate",
    "`Bearer realm=\"lingo-news\"`, with `error=\"invalid_request\"` or \
     `error=\"invalid_token\", error_description=\"…\"` when a credential was sent.",
);
const RETRY_AFTER: (&str, &str) = ("Retry-After", "Seconds to wait before retrying.");

macro_rules! problem_responses {
    ($($(#[$doc:meta])* $name:ident => $description:expr $(, $header:expr)*;)*) => {$(
        $(#[$doc])*
        pub struct $name;

        impl<'r> ToResponse<'r> for $name {
            fn response() -> (&'r str, RefOr<ApiResponse>) {
                (stringify!($name), problem($description, &[$($header),*]))
            }
        }
    )*};
}

problem_responses! {
    BadQuery => "`invalid_query`: a query parameter is not an integer or out of range.";
    BadPath => "`bad_request`: a path segment is not percent-encoded UTF-8.";
    BadPathOrQuery => "`invalid_query`: a query parameter is not an integer or out of range. \
        `bad_request`: a path segment is not percent-encoded UTF-8.";
    BadListQuery => "`invalid_query`: a query parameter is malformed or out of range, or both \
        `offset` and `cursor` were given. `invalid_cursor`: the cursor does not decode, or \
        belongs to another list or other filters.";
    BadCommentRequest => "`malformed_json`: the body is empty or not JSON. \
        `invalid_idempotency_key`: `Idempotency-Key` is not one value of 1..=255 visible ASCII \
        characters.";
    Unauthorized => "`missing_token` (a required endpoint without `Authorization`), \
        `invalid_authorization_header` (not `Bearer <token>`), or `invalid_token` (bad \
        signature, expired, wrong issuer or audience, ...). Optional endpoints answer 401 too \
        when a token is sent and invalid.", WWW_AUTHENTICATE;
    ArticleNotFound => "`article_not_found`: no article has this id.";
    CommentNotFound => "`comment_not_found`: no comment has this id.";
    JournalistNotFound => "`journalist_not_found`: no journalist has this id.";
    OrganizationNotFound => "`organization_not_found`: no organisation has this id.";
    IdempotencyInUse => "`idempotency_key_in_use`: a request with this `Idempotency-Key` is \
        still being processed.";
    PayloadTooLarge => "`payload_too_large`: the body is over 16 KiB.";
    UnsupportedMediaType => "`unsupported_media_type`: the body is not `application/json`.";
    CommentRejected => "`validation_failed` (a field is missing, null, of the wrong type, \
        unknown, or `text` is empty after trimming or over 10,000 characters), \
        `unknown_article`, `unknown_parent`, `parent_article_mismatch`, `max_depth_exceeded`, \
        or `idempotency_key_reused` (the key was used with another body). `errors` names the \
        field.";
    Internal => "`internal_error`: the server failed; the problem says nothing more.";
    Unavailable => "`database_unavailable`: the database is not reachable; retry after \
        `Retry-After`.", RETRY_AFTER;
}

/// 304 to an anonymous read whose `If-None-Match` matches: no body.
pub struct NotModified;

impl<'r> ToResponse<'r> for NotModified {
    fn response() -> (&'r str, RefOr<ApiResponse>) {
        let response = ResponseBuilder::new()
            .description("Not modified: the stored answer with this `ETag` is still current.")
            .header("Cache-Control", string_header("`public, max-age=30`."))
            .header("ETag", string_header("The current strong validator."))
            .header("Vary", string_header("`authorization`."))
            .build();
        ("NotModified", response.into())
    }
}
