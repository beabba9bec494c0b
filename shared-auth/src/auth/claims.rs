//! The claims we read from a verified token, and the caller they describe.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::auth::error::AuthError;

/// Claims read after the signature checks. Fields are lenient here on purpose: presence and
/// format of `exp`, `sub`, `iss` and `aud` are checked by the validation step, which gives a
/// precise reason, rather than by a deserialisation error.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Claims {
    #[serde(default)]
    pub sub: String,
    #[serde(default)]
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's `sub`: the learner or reader id.
    pub sub: String,
    pub scopes: HashSet<String>,
    /// The token's `exp` (seconds since the epoch); caches must not keep the caller past it.
    pub expires_at: u64,
}

impl Caller {
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    /// 403 `insufficient_scope` unless the token carries `scope`.
    pub fn require_scope(&self, scope: &str) -> Result<(), AuthError> {
        if self.has_scope(scope) {
            Ok(())
        } else {
            Err(AuthError::InsufficientScope(scope.to_owned()))
        }
    }
}
