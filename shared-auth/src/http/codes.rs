//! Typed error codes: each `code` of the contract is declared once, with its status, default
//! detail and documentation, so a handler names a variant instead of spelling a string.
//!
//! A crate declares its codes with [`error_codes!`](crate::error_codes) and turns one into a
//! problem with `Problem::from_code(code)` or `code.into()`. This module is a leaf: the problem
//! type depends on it, never the reverse.

use axum::http::StatusCode;

/// What [`error_codes!`](crate::error_codes) expands to in other crates.
#[doc(hidden)]
pub mod __private {
    pub use axum::http::StatusCode;
}

/// A machine code of the contract with everything the answer and its documentation need.
pub trait ErrorCode: Copy {
    /// The stable snake_case `code` of the problem body.
    fn code(self) -> &'static str;
    /// The status the code is answered with.
    fn status(self) -> StatusCode;
    /// The `detail` used when the site that refuses has nothing more precise to say.
    fn detail(self) -> &'static str;
    /// What the code means, for the API documentation.
    fn description(self) -> &'static str;
    /// The problem `title`: the status text.
    /// The request field the code is about, if any: its problem then names the field in
    /// `errors`, like every 422 about a body.
    fn field(self) -> Option<&'static str> {
        None
    }
    fn title(self) -> &'static str {
        title(self.status())
    }
}

/// RFC 9110 names the statuses; the `http` crate still uses some older names.
pub fn title(status: StatusCode) -> &'static str {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => "Content Too Large",
        StatusCode::UNPROCESSABLE_ENTITY => "Unprocessable Content",
        other => other.canonical_reason().unwrap_or("Error"),
    }
}

/// Declares an enum of error codes and implements [`ErrorCode`] for it (the problem type turns
/// any `ErrorCode` into a problem).
///
/// Each variant's doc comment is its documentation text; the tuple is the status (a
/// `StatusCode` constant name), the code and the default detail:
///
/// ```
/// shared_auth::error_codes! {
///     /// Codes of the example service.
///     pub enum ExampleCode {
///         /// No article has this id.
///         ArticleNotFound = (NOT_FOUND, "article_not_found", "no article has this id"),
///     }
/// }
/// use shared_auth::http::codes::ErrorCode;
/// assert_eq!(ExampleCode::ArticleNotFound.code(), "article_not_found");
/// assert_eq!(ExampleCode::ALL.len(), 1);
/// ```
#[macro_export]
macro_rules! error_codes {
    (@field) => { None };
    (@field $field:literal) => { Some($field) };
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $variant:ident = ($status:ident, $code:literal, $detail:literal $(, field = $field:literal)?)
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl $name {
            /// Every code of the enum, for documentation and uniqueness checks.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
        }

        impl $crate::http::codes::ErrorCode for $name {
            fn code(self) -> &'static str {
                match self { $($name::$variant => $code,)* }
            }
            fn status(self) -> $crate::http::codes::__private::StatusCode {
                match self {
                    $($name::$variant => $crate::http::codes::__private::StatusCode::$status,)*
                }
            }
            fn detail(self) -> &'static str {
                match self { $($name::$variant => $detail,)* }
            }
            fn description(self) -> &'static str {
                match self { $($name::$variant => concat!($($doc),*).trim_ascii(),)* }
            }
            fn field(self) -> Option<&'static str> {
                match self { $($name::$variant => $crate::error_codes!(@field $($field)?),)* }
            }
        }
    };
}

error_codes! {
    /// The codes shared-auth itself answers with: authentication, the strict extractors, bare
    /// statuses from layers, the database and `Idempotency-Key` handling.
    pub enum SharedCode {
        /// The request has no `Authorization` header and the endpoint needs a caller.
        MissingToken = (UNAUTHORIZED, "missing_token", "missing bearer token"),
        /// The `Authorization` header is not exactly one `Bearer <token>`.
        InvalidAuthorizationHeader = (UNAUTHORIZED, "invalid_authorization_header",
            "the Authorization header is not `Bearer <token>`"),
        /// The token failed verification (signature, expiry, issuer, audience, claims).
        InvalidToken = (UNAUTHORIZED, "invalid_token", "invalid token"),
        /// The token is valid but lacks the scope the endpoint needs.
        InsufficientScope = (FORBIDDEN, "insufficient_scope", "the token lacks a required scope"),
        /// A query parameter is malformed or out of range.
        InvalidQuery = (BAD_REQUEST, "invalid_query", "a query parameter is invalid"),
        /// The request body is empty or not valid JSON.
        MalformedJson = (BAD_REQUEST, "malformed_json", "the request body is not valid JSON"),
        /// The request could not be read (a rejection without a more precise code).
        BadRequest = (BAD_REQUEST, "bad_request", "the request could not be read"),
        /// The JSON body is well-formed but a field is missing, unknown or invalid.
        ValidationFailed = (UNPROCESSABLE_ENTITY, "validation_failed",
            "the request body is not valid"),
        /// The status 401 produced outside the authentication extractors.
        Unauthorized = (UNAUTHORIZED, "unauthorized", "authentication is required"),
        /// The status 403 produced outside the authentication extractors.
        Forbidden = (FORBIDDEN, "forbidden", "the caller may not do this"),
        /// No route matches the path.
        NotFound = (NOT_FOUND, "not_found", "no such resource"),
        /// The route exists but not with this method (see `Allow`).
        MethodNotAllowed = (METHOD_NOT_ALLOWED, "method_not_allowed",
            "the method is not allowed on this resource"),
        /// No representation matches the `Accept` header.
        NotAcceptable = (NOT_ACCEPTABLE, "not_acceptable", "no acceptable representation"),
        /// The request took too long to arrive or be handled.
        RequestTimeout = (REQUEST_TIMEOUT, "request_timeout", "the request timed out"),
        /// The status 409 produced without a more precise code.
        Conflict = (CONFLICT, "conflict", "the request conflicts with the current state"),
        /// The body is larger than the service accepts.
        PayloadTooLarge = (PAYLOAD_TOO_LARGE, "payload_too_large",
            "the request body is too large"),
        /// The body is not `application/json`.
        UnsupportedMediaType = (UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
            "expected Content-Type: application/json"),
        /// The caller's request budget is spent (see `Retry-After`).
        RateLimited = (TOO_MANY_REQUESTS, "rate_limited", "too many requests"),
        /// No upstream replica answered (gateway).
        UpstreamUnavailable = (BAD_GATEWAY, "upstream_unavailable",
            "the upstream service is unavailable"),
        /// A dependency other than the database is down (see `Retry-After`).
        ServiceUnavailable = (SERVICE_UNAVAILABLE, "service_unavailable",
            "the service is unavailable; retry later"),
        /// The upstream did not answer in time (gateway).
        UpstreamTimeout = (GATEWAY_TIMEOUT, "upstream_timeout",
            "the upstream service did not answer in time"),
        /// The request did not finish within the service's deadline; its work was abandoned
        /// (see `Retry-After`).
        Timeout = (SERVICE_UNAVAILABLE, "timeout",
            "the request did not finish within its deadline; retry later"),
        /// The service is at capacity: its in-flight limit is full, or no database connection
        /// came free in time (see `Retry-After`).
        Overloaded = (SERVICE_UNAVAILABLE, "overloaded",
            "the service is at capacity; retry later"),
        /// The database cannot be reached now (see `Retry-After`).
        DatabaseUnavailable = (SERVICE_UNAVAILABLE, "database_unavailable",
            "the database is not reachable; retry later"),
        /// A failure of the server; its cause is logged, never shown.
        InternalError = (INTERNAL_SERVER_ERROR, "internal_error",
            "the server failed to handle this request"),
        /// A status no other code covers; the status line says which.
        Unclassified = (INTERNAL_SERVER_ERROR, "error", "the request failed"),
        /// The `Idempotency-Key` header is repeated or not 1 to 255 visible ASCII characters.
        InvalidIdempotencyKey = (BAD_REQUEST, "invalid_idempotency_key",
            "Idempotency-Key must be 1 to 255 visible ASCII characters"),
        /// Another request with this `Idempotency-Key` is still being processed.
        IdempotencyKeyInUse = (CONFLICT, "idempotency_key_in_use",
            "a request with this Idempotency-Key is still being processed; retry later"),
        /// The `Idempotency-Key` was already used with a different request body.
        IdempotencyKeyReused = (UNPROCESSABLE_ENTITY, "idempotency_key_reused",
            "was already used with a different request body", field = "Idempotency-Key"),
    }
}

impl SharedCode {
    /// The code of a bare status produced outside our handlers (axum's rejections, tower
    /// layers): it follows the status.
    pub fn for_status(status: StatusCode) -> Self {
        match status {
            StatusCode::BAD_REQUEST => Self::BadRequest,
            StatusCode::UNAUTHORIZED => Self::Unauthorized,
            StatusCode::FORBIDDEN => Self::Forbidden,
            StatusCode::NOT_FOUND => Self::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => Self::MethodNotAllowed,
            StatusCode::NOT_ACCEPTABLE => Self::NotAcceptable,
            StatusCode::REQUEST_TIMEOUT => Self::RequestTimeout,
            StatusCode::CONFLICT => Self::Conflict,
            StatusCode::PAYLOAD_TOO_LARGE => Self::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => Self::ValidationFailed,
            StatusCode::TOO_MANY_REQUESTS => Self::RateLimited,
            StatusCode::BAD_GATEWAY => Self::UpstreamUnavailable,
            StatusCode::SERVICE_UNAVAILABLE => Self::ServiceUnavailable,
            StatusCode::GATEWAY_TIMEOUT => Self::UpstreamTimeout,
            s if s.is_server_error() => Self::InternalError,
            _ => Self::Unclassified,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_is_declared_once_and_documented() {
        let codes: HashSet<&str> = SharedCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(codes.len(), SharedCode::ALL.len());
        for code in SharedCode::ALL {
            assert!(!code.description().is_empty(), "{code:?}");
            assert!(!code.detail().is_empty(), "{code:?}");
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }

    #[test]
    fn titles_use_rfc_9110_names() {
        assert_eq!(SharedCode::PayloadTooLarge.title(), "Content Too Large");
        assert_eq!(
            SharedCode::ValidationFailed.title(),
            "Unprocessable Content"
        );
        assert_eq!(SharedCode::NotFound.title(), "Not Found");
    }
}
