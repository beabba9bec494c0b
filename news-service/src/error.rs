//! The service's one error type and its error codes. Every failure leaves as a problem (the
//! contract's error format, see docs/); database failures are logged with their cause and
//! rendered without it. Each code news produces is declared once, in [`ErrorCode`], with its
//! status, default detail and the text the OpenAPI document shows for it.

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

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Self {
        Self::Problem(code.into())
    }
}

/// The error codes news-service itself produces (shared-auth produces the generic ones:
/// `invalid_query`, `validation_failed`, `invalid_token`, `database_unavailable`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// No article has this id.
    ArticleNotFound,
    /// No comment has this id.
    CommentNotFound,
    /// No journalist has this id.
    JournalistNotFound,
    /// No organisation has this id.
    OrganizationNotFound,
    /// The new comment's `article_id` names no article.
    UnknownArticle,
    /// The new comment's `parent_id` names no comment.
    UnknownParent,
    /// The parent comment belongs to another article.
    ParentArticleMismatch,
    /// The parent comment is already at the deepest level.
    MaxDepthExceeded,
    /// The cursor does not decode, or belongs to another list or other filters.
    InvalidCursor,
}

impl ErrorCode {
    /// The stable machine code of the contract.
    pub fn code(self) -> &'static str {
        match self {
            Self::ArticleNotFound => "article_not_found",
            Self::CommentNotFound => "comment_not_found",
            Self::JournalistNotFound => "journalist_not_found",
            Self::OrganizationNotFound => "organization_not_found",
            Self::UnknownArticle => "unknown_article",
            Self::UnknownParent => "unknown_parent",
            Self::ParentArticleMismatch => "parent_article_mismatch",
            Self::MaxDepthExceeded => "max_depth_exceeded",
            Self::InvalidCursor => "invalid_cursor",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Self::ArticleNotFound
            | Self::CommentNotFound
            | Self::JournalistNotFound
            | Self::OrganizationNotFound => StatusCode::NOT_FOUND,
            Self::UnknownArticle
            | Self::UnknownParent
            | Self::ParentArticleMismatch
            | Self::MaxDepthExceeded => StatusCode::UNPROCESSABLE_ENTITY,
            Self::InvalidCursor => StatusCode::BAD_REQUEST,
        }
    }

    /// The detail a problem of this code carries unless a more specific one is given.
    pub fn detail(self) -> &'static str {
        match self {
            Self::ArticleNotFound | Self::UnknownArticle => "no article has this id",
            Self::CommentNotFound | Self::UnknownParent => "no comment has this id",
            Self::JournalistNotFound => "no journalist has this id",
            Self::OrganizationNotFound => "no organisation has this id",
            Self::ParentArticleMismatch => "the parent comment belongs to another article",
            Self::MaxDepthExceeded => "replies may be nested at most 10 levels deep",
            Self::InvalidCursor => "the cursor does not decode",
        }
    }

    /// The request field a 422 of this code is about (its `errors` entry).
    pub fn field(self) -> Option<&'static str> {
        match self {
            Self::UnknownArticle => Some("article_id"),
            Self::UnknownParent | Self::ParentArticleMismatch | Self::MaxDepthExceeded => {
                Some("parent_id")
            }
            _ => None,
        }
    }

    /// The problem of this code with another detail than the default.
    pub fn with_detail(self, detail: impl Into<String>) -> Problem {
        match self.field() {
            Some(field) => Problem::unprocessable(self.code(), field, detail),
            None => Problem::new(self.status(), self.code()).with_detail(detail),
        }
    }

    /// "`code`: detail." as the OpenAPI response descriptions list it.
    pub fn describe(self) -> String {
        format!("`{}`: {}.", self.code(), self.detail())
    }
}

impl From<ErrorCode> for Problem {
    fn from(code: ErrorCode) -> Self {
        code.with_detail(code.detail())
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

/// Seconds a client should wait before retrying when the database is unreachable.
pub const RETRY_AFTER_SECS: u32 = 5;

fn database_problem(error: &sqlx::Error) -> Problem {
    shared_auth::db::database_problem(error, on_constraint, RETRY_AFTER_SECS)
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
            Some("parent_id no comment has this id")
        );
        assert_eq!(problem.errors[0].field, "parent_id");

        let problem = ErrorCode::InvalidCursor.with_detail("the cursor belongs to another list");
        assert_eq!(
            (problem.status, &*problem.code),
            (StatusCode::BAD_REQUEST, "invalid_cursor")
        );
    }
}
