//! The service's one error type: every failure becomes a problem. Database errors are mapped in
//! one place: constraint names to 4xx, an unreachable database to 503, the rest to a logged 500.

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

/// Seconds a client should wait before retrying when the database is unreachable.
const RETRY_AFTER_SECS: u32 = 2;

/// Constraint violations a request can legitimately cause (e.g. a language deleted by the
/// pipeline between our check and our insert).
fn on_constraint(name: &str) -> Option<Problem> {
    match name {
        "study_sessions_language_code_fkey" | "learner_language_totals_language_code_fkey" => {
            Some(Problem::unprocessable(
                "unknown_language",
                "language_code",
                "is not a known language",
            ))
        }
        _ => None,
    }
}

fn is_unavailable(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
    )
}

impl Error {
    pub fn to_problem(&self) -> Problem {
        match self {
            Self::Problem(problem) => problem.clone(),
            Self::Auth(error) => error.to_problem(),
            Self::Database(error) => {
                if let Some(problem) = error
                    .as_database_error()
                    .and_then(|db| db.constraint())
                    .and_then(on_constraint)
                {
                    return problem;
                }
                if is_unavailable(error) {
                    tracing::error!(%error, "database unavailable");
                    return Problem::unavailable("database_unavailable", RETRY_AFTER_SECS)
                        .with_detail("the database is not reachable; retry later");
                }
                tracing::error!(%error, "database error");
                Problem::internal()
            }
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
