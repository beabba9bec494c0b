//! The service's one error type. Every failure leaves as a problem (API.md section 1); database
//! failures are logged with their cause and rendered without it.

use axum::http::StatusCode;
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

impl Error {
    pub fn problem(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self::Problem(Problem::new(status, code).with_detail(detail))
    }
}

/// Constraint names the schema can raise in a race, mapped to the problems they mean.
fn on_constraint(name: &str) -> Option<Problem> {
    match name {
        "comments_article_id_fkey" => Some(Problem::unprocessable(
            "unknown_article",
            "article_id",
            "no article has this id",
        )),
        "comments_parent_id_fkey" => Some(Problem::unprocessable(
            "unknown_parent",
            "parent_id",
            "no comment has this id",
        )),
        "likes_article_id_fkey" | "bookmarks_article_id_fkey" => {
            Some(Problem::not_found("article_not_found"))
        }
        "journalist_follows_journalist_id_fkey" => Some(Problem::not_found("journalist_not_found")),
        "organization_follows_organization_id_fkey" => {
            Some(Problem::not_found("organization_not_found"))
        }
        _ => None,
    }
}

/// Seconds a client should wait before retrying when the database is unreachable.
pub const RETRY_AFTER_SECS: u32 = 5;

fn database_problem(error: &sqlx::Error) -> Problem {
    shared_auth::pg::pool::database_problem(error, on_constraint, RETRY_AFTER_SECS)
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

#[cfg(test)]
mod tests {
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
}
