//! Why a token or the key configuration was refused. A leaf of `auth`: the verifier and the
//! JWKS store both return these errors.

use axum::http::{HeaderValue, header};

use crate::http::codes::SharedCode;
use crate::http::problem::Problem;

const REALM: &str = "Bearer realm=\"lingo-news\"";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown algorithm {0:?} in AUTH_ALGORITHMS (use HS256, RS256, ES256, EdDSA)")]
    UnknownAlgorithm(String),
    #[error("AUTH_ALGORITHMS is empty")]
    NoAlgorithms,
    #[error("HS256 is allowed but AUTH_HS256_SECRET is not set")]
    MissingSecret,
    #[error("AUTH_HS256_SECRET must be at least 32 bytes")]
    WeakSecret,
    #[error(
        "an asymmetric algorithm is allowed but neither AUTH_JWKS_FILE nor AUTH_JWKS_URL is set"
    )]
    MissingJwks,
    #[error("set only one of AUTH_JWKS_FILE and AUTH_JWKS_URL")]
    TwoJwksSources,
    #[error("cannot load the JWKS: {0}")]
    Jwks(String),
}

/// Why a request was refused. Each variant renders the status, `code` and `WWW-Authenticate` of
/// the docs/authentication.md table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    MissingToken,
    #[error("the Authorization header is not `Bearer <token>`")]
    InvalidHeader,
    #[error("invalid token: {0}")]
    InvalidToken(&'static str),
    #[error("the token lacks the scope {0}")]
    InsufficientScope(String),
    /// No key set could be fetched yet (the JWKS URL was unreachable since start-up): the token
    /// cannot be judged, which is our outage, not the client's fault.
    #[error("the token keys could not be loaded yet; retry later")]
    KeysUnavailable,
}

/// `Retry-After` of a [`AuthError::KeysUnavailable`] answer.
const KEYS_RETRY_AFTER_SECS: u32 = 5;

impl AuthError {
    /// The contract code the refusal is answered with.
    pub fn code(&self) -> SharedCode {
        match self {
            Self::MissingToken => SharedCode::MissingToken,
            Self::InvalidHeader => SharedCode::InvalidAuthorizationHeader,
            Self::InvalidToken(_) => SharedCode::InvalidToken,
            Self::InsufficientScope(_) => SharedCode::InsufficientScope,
            Self::KeysUnavailable => SharedCode::ServiceUnavailable,
        }
    }

    pub fn www_authenticate(&self) -> String {
        match self {
            Self::MissingToken => REALM.to_owned(),
            Self::InvalidHeader => format!("{REALM}, error=\"invalid_request\""),
            Self::InvalidToken(why) => {
                format!("{REALM}, error=\"invalid_token\", error_description=\"{why}\"")
            }
            Self::InsufficientScope(scope) => {
                format!("{REALM}, error=\"insufficient_scope\", scope=\"{scope}\"")
            }
            Self::KeysUnavailable => REALM.to_owned(),
        }
    }

    pub fn to_problem(&self) -> Problem {
        if matches!(self, Self::KeysUnavailable) {
            return Problem::from_code(self.code())
                .with_detail(self.to_string())
                .with_retry_after(KEYS_RETRY_AFTER_SECS);
        }
        let challenge = HeaderValue::from_str(&self.www_authenticate())
            .unwrap_or_else(|_| HeaderValue::from_static(REALM));
        Problem::from_code(self.code())
            .with_detail(self.to_string())
            .with_header(header::WWW_AUTHENTICATE, challenge)
    }
}

impl From<AuthError> for Problem {
    fn from(error: AuthError) -> Self {
        error.to_problem()
    }
}

impl axum::response::IntoResponse for AuthError {
    fn into_response(self) -> axum::response::Response {
        self.to_problem().into_response()
    }
}
