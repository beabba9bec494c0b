//! The catalogue of problem answers the OpenAPI annotations list: each answer declared once
//! (status, description, headers), grouped into one `IntoResponses` set per kind of operation,
//! so a handler says `responses((status = 200, ...), ArticleProblems)` instead of repeating the
//! same lines. A 404's text comes from its [`ErrorCode`].
//!
//! Sets are named `<Kind>Problems` in both services: they hold an operation's non-2xx outcomes
//! (problem details, and the 304 of a cached read), while "answer" would also cover its 2xx.

use std::collections::BTreeMap;

use shared_auth::ErrorCode as _;
use shared_auth::http::openapi::{NotModified, not_modified, string_header};
use utoipa::IntoResponses;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response as ApiResponse, ResponseBuilder};

use crate::error::ErrorCode;

const PROBLEM_JSON: &str = "application/problem+json";

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

/// "`code`: description." as the document describes a 404 of one code.
fn of_code(code: ErrorCode) -> String {
    format!("`{}`: {}.", code.code(), code.description())
}

/// One answer of the catalogue: its status and how the document describes it.
trait CatalogueEntry {
    const STATUS: &'static str;
    fn response() -> RefOr<ApiResponse>;
}

macro_rules! catalogue_entries {
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

catalogue_entries! {
    BadListQuery => "400", "`invalid_query`: a query parameter is malformed or out of range, or \
        both `offset` and `cursor` were given. `invalid_cursor`: the cursor does not decode, or \
        belongs to another list or other filters.";
    BadSearchQuery => "400", "`invalid_query`: `q` is missing, empty or over 200 characters \
        after trimming, `published_after` or `published_before` is not an RFC 3339 date-time, \
        `limit` or `sort` is out of range, or `offset` was given (search pages by cursor only). \
        `invalid_cursor`: the cursor does not decode, or belongs to another list or another \
        search (other `q`, filters or sort).";
    BadCommentRequest => "400", "`malformed_json`: the body is empty or not JSON. \
        `invalid_idempotency_key`: `Idempotency-Key` is not one value of 1..=255 visible ASCII \
        characters.";
    Unauthorized => "401", "`missing_token` (a required endpoint without `Authorization`), \
        `invalid_authorization_header` (not `Bearer <token>`), or `invalid_token` (bad \
        signature, expired, wrong issuer or audience, ...). Optional endpoints answer 401 too \
        when a token is sent and invalid.", WWW_AUTHENTICATE;
    ArticleNotFound => "404", of_code(ErrorCode::ArticleNotFound);
    CommentNotFound => "404", of_code(ErrorCode::CommentNotFound);
    JournalistNotFound => "404", of_code(ErrorCode::JournalistNotFound);
    OrganizationNotFound => "404", of_code(ErrorCode::OrganizationNotFound);
    IdempotencyInUse => "409", "`idempotency_key_in_use`: a request with this \
        `Idempotency-Key` is still being processed.";
    PayloadTooLarge => "413", "`payload_too_large`: the body is over 128 KiB.";
    UnsupportedMediaType => "415", "`unsupported_media_type`: the body is not \
        `application/json`.";
    CommentRejected => "422", "`validation_failed` (a field is missing, null, of the wrong type, \
        unknown, or `text` is empty after trimming or over 10,000 characters), \
        `unknown_article`, `unknown_parent`, `parent_article_mismatch`, `max_depth_exceeded`, \
        or `idempotency_key_reused` (the key was used with another body). `errors` names the \
        field.";
    Internal => "500", "`internal_error`: the server failed; the problem says nothing more.";
    Unavailable => "503", "`database_unavailable`: the database cannot be used (unreachable, \
        login refused, not migrated); `timeout`: the request passed its deadline and was \
        cancelled; `overloaded`: the service is at its in-flight limit or no database connection \
        came free in time; `service_unavailable`: a token was sent but the token keys are not \
        loaded yet. Retry after `Retry-After`.",
        RETRY_AFTER;
}

impl CatalogueEntry for NotModified {
    const STATUS: &'static str = "304";
    fn response() -> RefOr<ApiResponse> {
        not_modified().into()
    }
}

/// Declares the problem sets: each one lists, for `responses(...)`, every non-2xx status an
/// operation of its kind can produce.
macro_rules! problem_sets {
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

problem_sets! {
    /// A cacheable article list (offset or cursor paging).
    ArticleListProblems = [NotModified, BadListQuery, Unauthorized, Internal, Unavailable];
    /// A cacheable page of search matches (cursor paging only).
    SearchProblems = [NotModified, BadSearchQuery, Unauthorized, Internal, Unavailable];
    /// One cacheable article.
    ArticleProblems = [NotModified, Unauthorized, ArticleNotFound, Internal, Unavailable];
    /// A cacheable page of an article's comments (offset or cursor paging).
    CommentThreadProblems =
        [NotModified, BadListQuery, Unauthorized, ArticleNotFound, Internal, Unavailable];
    /// One cacheable comment.
    CommentProblems = [NotModified, Unauthorized, CommentNotFound, Internal, Unavailable];
    /// Writing a comment.
    CreateCommentProblems = [
        BadCommentRequest, Unauthorized, IdempotencyInUse, PayloadTooLarge, UnsupportedMediaType,
        CommentRejected, Internal, Unavailable,
    ];
    /// Adding or removing a like or bookmark of an article (no body; one sent anyway must be
    /// JSON of at most 128 KiB).
    ArticleEdgeProblems =
        [Unauthorized, ArticleNotFound, PayloadTooLarge, UnsupportedMediaType, Internal, Unavailable];
    /// Following or unfollowing a journalist.
    JournalistEdgeProblems =
        [Unauthorized, JournalistNotFound, PayloadTooLarge, UnsupportedMediaType, Internal, Unavailable];
    /// Following or unfollowing an organisation.
    OrganizationEdgeProblems =
        [Unauthorized, OrganizationNotFound, PayloadTooLarge, UnsupportedMediaType, Internal, Unavailable];
    /// A cacheable directory page (offset or cursor paging).
    DirectoryProblems = [NotModified, BadListQuery, Unauthorized, Internal, Unavailable];
    /// A page of the caller's own list (offset or cursor paging).
    PrivatePageProblems = [BadListQuery, Unauthorized, Internal, Unavailable];
    /// The caller's own, unpaged list.
    PrivateProblems = [Unauthorized, Internal, Unavailable];
    /// A page of the caller's feed (offset or cursor paging).
    FeedProblems = [BadListQuery, Unauthorized, Internal, Unavailable];
    /// This document.
    DocumentProblems = [NotModified, Unauthorized];
}
