//! The service's one error type and its error codes: every failure becomes a problem.
//!
//! [`ErrorCode`] declares each lingo-specific `code` once (status, default detail, the text the
//! OpenAPI document shows); the codes every service shares come from shared-auth. Database
//! errors become a problem here too: a constraint a request can legitimately violate is mapped to
//! its problem in one place, [`on_constraint`] (the statement that can hit it names it beside it in
//! `store/`), an unreachable database is a 503, anything else a 500 logged with its cause and
//! rendered without it.

use axum::response::{IntoResponse, Response};
use shared_auth::{AuthError, Problem};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Problem(#[from] Problem),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

shared_auth::error_codes! {
    /// The `code`s only lingo answers with; the doc comment of a variant is its OpenAPI text.
    pub enum ErrorCode {
        /// no phrase with this id
        PhraseNotFound = (NOT_FOUND, "phrase_not_found", "no phrase with this id"),
        /// no session with this id, or it is another learner's
        StudySessionNotFound = (NOT_FOUND, "study_session_not_found", "no study session with this id"),
        /// `language_code` is not a `code` of `GET /v1/lingo/languages`
        UnknownLanguage = (UNPROCESSABLE_ENTITY, "unknown_language", "is not a language of GET /v1/lingo/languages", field = "language_code"),
        /// with `answers`, `phrases_seen` is not their number or `phrases_correct` not the number of correct ones (`errors` names each)
        AnswersMismatch = (UNPROCESSABLE_ENTITY, "answers_mismatch", "phrases_seen and phrases_correct must be the counts of answers"),
        /// an `answers[].phrase_id` is not a phrase of the session's `language_code` (`errors` names every such answer, like `answers[3].phrase_id`)
        UnknownPhrase = (UNPROCESSABLE_ENTITY, "unknown_phrase", "is not a phrase of the session's language"),
        /// `studied_at` is not RFC 3339, more than 30 days in the past or more than 60 s in the future
        InvalidStudiedAt = (UNPROCESSABLE_ENTITY, "invalid_studied_at", "must lie within the last 30 days and at most 60 s ahead", field = "studied_at"),
        /// `cursor` does not decode as a cursor of this endpoint
        InvalidCursor = (BAD_REQUEST, "invalid_cursor", "cursor does not decode as a cursor of this endpoint"),
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Self {
        Self::Problem(code.into())
    }
}

/// Constraint names a statement can violate in a race the client caused, mapped to the problems
/// they mean; the statement that can hit each one names it beside it (see `store/`).
pub fn on_constraint(name: &str) -> Option<Problem> {
    let code = match name {
        // A language the pipeline deleted between the request's check and the session's insert.
        "study_sessions_language_code_fkey" => ErrorCode::UnknownLanguage,
        _ => return None,
    };
    Some(code.into())
}

/// A session's transaction that PostgreSQL rolled back to break a deadlock is run
/// again ([`shared_auth::pg::idempotency::idempotent_create`]).
impl shared_auth::pg::idempotency::TransactionConflict for Error {
    fn is_transaction_conflict(&self) -> bool {
        matches!(self, Self::Database(error) if shared_auth::pg::pool::is_transaction_conflict(error))
    }
}

impl Error {
    pub fn to_problem(&self) -> Problem {
        match self {
            Self::Problem(problem) => problem.clone(),
            Self::Auth(error) => error.to_problem(),
            Self::Database(error) => shared_auth::pg::pool::database_problem(
                error,
                on_constraint,
                shared_auth::pg::pool::DATABASE_RETRY_AFTER_SECS,
            ),
            Self::Internal(error) => {
                tracing::error!(error = format!("{error:#}"), "internal error");
                Problem::internal()
            }
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        self.to_problem().into_response()
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use shared_auth::ErrorCode as _;

    use super::*;

    #[test]
    fn codes_are_unique_snake_case_and_documented() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.code()), "{code:?} declared twice");
            assert!(
                code.code()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{code:?}"
            );
            assert!(code.status().is_client_error(), "{code:?}");
            assert!(!code.description().is_empty() && !code.detail().is_empty());
        }
    }

    #[test]
    fn race_constraints_map_to_contract_codes() {
        let problem = on_constraint("study_sessions_language_code_fkey").expect("mapped");
        assert_eq!(problem.code, "unknown_language");
        assert_eq!(problem.errors[0].field, "language_code");
        assert!(on_constraint("something_else").is_none());
    }

    #[test]
    fn a_field_code_lists_its_field_like_every_422() {
        let problem = Problem::from(ErrorCode::UnknownLanguage);
        assert_eq!(problem.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            problem.detail.as_deref(),
            Some("language_code is not a language of GET /v1/lingo/languages")
        );
        assert_eq!(problem.errors[0].field, "language_code");

        let problem = Problem::from(ErrorCode::PhraseNotFound);
        assert_eq!(problem.code, "phrase_not_found");
        assert_eq!(problem.detail.as_deref(), Some("no phrase with this id"));
        assert!(problem.errors.is_empty());
    }
}
