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

/// Declares the codes once: the doc comment of a variant is its OpenAPI text.
macro_rules! error_codes {
    ($(
        $(#[doc = $doc:literal])+
        $variant:ident = ($code:literal, $status:ident, $detail:literal),
    )+) => {
        /// The `code`s only news answers with (shared-auth produces the generic ones:
        /// `invalid_query`, `validation_failed`, `invalid_token`, `database_unavailable`, ...).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorCode {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl ErrorCode {
            pub const ALL: &[ErrorCode] = &[$(Self::$variant),+];

            /// The stable machine code of the contract.
            pub const fn code(self) -> &'static str {
                match self { $(Self::$variant => $code,)+ }
            }

            pub const fn status(self) -> StatusCode {
                match self { $(Self::$variant => StatusCode::$status,)+ }
            }

            /// The human-readable `detail` the problem carries (for a code about one request
            /// field, the message about that field).
            pub const fn detail(self) -> &'static str {
                match self { $(Self::$variant => $detail,)+ }
            }

            /// What the OpenAPI document says about the code (the variant's doc comment).
            pub fn description(self) -> &'static str {
                match self { $(Self::$variant => concat!($($doc),+).trim(),)+ }
            }
        }
    };
}

error_codes! {
    /// no article has this id
    ArticleNotFound = ("article_not_found", NOT_FOUND, "no article has this id"),
    /// no comment has this id
    CommentNotFound = ("comment_not_found", NOT_FOUND, "no comment has this id"),
    /// no journalist has this id
    JournalistNotFound = ("journalist_not_found", NOT_FOUND, "no journalist has this id"),
    /// no organisation has this id
    OrganizationNotFound = ("organization_not_found", NOT_FOUND, "no organisation has this id"),
    /// the new comment's `article_id` names no article
    UnknownArticle = ("unknown_article", UNPROCESSABLE_ENTITY, "no article has this id"),
    /// the new comment's `parent_id` names no comment
    UnknownParent = ("unknown_parent", UNPROCESSABLE_ENTITY, "no comment has this id"),
    /// the parent comment belongs to another article
    ParentArticleMismatch = ("parent_article_mismatch", UNPROCESSABLE_ENTITY, "the parent comment belongs to another article"),
    /// the parent comment is already at the deepest level
    MaxDepthExceeded = ("max_depth_exceeded", UNPROCESSABLE_ENTITY, "replies may be nested at most 10 levels deep"),
    /// the cursor does not decode, or belongs to another list or other filters
    InvalidCursor = ("invalid_cursor", BAD_REQUEST, "the cursor does not decode"),
}

impl ErrorCode {
    /// The request field a code is about; the problem then lists it in `errors`, like every
    /// 422 of the contract.
    pub const fn field(self) -> Option<&'static str> {
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
