//! A JWKS key store: loaded from a file or an HTTP(S) URL, refreshed in the background and when a
//! token names an unknown `kid` (at most once per minimum interval). A failed refresh keeps the last
//! good key set.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use tokio::sync::Mutex;

use crate::auth::error::{AuthError, ConfigError};
use crate::auth::keys::VerifyingKey;

/// How often the background refresher tries while no key set was ever loaded.
const UNLOADED_RETRY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub enum JwksSource {
    File(PathBuf),
    Url(String),
}

/// One usable public key, parsed when the set is loaded.
struct Key {
    kid: Option<String>,
    alg: Algorithm,
    verifying: Arc<VerifyingKey>,
}

pub struct JwksStore {
    source: JwksSource,
    min_refresh: Duration,
    client: reqwest::Client,
    keys: RwLock<Arc<Vec<Key>>>,
    /// Whether a key set was ever fetched: a URL may be unreachable at start-up.
    loaded: AtomicBool,
    /// Held while fetching, and remembers when the last fetch started.
    last_fetch: Mutex<Option<Instant>>,
}

impl JwksStore {
    pub fn new(source: JwksSource, min_refresh: Duration) -> Arc<Self> {
        let client = crate::http::outbound::client_builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            source,
            min_refresh,
            client,
            keys: RwLock::new(Arc::new(Vec::new())),
            loaded: AtomicBool::new(false),
            last_fetch: Mutex::new(None),
        })
    }

    /// First load at start-up: a file must be readable; a URL may be down for now.
    pub async fn load_initial(&self) -> Result<(), ConfigError> {
        let mut last = self.last_fetch.lock().await;
        *last = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                self.install(keys);
                Ok(())
            }
            Err(error) => match &self.source {
                JwksSource::File(_) => Err(ConfigError::Jwks(error)),
                JwksSource::Url(url) => {
                    tracing::warn!(%url, %error, "JWKS not reachable at start-up; will retry");
                    Ok(())
                }
            },
        }
    }

    /// Whether a key set has been loaded yet (the last good one is kept through failed refreshes).
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }

    /// The number of usable keys in the set held now (0 until one was loaded).
    pub fn key_count(&self) -> usize {
        self.keys.read().map_or(0, |keys| keys.len())
    }

    /// Fetches the set again every `every`, and every 2 s until a first set is in.
    pub fn spawn_refresher(self: Arc<Self>, every: Duration) {
        tokio::spawn(async move {
            loop {
                let pause = if self.is_loaded() {
                    every
                } else {
                    every.min(UNLOADED_RETRY)
                };
                tokio::time::sleep(pause).await;
                self.refresh(false).await;
            }
        });
    }

    /// The key for a token's `alg` and `kid`. An unknown `kid` triggers one rate-limited refresh.
    pub async fn key_for(
        &self,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<Arc<VerifyingKey>, AuthError> {
        if let Some(key) = self.lookup(alg, kid)? {
            return Ok(key);
        }
        if !self.is_loaded() {
            // The background refresher is retrying; a request never waits on a key set that
            // may not answer at all.
            return Err(AuthError::KeysUnavailable);
        }
        // Boxed: the refresh (an HTTP fetch) is rare, and inline its future would make every
        // verification's future, and every request future holding one, larger.
        if kid.is_some()
            && Box::pin(self.refresh(true)).await
            && let Some(key) = self.lookup(alg, kid)?
        {
            return Ok(key);
        }
        Err(AuthError::InvalidToken("unknown kid"))
    }

    fn lookup(
        &self,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<Option<Arc<VerifyingKey>>, AuthError> {
        let keys = self.keys.read().map(|k| k.clone()).unwrap_or_default();
        let mut candidates = keys.iter().filter(|key| match kid {
            Some(kid) => key.kid.as_deref() == Some(kid),
            // Without a `kid` the key must be unambiguous for this algorithm.
            None => key.alg == alg,
        });
        match (candidates.next(), candidates.next()) {
            (None, _) => Ok(None),
            (Some(key), None) if key.alg == alg => Ok(Some(key.verifying.clone())),
            (Some(_), None) => Err(AuthError::InvalidToken("key type does not match alg")),
            (Some(_), Some(_)) => Err(AuthError::InvalidToken("ambiguous key")),
        }
    }

    /// Fetches the key set again unless one fetch started within the minimum interval (or,
    /// for the background refresher, is running). Returns whether a new set was installed.
    async fn refresh(&self, on_demand: bool) -> bool {
        let mut last = self.last_fetch.lock().await;
        if on_demand && last.is_some_and(|at| at.elapsed() < self.min_refresh) {
            return false;
        }
        *last = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                self.install(keys);
                true
            }
            Err(error) => {
                tracing::warn!(%error, "JWKS refresh failed; keeping the last good key set");
                false
            }
        }
    }

    fn install(&self, keys: Vec<Key>) {
        tracing::info!(keys = keys.len(), "JWKS loaded");
        if let Ok(mut slot) = self.keys.write() {
            *slot = Arc::new(keys);
        }
        self.loaded.store(true, Ordering::Relaxed);
    }

    async fn fetch(&self) -> Result<Vec<Key>, String> {
        let text = match &self.source {
            JwksSource::File(path) => tokio::fs::read_to_string(path)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?,
            JwksSource::Url(url) => {
                let response = self
                    .client
                    .get(url)
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .map_err(|e| e.to_string())?;
                response.text().await.map_err(|e| e.to_string())?
            }
        };
        parse_jwks(&text)
    }
}

/// A JWKS document as its keys' JSON objects, each read on its own (see [`parse_jwks`]).
#[derive(serde::Deserialize)]
struct RawKeySet {
    keys: Vec<serde_json::Value>,
}

/// Parses a JWKS document into the keys we can use; keys of other types (`oct` above all: a
/// shared secret never comes from a JWKS) are skipped. So is a key that is no JWK we can read (a
/// `kty` we do not know, a member of the wrong type), as RFC 7517 section 5 asks: the issuer may
/// publish such a key beside ours, and reading the set as a whole would refuse every token.
fn parse_jwks(text: &str) -> Result<Vec<Key>, String> {
    let set: RawKeySet = serde_json::from_str(text).map_err(|e| format!("not a JWKS: {e}"))?;
    let jwks = set.keys.into_iter().filter_map(|key| {
        serde_json::from_value::<Jwk>(key)
            .inspect_err(|e| tracing::warn!("JWKS key skipped: not a JWK we can read: {e}"))
            .ok()
    });
    Ok(jwks.filter_map(|jwk| usable_key(&jwk)).collect())
}

fn usable_key(jwk: &Jwk) -> Option<Key> {
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    let declared_matches = match jwk.common.key_algorithm {
        None => true,
        Some(declared) => matches!(
            (declared, alg),
            (KeyAlgorithm::RS256, Algorithm::RS256)
                | (KeyAlgorithm::ES256, Algorithm::ES256)
                | (KeyAlgorithm::EdDSA, Algorithm::EdDSA)
        ),
    };
    if !declared_matches {
        return None;
    }
    let Some(verifying) = VerifyingKey::from_public_jwk(jwk) else {
        tracing::warn!(kid = ?jwk.common.key_id, "JWKS key skipped: not a valid {alg:?} key");
        return None;
    };
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        verifying: Arc::new(verifying),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_in_a_jwks_are_ignored() {
        let text = r#"{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}"#;
        assert!(parse_jwks(text).unwrap().is_empty());
    }

    #[test]
    fn a_key_that_is_no_readable_jwk_is_skipped_not_the_set() {
        let ed25519 = r#"{"kty":"OKP","crv":"Ed25519","kid":"ed",
            "x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;
        let text = format!(
            r#"{{"keys":[{{"kty":"AKP","kid":"pq","alg":"ML-DSA-44","pub":"AAAA"}},
                {{"kty":"RSA","kid":7,"n":"AQAB","e":"AQAB"}},
                {{"kty":"EC","crv":"P-256","x5c":"not-an-array","x":"AA","y":"AA"}},
                {ed25519}]}}"#
        );
        let keys = parse_jwks(&text).unwrap();
        assert_eq!(keys.len(), 1, "only the Ed25519 key is usable");
        assert_eq!(keys[0].kid.as_deref(), Some("ed"));
        assert_eq!(keys[0].alg, Algorithm::EdDSA);
    }

    #[test]
    fn garbage_is_not_a_jwks() {
        assert!(parse_jwks("{nope").is_err());
    }
}
