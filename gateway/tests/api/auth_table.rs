//! Every row of the docs/authentication.md table, answered by the gateway itself, with HS256 and with an
//! RS256 JWKS served over HTTP (including a key rotation picked up without a restart).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::get;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use shared_auth::AuthError;
use shared_auth::testing::{default_claims, token_with_claims};

use crate::helpers::{Stack, problem};

/// How a test signs tokens for the gateway under test.
trait Signer {
    fn sign(&self, claims: &Value) -> String;
    /// A token the gateway's keys cannot verify (same header, other key).
    fn forge(&self, claims: &Value) -> String;
    /// A correctly signed token whose `alg` the gateway does not accept.
    fn wrong_alg(&self, claims: &Value) -> String;
}

struct Hs256;

impl Signer for Hs256 {
    fn sign(&self, claims: &Value) -> String {
        token_with_claims(claims.clone())
    }

    fn forge(&self, claims: &Value) -> String {
        let key = EncodingKey::from_secret(b"another-secret-another-secret-0123456789");
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).expect("sign")
    }

    fn wrong_alg(&self, claims: &Value) -> String {
        RsaKey::generate("rsa-x").sign(claims)
    }
}

struct RsaKey {
    kid: String,
    encoding: EncodingKey,
    jwk: Jwk,
}

impl RsaKey {
    fn generate(kid: &str) -> Self {
        use rsa::pkcs8::{EncodePrivateKey, LineEnding};
        let private = rsa::RsaPrivateKey::new(&mut rand::rngs::OsRng, 2048).expect("RSA key");
        let pem = private.to_pkcs8_pem(LineEnding::LF).expect("PEM");
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).expect("encoding key");
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::RS256).expect("JWK");
        jwk.common.key_id = Some(kid.to_owned());
        Self {
            kid: kid.to_owned(),
            encoding,
            jwk,
        }
    }

    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

/// The published key, and an impostor key claiming the same `kid`.
struct Jwks {
    key: RsaKey,
    impostor: RsaKey,
}

impl Signer for Jwks {
    fn sign(&self, claims: &Value) -> String {
        self.key.sign(claims)
    }

    fn forge(&self, claims: &Value) -> String {
        self.impostor.sign_as(&self.key.kid, claims)
    }

    fn wrong_alg(&self, claims: &Value) -> String {
        token_with_claims(claims.clone())
    }
}

/// Serves `set` at `/jwks.json` on port 0; returns its URL.
/// Serves the key set in `set` (503 while it is `None`, an issuer's endpoint that is down) and
/// returns its URL.
async fn serve_jwks(set: Arc<Mutex<Option<JwkSet>>>) -> String {
    let app = Router::new().route(
        "/jwks.json",
        get(move || {
            let current = set.lock().expect("lock").clone();
            async move {
                current
                    .map(axum::Json)
                    .ok_or(axum::http::StatusCode::SERVICE_UNAVAILABLE)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/jwks.json")
}

fn claims_with(sub: &str, change: impl FnOnce(&mut Value)) -> Value {
    let mut claims = default_claims(sub);
    change(&mut claims);
    claims
}

fn now() -> i64 {
    i64::try_from(jsonwebtoken::get_current_timestamp()).expect("time")
}

async fn expect_refusal(
    stack: &Stack,
    path: &str,
    authorization: &[&str],
    expected: &AuthError,
    case: &str,
) {
    let mut request = stack.gateway.client.get(stack.gateway.url(path));
    for value in authorization {
        request = request.header("authorization", *value);
    }
    let response = request.send().await.expect("request");
    let expected_problem = expected.to_problem();
    assert_eq!(
        response.status(),
        expected_problem.status,
        "{case} on {path}"
    );
    assert_eq!(
        response.headers()["www-authenticate"],
        expected.www_authenticate().as_str(),
        "{case} on {path}"
    );
    // Like every answer the gateway gives itself: about this request only, never to be stored
    // (and "every lingo `/me/*` answer" says so, refusals included).
    assert_eq!(
        response.headers()["cache-control"],
        "private, no-store",
        "{case} on {path}"
    );
    let body = problem(response).await;
    assert_eq!(
        body["code"],
        expected_problem.code.as_ref(),
        "{case} on {path}"
    );
    assert!(body["request_id"].is_string(), "{case}: {body}");
}

/// Runs every row of the table against `stack`, whose gateway trusts `signer`.
async fn every_row(
    stack: &Stack,
    signer: &dyn Signer,
    extra_invalid: Vec<(&str, String, &'static str)>,
) {
    const REQUIRED: &str = "/v1/news/me/feed";
    const OPTIONAL: &str = "/v1/news/articles?limit=2";
    const SCOPED: &str = "/v1/lingo/analytics/progress";

    // Required endpoint, no Authorization header.
    for path in [REQUIRED, SCOPED, "/v1/lingo/me/xp"] {
        expect_refusal(stack, path, &[], &AuthError::MissingToken, "no header").await;
    }

    // A header that is not `Bearer <token>`.
    let good = signer.sign(&default_claims("ada"));
    let two_tokens = format!("Bearer {good} {good}");
    let basic = "Basic YWRhOnNlY3JldA==".to_owned();
    let bad_headers: Vec<(&str, Vec<&str>)> = vec![
        ("empty", vec![""]),
        ("other scheme", vec![basic.as_str()]),
        ("two tokens", vec![two_tokens.as_str()]),
        ("scheme only", vec!["Bearer"]),
        ("two headers", vec![good.as_str(), good.as_str()]),
    ];
    for (case, values) in &bad_headers {
        let values: Vec<String> = values
            .iter()
            .map(|v| {
                if *v == good {
                    format!("Bearer {v}")
                } else {
                    (*v).to_owned()
                }
            })
            .collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        for path in [REQUIRED, OPTIONAL] {
            expect_refusal(stack, path, &values, &AuthError::InvalidHeader, case).await;
        }
    }

    // Tokens that are not valid, on required and optional endpoints alike (fail closed).
    let mut invalid: Vec<(&str, String, &'static str)> = vec![
        (
            "bad signature",
            signer.forge(&default_claims("ada")),
            "bad signature",
        ),
        (
            "expired",
            signer.sign(&claims_with("ada", |c| c["exp"] = json!(now() - 3600))),
            "token expired",
        ),
        (
            "not yet valid",
            signer.sign(&claims_with("ada", |c| c["nbf"] = json!(now() + 3600))),
            "token not yet valid",
        ),
        (
            "wrong iss",
            signer.sign(&claims_with("ada", |c| c["iss"] = json!("someone-else"))),
            "wrong issuer",
        ),
        (
            "wrong aud",
            signer.sign(&claims_with("ada", |c| c["aud"] = json!("another-api"))),
            "wrong audience",
        ),
        (
            "missing sub",
            signer.sign(&claims_with("ada", |c| {
                c.as_object_mut().expect("object").remove("sub");
            })),
            "missing sub claim",
        ),
        (
            "disallowed alg",
            signer.wrong_alg(&default_claims("ada")),
            "algorithm not allowed",
        ),
        (
            "alg none",
            format!(
                "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.",
                base64_url(&default_claims("ada").to_string())
            ),
            "malformed token or unsupported alg",
        ),
        (
            "malformed",
            "not.a.jwt".to_owned(),
            "malformed token or unsupported alg",
        ),
        ("too long", "a".repeat(9 * 1024), "token too long"),
    ];
    invalid.extend(extra_invalid);
    for (case, token, reason) in &invalid {
        let header = format!("Bearer {token}");
        for path in [REQUIRED, OPTIONAL] {
            expect_refusal(
                stack,
                path,
                &[&header],
                &AuthError::InvalidToken(reason),
                case,
            )
            .await;
        }
    }

    // A valid token without the needed scope.
    let header = format!("Bearer {good}");
    expect_refusal(
        stack,
        SCOPED,
        &[&header],
        &AuthError::InsufficientScope("lingo:analytics".into()),
        "no scope",
    )
    .await;
    assert_eq!(stack.hits(), 0, "no refused request reached an upstream");

    // And the successes: anonymous optional, valid required, scoped analytics.
    let anonymous = stack.gateway.get(OPTIONAL).await;
    assert_eq!(anonymous.status(), 200);
    let echo: Value = stack
        .gateway
        .client
        .get(stack.gateway.url(REQUIRED))
        .header("authorization", &header)
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("echo");
    assert_eq!(echo["path"], REQUIRED);
    assert_eq!(
        echo["headers"]["authorization"],
        json!([header]),
        "the Authorization header is forwarded unchanged"
    );
    let scoped = signer.sign(&claims_with("analyst", |c| {
        c["scope"] = json!("lingo:analytics")
    }));
    let analytics = stack
        .gateway
        .client
        .get(stack.gateway.url(SCOPED))
        .bearer_auth(&scoped)
        .send()
        .await
        .expect("request");
    assert_eq!(analytics.status(), 200);
    assert_eq!(stack.hits(), 3);
}

fn base64_url(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

#[tokio::test]
async fn every_row_with_hs256() {
    let stack = Stack::start().await;
    every_row(&stack, &Hs256, vec![]).await;
}

#[tokio::test]
async fn every_row_with_a_jwks_url_and_rotation() {
    let key = RsaKey::generate("2026-01");
    let impostor = RsaKey::generate("impostor");
    let published = Arc::new(Mutex::new(Some(JwkSet {
        keys: vec![key.jwk.clone()],
    })));
    let jwks_url = serve_jwks(published.clone()).await;
    let stack = Stack::start_with(|config| {
        config.auth.auth_algorithms = vec!["RS256".into()];
        config.auth.auth_hs256_secret = None;
        config.auth.auth_jwks_url = Some(jwks_url.clone());
        config.auth.auth_jwks_min_refresh_secs = 0;
    })
    .await;
    let signer = Jwks { key, impostor };
    let unknown_kid = signer.impostor.sign(&default_claims("ada"));
    every_row(
        &stack,
        &signer,
        vec![("unknown kid", unknown_kid, "unknown kid")],
    )
    .await;

    // The issuer rotates: a new key under a new kid replaces the old one. The gateway fetches
    // the set again on the unknown kid and accepts the token, without a restart.
    let next = RsaKey::generate("2026-02");
    *published.lock().expect("lock") = Some(JwkSet {
        keys: vec![next.jwk.clone()],
    });
    let rotated = stack
        .gateway
        .client
        .get(stack.gateway.url("/v1/news/me/feed"))
        .bearer_auth(next.sign(&default_claims("ada")))
        .send()
        .await
        .expect("request");
    assert_eq!(
        rotated.status(),
        200,
        "a token of the rotated key is accepted"
    );
}

#[tokio::test]
async fn readyz_waits_for_a_jwks_url_that_was_down_at_start_up() {
    let key = RsaKey::generate("2026-01");
    // The issuer's JWKS endpoint is down (503) until `published` holds a key set.
    let published = Arc::new(Mutex::new(None));
    let jwks_url = serve_jwks(published.clone()).await;
    let stack = Stack::start_with(|config| {
        config.auth.auth_algorithms = vec!["RS256".into()];
        config.auth.auth_hs256_secret = None;
        config.auth.auth_jwks_url = Some(jwks_url);
        config.auth.auth_jwks_refresh_secs = 1;
    })
    .await;

    let not_ready = stack.gateway.get("/readyz").await;
    assert_eq!(not_ready.status(), 503);
    assert!(not_ready.headers().contains_key("retry-after"));
    assert_eq!(problem(not_ready).await["code"], "not_ready");
    assert_eq!(keys_loaded(&stack).await, 0);
    // Without keys a token cannot be judged: a retryable 503, never a 401 that tells the client
    // to throw a good token away.
    let feed_with_a_token = || {
        stack
            .gateway
            .client
            .get(stack.gateway.url("/v1/news/me/feed"))
            .bearer_auth(key.sign(&default_claims("ada")))
            .send()
    };
    let unjudged = feed_with_a_token().await.expect("request");
    assert_eq!(unjudged.status(), 503);
    assert!(unjudged.headers().contains_key("retry-after"));
    assert_eq!(problem(unjudged).await["code"], "service_unavailable");

    *published.lock().expect("lock") = Some(JwkSet {
        keys: vec![key.jwk.clone()],
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stack.gateway.get("/readyz").await.status() != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "/readyz still not ready 10 s after the JWKS came up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let signed = feed_with_a_token().await.expect("request");
    assert_eq!(signed.status(), 200);
    assert_eq!(keys_loaded(&stack).await, 1);

    // A second key published beside the first is counted once the set is fetched again.
    let next = RsaKey::generate("2026-02");
    *published.lock().expect("lock") = Some(JwkSet {
        keys: vec![key.jwk.clone(), next.jwk.clone()],
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while keys_loaded(&stack).await != 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second key was not counted 10 s after it was published"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `gateway_token_keys_loaded` as `/metrics` shows it now.
async fn keys_loaded(stack: &Stack) -> u64 {
    let text = stack.gateway.metrics().await;
    let line = text
        .lines()
        .find(|line| line.starts_with("gateway_token_keys_loaded "))
        .unwrap_or_else(|| panic!("no gateway_token_keys_loaded in\n{text}"));
    line["gateway_token_keys_loaded ".len()..]
        .parse()
        .expect("a count")
}
