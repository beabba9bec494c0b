//! Token checks at the edge: the bearer token of a request is verified with shared-auth (through a
//! bounded cache of recently verified tokens), and the route's [`Access`] decides whether an
//! anonymous or unscoped caller may pass.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use shared_auth::{AuthError, Caller, Verifier, bearer_token};

use crate::metrics::Metrics;
use crate::routes::Access;

/// A cached caller is re-verified at least this often, so a key removed from the JWKS stops
/// working within this time even for tokens that live longer.
const MAX_CACHE_SECS: u64 = 300;

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A verified caller and the second from which it must not be served any more.
#[derive(Clone)]
struct Cached {
    caller: Arc<Caller>,
    valid_until: u64,
}

/// Recently verified tokens, keyed by the SHA-256 of the token (the token itself is never kept).
/// A concurrent cache (sharded, no global lock) bounded by `capacity`; an entry is never served at
/// or after its token's `exp` (nor after [`MAX_CACHE_SECS`]). Only successes are stored.
pub struct TokenCache {
    entries: Option<quick_cache::sync::Cache<[u8; 32], Cached>>,
}

impl TokenCache {
    /// A cache of `capacity` tokens; 0 turns it off.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: (capacity > 0).then(|| quick_cache::sync::Cache::new(capacity)),
        }
    }

    fn key(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    pub fn get(&self, token: &str, now: u64) -> Option<Arc<Caller>> {
        let entries = self.entries.as_ref()?;
        let key = Self::key(token);
        let cached = entries.get(&key)?;
        if cached.valid_until > now {
            return Some(cached.caller);
        }
        entries.remove_if(&key, |entry| entry.valid_until <= now);
        None
    }

    pub fn insert(&self, token: &str, caller: &Arc<Caller>, now: u64) {
        let Some(entries) = &self.entries else {
            return;
        };
        let valid_until = caller.expires_at.min(now + MAX_CACHE_SECS);
        if valid_until <= now {
            return;
        }
        let cached = Cached {
            caller: caller.clone(),
            valid_until,
        };
        entries.insert(Self::key(token), cached);
    }

    pub fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, |entries| entries.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Verifies tokens for the edge, remembering the good ones.
pub struct EdgeAuth {
    verifier: Arc<Verifier>,
    cache: TokenCache,
    metrics: Arc<Metrics>,
}

impl EdgeAuth {
    pub fn new(verifier: Arc<Verifier>, cache_capacity: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            verifier,
            cache: TokenCache::new(cache_capacity),
            metrics,
        }
    }

    /// Whether tokens can be verified yet (the JWKS may still be unreachable at start-up).
    pub fn keys_loaded(&self) -> bool {
        self.verifier.keys_loaded()
    }

    /// The number of verification keys loaded ([`Verifier::key_count`]).
    pub fn key_count(&self) -> usize {
        self.verifier.key_count()
    }

    /// The caller named by the request's token: `Ok(None)` without an `Authorization` header,
    /// an error for a malformed header or an invalid token (on every route: fail closed).
    pub async fn caller(&self, headers: &HeaderMap) -> Result<Option<Arc<Caller>>, AuthError> {
        let Some(token) = bearer_token(headers)? else {
            return Ok(None);
        };
        let now = now_secs();
        if let Some(caller) = self.cache.get(token, now) {
            self.metrics.token_cache_hit();
            return Ok(Some(caller));
        }
        self.metrics.token_cache_miss();
        let caller = Arc::new(self.verifier.verify(token).await?);
        self.cache.insert(token, &caller, now);
        Ok(Some(caller))
    }
}

/// Whether `caller` may use an endpoint with `access`. A scoped endpoint needs every scope it
/// lists; the refusal names them all (RFC 6750's `scope` is a space-separated list).
pub fn authorize(access: &Access, caller: Option<&Caller>) -> Result<(), AuthError> {
    match (access, caller) {
        (Access::Optional, _) => Ok(()),
        (Access::Required | Access::Scoped(_), None) => Err(AuthError::MissingToken),
        (Access::Required, Some(_)) => Ok(()),
        (Access::Scoped(scopes), Some(caller)) => {
            if scopes.split(' ').all(|scope| caller.has_scope(scope)) {
                Ok(())
            } else {
                Err(AuthError::InsufficientScope(scopes.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn caller(expires_at: u64) -> Arc<Caller> {
        Arc::new(Caller {
            sub: "ada".into(),
            scopes: HashSet::new(),
            expires_at,
        })
    }

    #[test]
    fn entries_never_outlive_the_token() {
        let cache = TokenCache::new(10);
        cache.insert("t", &caller(1_000), 900);
        assert!(cache.get("t", 999).is_some());
        assert!(cache.get("t", 1_000).is_none());
        assert!(cache.get("t", 5_000).is_none());
        assert!(cache.is_empty(), "an expired entry is dropped when seen");
        cache.insert("old", &caller(1_000), 1_000);
        assert!(cache.is_empty(), "an already expired token is not stored");
    }

    #[test]
    fn long_lived_tokens_are_reverified_after_the_cap() {
        let cache = TokenCache::new(10);
        cache.insert("t", &caller(1_000_000), 0);
        assert!(cache.get("t", MAX_CACHE_SECS - 1).is_some());
        assert!(cache.get("t", MAX_CACHE_SECS).is_none());
    }

    #[test]
    fn the_cache_stays_within_capacity() {
        let cache = TokenCache::new(3);
        for i in 0..10 {
            cache.insert(&format!("token-{i}"), &caller(10_000), 0);
            assert!(cache.len() <= 3);
        }
        assert!(!cache.is_empty());
        let off = TokenCache::new(0);
        off.insert("t", &caller(10_000), 0);
        assert!(off.get("t", 1).is_none());
    }

    #[test]
    fn access_rules() {
        let c = (*caller(10)).clone();
        assert!(authorize(&Access::Optional, None).is_ok());
        assert_eq!(
            authorize(&Access::Required, None),
            Err(AuthError::MissingToken)
        );
        assert!(authorize(&Access::Required, Some(&c)).is_ok());
        let analytics = Access::scoped(["lingo:analytics"]);
        assert_eq!(
            authorize(&analytics, Some(&c)),
            Err(AuthError::InsufficientScope("lingo:analytics".into()))
        );
        let mut scoped = c.clone();
        scoped.scopes.insert("lingo:analytics".into());
        assert!(authorize(&analytics, Some(&scoped)).is_ok());
        let both = Access::scoped(["lingo:analytics", "lingo:admin"]);
        assert_eq!(
            authorize(&both, Some(&scoped)),
            Err(AuthError::InsufficientScope(
                "lingo:admin lingo:analytics".into()
            ))
        );
    }
}
