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

/// Whether the error means the database cannot be reached now (503, retry), not a bug (500).
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => true,
        sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P0x: shutting down / cannot connect now;
            // 53300: too many connections.
            code.starts_with("08") || code.starts_with("57P0") || code == "53300"
        }),
        _ => false,
    }
}

fn database_problem(error: &sqlx::Error) -> Problem {
    if let Some(problem) = error
        .as_database_error()
        .and_then(|db| db.constraint())
        .and_then(on_constraint)
    {
        return problem;
    }
    if is_unavailable(error) {
        tracing::warn!(%error, "database unavailable");
        return Problem::unavailable("database_unavailable", 5)
            .with_detail("the database is not reachable; retry shortly");
    }
    tracing::error!(%error, "database error");
    Problem::internal()
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
        assert!(is_unavailable(&sqlx::Error::PoolTimedOut));
        assert!(!is_unavailable(&sqlx::Error::RowNotFound));
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
