//! The catalogue of problem responses the OpenAPI annotations list: one `IntoResponses` type per
//! error set, named for what it covers, so a handler says `responses((status = 200, ...),
//! ListProblems)` instead of repeating the same lines. What every operation can answer (401,
//! 500, 503) is added to all of them by `openapi.rs`.
//!
//! Sets are named `<Kind>Problems` in both services: they hold an operation's non-2xx outcomes
//! (problem details, and the 304 of a cached read), while "answer" would also cover its 2xx.

use std::collections::BTreeMap;

pub use shared_auth::http::openapi::NotModified;
use shared_auth::http::openapi::string_header;
use shared_auth::http::problem::PROBLEM_JSON;
use utoipa::IntoResponses;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};

use crate::error::ErrorCode;
use shared_auth::ErrorCode as _;

type Responses = BTreeMap<String, RefOr<Response>>;

/// A problem response: `description` says which `code`s it carries and when.
pub fn problem(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        PROBLEM_JSON,
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build(),
    )
}

fn of_code(code: ErrorCode) -> String {
    format!("`{}`: {}", code.code(), code.description())
}

fn responses<const N: usize>(entries: [(u16, ResponseBuilder); N]) -> Responses {
    entries
        .into_iter()
        .map(|(status, response)| (status.to_string(), RefOr::T(response.build())))
        .collect()
}

/// 400 of a list that pages by offset or by cursor.
pub struct ListProblems;

impl IntoResponses for ListProblems {
    fn responses() -> Responses {
        let bad_request = format!(
            "`invalid_query`: a query parameter (`limit`, `offset`, `q`) is malformed or out of range, or both \
             `offset` and `cursor` were given; {}, or belongs to another list or to other \
             filters",
            of_code(ErrorCode::InvalidCursor)
        );
        responses([(400, problem(&bad_request))])
    }
}

/// 400 `invalid_query` of a list that takes only a `limit` and filters (no paging).
pub struct LimitProblems;

impl IntoResponses for LimitProblems {
    fn responses() -> Responses {
        responses([(
            400,
            problem("`invalid_query`: `limit` or a filter is malformed or out of range"),
        )])
    }
}

/// 400 of a list paged by cursor only, with filters its cursor keeps.
pub struct CursorPagingProblems;

impl IntoResponses for CursorPagingProblems {
    fn responses() -> Responses {
        let bad_request = format!(
            "`invalid_query`: `limit` or a filter is malformed or out of range, or an `offset` \
             is given (this list pages by cursor only); {}, belongs to another list, or is \
             given with other filters than its list's",
            of_code(ErrorCode::InvalidCursor)
        );
        responses([(400, problem(&bad_request))])
    }
}

/// 404 `phrase_not_found`.
pub struct PhraseProblems;

impl IntoResponses for PhraseProblems {
    fn responses() -> Responses {
        responses([(404, problem(&of_code(ErrorCode::PhraseNotFound)))])
    }
}

/// 404 `study_session_not_found`.
pub struct StudySessionProblems;

impl IntoResponses for StudySessionProblems {
    fn responses() -> Responses {
        responses([(404, problem(&of_code(ErrorCode::StudySessionNotFound)))])
    }
}

/// A JSON create with an optional `Idempotency-Key` that can also name an unknown language.
pub struct CreateStudySessionProblems;

impl IntoResponses for CreateStudySessionProblems {
    fn responses() -> Responses {
        let unprocessable = format!(
            "`validation_failed` (a field is missing, of the wrong type, unknown or out of \
             range, or an answer's `grade` contradicts its `correct`; see `errors`), {}, {}, \
             {}, {}, or `idempotency_key_reused` (the key was used with another body)",
            of_code(ErrorCode::UnknownLanguage),
            of_code(ErrorCode::AnswersMismatch),
            of_code(ErrorCode::UnknownPhrase),
            of_code(ErrorCode::InvalidStudiedAt),
        );
        responses([
            (
                400,
                problem(
                    "`malformed_json`: the body is not JSON; `invalid_idempotency_key`: the \
                     `Idempotency-Key` header is malformed or repeated",
                ),
            ),
            (
                409,
                problem(
                    "`idempotency_key_in_use`: a request with this `Idempotency-Key` is still \
                     running; retry later",
                ),
            ),
            (
                413,
                problem("`payload_too_large`: the body exceeds 128 KiB"),
            ),
            (
                415,
                problem("`unsupported_media_type`: the body is not `application/json`"),
            ),
            (422, problem(&unprocessable)),
        ])
    }
}

/// The analytics export: its query and cursor, and the scope it needs.
pub struct ExportProblems;

impl IntoResponses for ExportProblems {
    fn responses() -> Responses {
        let bad_request = format!(
            "`invalid_query`: `limit` or `updated_since` is malformed or out of range, or an \
             `offset` is given (this list pages by cursor only); {}, or is given with another \
             `updated_since` than its list's",
            of_code(ErrorCode::InvalidCursor)
        );
        let forbidden =
            problem("`insufficient_scope`: the token lacks the `lingo:analytics` scope").header(
                "WWW-Authenticate",
                string_header(
                    "`Bearer realm=\"lingo-news\", error=\"insufficient_scope\", \
                 scope=\"lingo:analytics\"`",
                ),
            );
        responses([(400, problem(&bad_request)), (403, forbidden)])
    }
}
