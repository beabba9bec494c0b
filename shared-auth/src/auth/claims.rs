//! The caller a verified token describes (the token's claims are read in token.rs).

use std::collections::HashSet;

use crate::auth::error::AuthError;

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
