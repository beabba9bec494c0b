//! The service's OpenAPI 3.1 document, assembled from the routers (each route declares its own
//! documentation with `utoipa-axum`), and the pieces operations share: header parameters and
//! one catalogue of problem answers, grouped into the sets each kind of operation can produce.
//! The gateway merges the document with lingo's, so operation ids carry a `news_` prefix and
//! the output is deterministic (no hash maps).

use std::collections::BTreeMap;

use shared_auth::openapi::{BearerSecurity, ProblemDocument};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response as ApiResponse, ResponseBuilder};
use utoipa::{IntoParams, IntoResponses, Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::error::ErrorCode;
use crate::state::AppState;

/// The document of `routes`: the shared header, tags and security added to what each route
/// declares.
pub fn document(routes: OpenApiRouter<AppState>) -> utoipa::openapi::OpenApi {
    let mut document = OpenApiRouter::with_openapi(NewsApi::openapi())
        .merge(routes)
        .into_openapi();
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
            most 16 KiB; unknown fields are rejected (422 `validation_failed`)."
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

// --- the catalogue of problem answers -----------------------------------------------------------

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

/// One answer of the catalogue: its status and how the document describes it.
trait CatalogueEntry {
    const STATUS: &'static str;
    fn response() -> RefOr<ApiResponse>;
}

macro_rules! problem_answers {
    ($($name:ident => $status:literal, $description:expr $(, $header:expr)*;)*) => {$(
        pub struct $name;

        impl CatalogueEntry for $name {
            const STATUS: &'static str = $status;
            fn response() -> RefOr<ApiResponse> {
                problem(&$description, &[$($header),*])
            }
        }
    )*};
}

problem_answers! {
    BadQuery => "400", "`invalid_query`: a query parameter is not an integer or out of range.";
    BadPath => "400", "`bad_request`: a path segment is not percent-encoded UTF-8.";
    BadPathOrQuery => "400", "`invalid_query`: a query parameter is not an integer or out of \
        range. `bad_request`: a path segment is not percent-encoded UTF-8.";
    BadListQuery => "400", "`invalid_query`: a query parameter is malformed or out of range, or \
        both `offset` and `cursor` were given. `invalid_cursor`: the cursor does not decode, or \
        belongs to another list or other filters.";
    BadCommentRequest => "400", "`malformed_json`: the body is empty or not JSON. \
        `invalid_idempotency_key`: `Idempotency-Key` is not one value of 1..=255 visible ASCII \
        characters.";
    Unauthorized => "401", "`missing_token` (a required endpoint without `Authorization`), \
        `invalid_authorization_header` (not `Bearer <token>`), or `invalid_token` (bad \
        signature, expired, wrong issuer or audience, ...). Optional endpoints answer 401 too \
        when a token is sent and invalid.", WWW_AUTHENTICATE;
    ArticleNotFound => "404", ErrorCode::ArticleNotFound.describe();
    CommentNotFound => "404", ErrorCode::CommentNotFound.describe();
    JournalistNotFound => "404", ErrorCode::JournalistNotFound.describe();
    OrganizationNotFound => "404", ErrorCode::OrganizationNotFound.describe();
    IdempotencyInUse => "409", "`idempotency_key_in_use`: a request with this \
        `Idempotency-Key` is still being processed.";
    PayloadTooLarge => "413", "`payload_too_large`: the body is over 16 KiB.";
    UnsupportedMediaType => "415", "`unsupported_media_type`: the body is not \
        `application/json`.";
    CommentRejected => "422", "`validation_failed` (a field is missing, null, of the wrong type, \
        unknown, or `text` is empty after trimming or over 10,000 characters), \
        `unknown_article`, `unknown_parent`, `parent_article_mismatch`, `max_depth_exceeded`, \
        or `idempotency_key_reused` (the key was used with another body). `errors` names the \
        field.";
    Internal => "500", "`internal_error`: the server failed; the problem says nothing more.";
    Unavailable => "503", "`database_unavailable`: the database is not reachable; retry after \
        `Retry-After`.", RETRY_AFTER;
}

/// 304 to an anonymous read whose `If-None-Match` matches: no body.
pub struct NotModified;

impl CatalogueEntry for NotModified {
    const STATUS: &'static str = "304";
    fn response() -> RefOr<ApiResponse> {
        ResponseBuilder::new()
            .description("Not modified: the stored answer with this `ETag` is still current.")
            .header("Cache-Control", string_header("`public, max-age=30`."))
            .header("ETag", string_header("The current strong validator."))
            .header("Vary", string_header("`authorization`."))
            .build()
            .into()
    }
}

/// Declares the answer sets: each one lists, for `responses(...)`, every non-2xx status an
/// operation of its kind can produce.
macro_rules! answer_sets {
    ($($(#[$doc:meta])* $name:ident = [$($entry:ident),* $(,)?];)*) => {$(
        $(#[$doc])*
        pub struct $name;

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<ApiResponse>> {
                BTreeMap::from([$(($entry::STATUS.to_owned(), $entry::response())),*])
            }
        }
    )*};
}

answer_sets! {
    /// A cacheable article list (offset or cursor paging).
    ArticleListAnswers = [NotModified, BadListQuery, Unauthorized, Internal, Unavailable];
    /// One cacheable article.
    ArticleAnswers = [NotModified, BadPath, Unauthorized, ArticleNotFound, Internal, Unavailable];
    /// A cacheable page of an article's comments.
    CommentThreadAnswers =
        [NotModified, BadPathOrQuery, Unauthorized, ArticleNotFound, Internal, Unavailable];
    /// One cacheable comment.
    CommentAnswers = [NotModified, BadPath, Unauthorized, CommentNotFound, Internal, Unavailable];
    /// Writing a comment.
    CreateCommentAnswers = [
        BadCommentRequest, Unauthorized, IdempotencyInUse, PayloadTooLarge, UnsupportedMediaType,
        CommentRejected, Internal, Unavailable,
    ];
    /// Adding or removing a like or bookmark of an article.
    ArticleEdgeAnswers = [BadPath, Unauthorized, ArticleNotFound, Internal, Unavailable];
    /// Following or unfollowing a journalist.
    JournalistEdgeAnswers = [BadPath, Unauthorized, JournalistNotFound, Internal, Unavailable];
    /// Following or unfollowing an organisation.
    OrganizationEdgeAnswers = [BadPath, Unauthorized, OrganizationNotFound, Internal, Unavailable];
    /// A cacheable directory page (offset paging).
    DirectoryAnswers = [NotModified, BadQuery, Unauthorized, Internal, Unavailable];
    /// A page of the caller's own list (offset paging).
    PrivatePageAnswers = [BadQuery, Unauthorized, Internal, Unavailable];
    /// The caller's own, unpaged list.
    PrivateAnswers = [Unauthorized, Internal, Unavailable];
    /// A page of the caller's feed (offset or cursor paging).
    FeedAnswers = [BadListQuery, Unauthorized, Internal, Unavailable];
    /// This document.
    DocumentAnswers = [NotModified, Unauthorized];
}
