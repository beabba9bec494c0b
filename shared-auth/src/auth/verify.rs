//! Bearer-token verification (docs/authentication.md), shared by the gateway and both services so that
//! all three refuse exactly the same tokens with exactly the same answers.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use jsonwebtoken::Algorithm;

use crate::auth::claims::Caller;
use crate::auth::error::{AuthError, ConfigError};
use crate::auth::jwks::{JwksSource, JwksStore};
use crate::auth::keys::VerifyingKey;
use crate::auth::token::{Claims, Issuer, PART_ROOM_BYTES, PartRoom, SignedToken, Unreadable};

/// Tokens longer than this are refused before any parsing.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Key configuration, read from the environment by every binary (and by `mint-token`). No
/// `Debug`, like every configuration that holds a secret (here the HS256 secret): a secret is
/// never printed, and without `Debug` no log line or panic message can print it by mistake.
#[derive(clap::Args, Clone)]
pub struct AuthConfig {
    /// Required `iss` of every token.
    #[arg(long, env = "AUTH_ISSUER", default_value = "lingo-news-dev")]
    pub auth_issuer: String,
    /// Audience that a token's `aud` must contain.
    #[arg(long, env = "AUTH_AUDIENCE", default_value = "lingo-news")]
    pub auth_audience: String,
    /// Accepted `alg` values, comma-separated (HS256, RS256, ES256, EdDSA).
    #[arg(
        long,
        env = "AUTH_ALGORITHMS",
        value_delimiter = ',',
        default_value = "HS256"
    )]
    pub auth_algorithms: Vec<String>,
    /// Shared secret for HS256 (local development).
    #[arg(long, env = "AUTH_HS256_SECRET", hide_env_values = true)]
    pub auth_hs256_secret: Option<String>,
    /// JWKS file with the public keys for RS256 / ES256 / EdDSA.
    #[arg(long, env = "AUTH_JWKS_FILE")]
    pub auth_jwks_file: Option<PathBuf>,
    /// JWKS URL (http or https) with the public keys; refreshed periodically and on an unknown `kid`.
    #[arg(long, env = "AUTH_JWKS_URL")]
    pub auth_jwks_url: Option<String>,
    /// Seconds between background refreshes of the JWKS.
    #[arg(long, env = "AUTH_JWKS_REFRESH_SECS", default_value_t = 300)]
    pub auth_jwks_refresh_secs: u64,
    /// Minimum seconds between two JWKS fetches (an unknown `kid` cannot cause a fetch storm).
    #[arg(long, env = "AUTH_JWKS_MIN_REFRESH_SECS", default_value_t = 30)]
    pub auth_jwks_min_refresh_secs: u64,
    /// Clock leeway in seconds for `exp`, `nbf` and `iat`.
    #[arg(long, env = "AUTH_LEEWAY_SECS", default_value_t = 60)]
    pub auth_leeway_secs: u64,
}

impl AuthConfig {
    /// A development configuration with an HS256 secret (tests and local runs).
    pub fn hs256(secret: &str) -> Self {
        Self {
            auth_issuer: "lingo-news-dev".into(),
            auth_audience: "lingo-news".into(),
            auth_algorithms: vec!["HS256".into()],
            auth_hs256_secret: Some(secret.into()),
            auth_jwks_file: None,
            auth_jwks_url: None,
            auth_jwks_refresh_secs: 300,
            auth_jwks_min_refresh_secs: 30,
            auth_leeway_secs: 60,
        }
    }
}

/// The bearer token of a request: `Ok(None)` when there is no `Authorization` header at all.
pub fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, AuthError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AuthError::InvalidHeader);
    }
    // Read as bytes in one pass: the token is the longest header of most requests, and this
    // runs for every one of them.
    let bytes = value.as_bytes();
    let space = bytes
        .iter()
        .position(|&byte| byte == b' ')
        .ok_or(AuthError::InvalidHeader)?;
    // RFC 6750 2.1: the scheme, one or more spaces, the token.
    let (scheme, mut token) = (&bytes[..space], &bytes[space + 1..]);
    while let [b' ', rest @ ..] = token {
        token = rest;
    }
    // One word of visible ASCII: no space, tab, comma or control character.
    // A fold rather than `all`: without an early exit the compiler checks many bytes at once.
    let token_is_one_word = !token.is_empty()
        && token
            .iter()
            .fold(true, |ok, &b| ok & b.is_ascii_graphic() & (b != b','));
    if !scheme.eq_ignore_ascii_case(b"bearer") || !token_is_one_word {
        return Err(AuthError::InvalidHeader);
    }
    std::str::from_utf8(token)
        .map(Some)
        .map_err(|_| AuthError::InvalidHeader)
}

fn parse_algorithm(name: &str) -> Result<Algorithm, ConfigError> {
    match name.trim() {
        "HS256" => Ok(Algorithm::HS256),
        "RS256" => Ok(Algorithm::RS256),
        "ES256" => Ok(Algorithm::ES256),
        "EdDSA" => Ok(Algorithm::EdDSA),
        other => Err(ConfigError::UnknownAlgorithm(other.to_owned())),
    }
}

/// Verifies bearer tokens against the configured issuer, audience, algorithms and keys.
///
/// A token is taken apart once ([`SignedToken`]) and checked against keys parsed when they were
/// loaded ([`VerifyingKey`]), in this order: size, header, `alg` allowed, no `crit`, the key,
/// the signature, and only then the claims.
pub struct Verifier {
    issuer: String,
    audience: String,
    leeway_secs: u64,
    allowed: Vec<Algorithm>,
    /// The HS256 key. Only it ever verifies an HMAC token, never a public key from the JWKS
    /// (that is the HS/RS confusion attack).
    secret: Option<Arc<VerifyingKey>>,
    jwks: Option<Arc<JwksStore>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("allowed", &self.allowed)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Builds the verifier and loads the key set. A JWKS URL that cannot be fetched yet is not
    /// fatal (it is retried in the background); a bad file or configuration is.
    pub async fn from_config(config: &AuthConfig) -> Result<Arc<Self>, ConfigError> {
        let allowed = config
            .auth_algorithms
            .iter()
            .filter(|name| !name.trim().is_empty())
            .map(|name| parse_algorithm(name))
            .collect::<Result<Vec<_>, _>>()?;
        if allowed.is_empty() {
            return Err(ConfigError::NoAlgorithms);
        }
        let secret = if allowed.contains(&Algorithm::HS256) {
            let secret = config
                .auth_hs256_secret
                .as_deref()
                .ok_or(ConfigError::MissingSecret)?;
            if secret.len() < 32 {
                return Err(ConfigError::WeakSecret);
            }
            Some(Arc::new(VerifyingKey::hs256(secret.as_bytes())))
        } else {
            None
        };
        let jwks_source = match (&config.auth_jwks_file, &config.auth_jwks_url) {
            (Some(_), Some(_)) => return Err(ConfigError::TwoJwksSources),
            (Some(path), None) => Some(JwksSource::File(path.clone())),
            (None, Some(url)) if !is_http_url(url) => {
                return Err(ConfigError::Jwks(format!(
                    "AUTH_JWKS_URL {url:?} is not an http:// or https:// URL"
                )));
            }
            (None, Some(url)) => Some(JwksSource::Url(url.clone())),
            (None, None) => None,
        };
        let needs_jwks = allowed.iter().any(|alg| *alg != Algorithm::HS256);
        let jwks = match (needs_jwks, jwks_source) {
            (false, _) => None,
            (true, None) => return Err(ConfigError::MissingJwks),
            (true, Some(source)) => {
                let store = JwksStore::new(
                    source,
                    Duration::from_secs(config.auth_jwks_min_refresh_secs),
                );
                store.load_initial().await?;
                store
                    .clone()
                    .spawn_refresher(Duration::from_secs(config.auth_jwks_refresh_secs.max(1)));
                Some(store)
            }
        };
        Ok(Arc::new(Self {
            issuer: config.auth_issuer.clone(),
            audience: config.auth_audience.clone(),
            leeway_secs: config.auth_leeway_secs,
            allowed,
            secret,
            jwks,
        }))
    }

    /// Whether the keys are there to verify tokens with: always with only HS256; with a JWKS URL,
    /// once a key set has been fetched (it may be unreachable at start-up).
    pub fn keys_loaded(&self) -> bool {
        self.jwks.as_ref().is_none_or(|store| store.is_loaded())
    }

    /// The number of keys tokens are verified with now: the HS256 secret, if configured, and the
    /// usable keys of the JWKS; 0 while a JWKS has not been loaded yet ([`Self::keys_loaded`]),
    /// since no token is judged then.
    pub fn key_count(&self) -> usize {
        if !self.keys_loaded() {
            return 0;
        }
        usize::from(self.secret.is_some()) + self.jwks.as_ref().map_or(0, |store| store.key_count())
    }

    /// Verifies a token and returns the caller it names.
    pub async fn verify(&self, token: &str) -> Result<Caller, AuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::InvalidToken("token too long"));
        }
        let token = SignedToken::parse(token).map_err(unreadable)?;
        let alg = token.header.alg;
        if !self.allowed.contains(&alg) {
            return Err(AuthError::InvalidToken("algorithm not allowed"));
        }
        if token.header.crit.is_some() {
            // RFC 7515 section 4.1.11: we understand no extension, so any `crit` is fatal.
            return Err(AuthError::InvalidToken("crit header not supported"));
        }
        let key = self.key_for(alg, token.header.kid.as_deref()).await?;
        // One room for both parts: the signature is done with before the claims are decoded.
        let mut room: PartRoom = [0; PART_ROOM_BYTES];
        let signature = token.signature(&mut room).map_err(unreadable)?;
        if !key.verifies(token.signing_input.as_bytes(), &signature) {
            return Err(AuthError::InvalidToken("bad signature"));
        }
        self.check_claims(token.claims(&mut room).map_err(unreadable)?)
    }

    async fn key_for(
        &self,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<Arc<VerifyingKey>, AuthError> {
        let not_allowed = AuthError::InvalidToken("algorithm not allowed");
        if alg == Algorithm::HS256 {
            return self.secret.clone().ok_or(not_allowed);
        }
        let store = self.jwks.as_ref().ok_or(not_allowed)?;
        store.key_for(alg, kid).await
    }

    /// The contract's claim rules (docs/authentication.md), for a token whose signature is good.
    fn check_claims(&self, claims: Claims<'_>) -> Result<Caller, AuthError> {
        let refuse = |why| Err(AuthError::InvalidToken(why));
        let Some(exp) = claims.exp else {
            return refuse("missing exp claim");
        };
        let Some(iss) = claims.iss else {
            return refuse("missing iss claim");
        };
        let Some(aud) = claims.aud else {
            return refuse("missing aud claim");
        };
        let Some(sub) = claims.sub else {
            return refuse("missing sub claim");
        };
        let now = jsonwebtoken::get_current_timestamp();
        let latest_valid_now = now.saturating_add(self.leeway_secs);
        if exp.saturating_add(self.leeway_secs) < now {
            return refuse("token expired");
        }
        if claims.nbf.is_some_and(|nbf| nbf > latest_valid_now) {
            return refuse("token not yet valid");
        }
        match iss {
            Issuer::NotAString => return refuse("iss must be a single string"),
            Issuer::String(iss) if iss != self.issuer => return refuse("wrong issuer"),
            Issuer::String(_) => {}
        }
        if !aud.iter().any(|name| *name == self.audience) {
            return refuse("wrong audience");
        }
        let sub_len = sub.chars().count();
        if !(1..=255).contains(&sub_len) {
            return refuse("sub must be 1 to 255 characters");
        }
        if sub.chars().any(char::is_control) {
            // A NUL cannot be stored in Postgres text: such a caller would turn every query
            // into a 500, so the token is refused here.
            return refuse("sub must not contain control characters");
        }
        if claims.iat.is_some_and(|iat| iat > latest_valid_now) {
            return refuse("token issued in the future");
        }
        let scopes: HashSet<String> = claims
            .scope
            .as_deref()
            .unwrap_or_default()
            // Space-separated (RFC 8693): a tab or a no-break space is part of a scope's name.
            .split(' ')
            .filter(|scope| !scope.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(Caller {
            sub: sub.into_owned(),
            scopes,
            expires_at: exp,
        })
    }
}

/// The refusal for a token that cannot be read at all.
fn unreadable(part: Unreadable) -> AuthError {
    AuthError::InvalidToken(match part {
        Unreadable::Header => "malformed token or unsupported alg",
        Unreadable::Signature | Unreadable::Claims => "malformed token",
    })
}

/// Whether `url` is an absolute http(s) URL with a host, as a JWKS URL must be.
fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer_of(value: &'static str) -> Result<Option<String>, AuthError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            value.parse().expect("a header value"),
        );
        bearer_token(&headers).map(|token| token.map(str::to_owned))
    }

    /// RFC 6750 2.1: `Bearer`, one or more spaces, one token.
    #[test]
    fn the_token_follows_the_scheme_and_one_or_more_spaces() {
        for value in ["Bearer abc.def", "bearer  abc.def", "BEARER    abc.def"] {
            assert_eq!(
                bearer_of(value).ok().flatten().as_deref(),
                Some("abc.def"),
                "{value:?}"
            );
        }
        for value in [
            "Bearer",
            "Bearer ",
            "Bearer   ",
            "Bearer a b",
            "Bearer\tabc",
            "Basic abc",
        ] {
            assert!(
                matches!(bearer_of(value), Err(AuthError::InvalidHeader)),
                "{value:?}"
            );
        }
    }

    /// A JWKS URL that can never be fetched is a configuration error at start-up, not a key set
    /// that is "not reachable yet" for ever.
    #[tokio::test]
    async fn a_jwks_url_that_is_no_http_url_is_refused_at_start_up() {
        for url in [
            "not-a-url",
            "ftp://idp.example/jwks.json",
            "file:///etc/jwks.json",
        ] {
            let mut config = AuthConfig::hs256(&"s".repeat(32));
            config.auth_algorithms = vec!["RS256".into()];
            config.auth_jwks_url = Some(url.into());
            let refused = Verifier::from_config(&config).await;
            assert!(matches!(refused, Err(ConfigError::Jwks(_))), "{url}");
        }
        assert!(is_http_url("https://idp.example/.well-known/jwks.json"));
        assert!(is_http_url("http://127.0.0.1:9998/jwks.json"));
    }
}
