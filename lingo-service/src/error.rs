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
pub const RETRY_AFTER_SECS: u32 = 2;

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

impl Error {
    pub fn to_problem(&self) -> Problem {
        match self {
            Self::Problem(problem) => problem.clone(),
            Self::Auth(error) => error.to_problem(),
            Self::Database(error) => {
                shared_auth::pg::pool::database_problem(error, on_constraint, RETRY_AFTER_SECS)
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
