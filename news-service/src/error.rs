//! The service's one error type and its error codes. Every failure leaves as a problem (the
//! contract's error format, see docs/); database failures are logged with their cause and
//! rendered without it. Each code news produces is declared once, in [`ErrorCode`], with its
//! status, default detail and the text the OpenAPI document shows for it.

use axum::response::{IntoResponse, Response};
use shared_auth::{AuthError, Problem};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A refusal already written as a contract problem.
    #[error(transparent)]
    Problem(#[from] Problem),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

shared_auth::error_codes! {
    /// The `code`s only news answers with (shared-auth produces the generic ones:
    /// `invalid_query`, `validation_failed`, `invalid_token`, `database_unavailable`, ...); the
    /// doc comment of a variant is its OpenAPI text.
    pub enum ErrorCode {
        /// no article has this id
        ArticleNotFound = (NOT_FOUND, "article_not_found", "no article has this id"),
        /// no comment has this id
        CommentNotFound = (NOT_FOUND, "comment_not_found", "no comment has this id"),
        /// no journalist has this id
        JournalistNotFound = (NOT_FOUND, "journalist_not_found", "no journalist has this id"),
        /// no organisation has this id
        OrganizationNotFound = (NOT_FOUND, "organization_not_found", "no organisation has this id"),
        /// the new comment's `article_id` names no article
        UnknownArticle = (UNPROCESSABLE_ENTITY, "unknown_article", "names no article", field = "article_id"),
        /// the new comment's `parent_id` names no comment
        UnknownParent = (UNPROCESSABLE_ENTITY, "unknown_parent", "names no comment", field = "parent_id"),
        /// the parent comment belongs to another article
        ParentArticleMismatch = (UNPROCESSABLE_ENTITY, "parent_article_mismatch", "names a comment of another article", field = "parent_id"),
        /// the parent comment is already at the deepest level
        MaxDepthExceeded = (UNPROCESSABLE_ENTITY, "max_depth_exceeded", "names a reply at the deepest level (replies nest at most 10 levels deep)", field = "parent_id"),
        /// the cursor does not decode, or belongs to another list or other filters
        InvalidCursor = (BAD_REQUEST, "invalid_cursor", "the cursor does not decode"),
    }
}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Self {
        Self::Problem(code.into())
    }
}

/// Constraint names the schema can raise in a race, mapped to the problems they mean. The
/// statements that can hit each one name it beside them (see `store/`).
pub fn on_constraint(name: &str) -> Option<Problem> {
    let code = match name {
        "comments_article_id_fkey" => ErrorCode::UnknownArticle,
        "comments_parent_id_fkey" => ErrorCode::UnknownParent,
        "likes_article_id_fkey" | "bookmarks_article_id_fkey" => ErrorCode::ArticleNotFound,
        "journalist_follows_journalist_id_fkey" => ErrorCode::JournalistNotFound,
        "organization_follows_organization_id_fkey" => ErrorCode::OrganizationNotFound,
        _ => return None,
    };
    Some(code.into())
}

fn database_problem(error: &sqlx::Error) -> Problem {
    shared_auth::pg::pool::database_problem(
        error,
        on_constraint,
        shared_auth::pg::pool::DATABASE_RETRY_AFTER_SECS,
    )
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        match self {
            Self::Problem(problem) => problem.into_response(),
            Self::Auth(error) => error.into_response(),
            Self::Database(error) => database_problem(&error).into_response(),
        }
    }
}

/// A comment's transaction that PostgreSQL rolled back to break a deadlock is run again
/// ([`shared_auth::pg::idempotency::idempotent_create`]).
impl shared_auth::pg::idempotency::TransactionConflict for Error {
    fn is_transaction_conflict(&self) -> bool {
        matches!(self, Self::Database(error) if shared_auth::pg::pool::is_transaction_conflict(error))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use shared_auth::ErrorCode as _;

    use super::*;

    #[test]
    fn pool_exhaustion_is_unavailable_not_internal() {
        let problem = database_problem(&sqlx::Error::PoolTimedOut);
        assert_eq!(problem.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(problem.code, "database_unavailable");
        assert_eq!(
            database_problem(&sqlx::Error::RowNotFound).code,
            "internal_error"
        );
    }

    #[test]
    fn race_constraints_map_to_contract_codes() {
        let cases = [
            ("comments_article_id_fkey", "unknown_article"),
            ("comments_parent_id_fkey", "unknown_parent"),
            ("likes_article_id_fkey", "article_not_found"),
            (
                "journalist_follows_journalist_id_fkey",
                "journalist_not_found",
            ),
            (
                "organization_follows_organization_id_fkey",
                "organization_not_found",
            ),
        ];
        for (constraint, code) in cases {
            assert_eq!(
                on_constraint(constraint).map(|p| p.code),
                Some(code.into()),
                "{constraint}"
            );
        }
        assert!(on_constraint("something_else").is_none());
    }

    #[test]
    fn codes_are_unique_snake_case_and_described() {
        let mut codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
        assert!(
            codes
                .iter()
                .all(|c| c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
        assert!(ErrorCode::ALL.iter().all(|c| !c.description().is_empty()));
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn codes_render_as_the_contract_writes_them() {
        let problem = Problem::from(ErrorCode::ArticleNotFound);
        assert_eq!(problem.status, StatusCode::NOT_FOUND);
        assert_eq!(problem.code, "article_not_found");
        assert_eq!(problem.detail.as_deref(), Some("no article has this id"));
        assert!(problem.errors.is_empty());

        let problem = Problem::from(ErrorCode::UnknownParent);
        assert_eq!(problem.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            problem.detail.as_deref(),
            Some("parent_id names no comment")
        );
        assert_eq!(problem.errors[0].field, "parent_id");

        let problem = Problem::from(ErrorCode::InvalidCursor);
        assert_eq!(
            (problem.status, &*problem.code),
            (StatusCode::BAD_REQUEST, "invalid_cursor")
        );
    }
}
