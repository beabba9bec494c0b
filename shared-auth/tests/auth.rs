//! Every refusal of docs/authentication.md, with HS256 and with RS256 / ES256 / EdDSA keys generated here.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rand::RngCore;
use rand::rngs::OsRng;
use serde_json::{Value, json};
use shared_auth::{AuthConfig, AuthError, OptionalCaller, RequiredCaller, Verifier};
use tower::ServiceExt;

const SECRET: &str = "unit-test-secret-unit-test-secret-0123";

/// A private key, the public JWK to publish for it, and the PEM of its public half.
struct KeyPair {
    alg: Algorithm,
    kid: String,
    encoding: EncodingKey,
    jwk: Jwk,
}

impl KeyPair {
    fn rsa(kid: &str) -> Self {
        use rsa::pkcs8::{EncodePrivateKey, LineEnding};
        let private = rsa::RsaPrivateKey::new(&mut OsRng, 2048).unwrap();
        let pem = private.to_pkcs8_pem(LineEnding::LF).unwrap();
        Self::from_encoding(
            Algorithm::RS256,
            kid,
            EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
        )
    }

    fn ec(kid: &str) -> Self {
        use p256::pkcs8::{EncodePrivateKey, LineEnding};
        let private = p256::SecretKey::random(&mut OsRng);
        let pem = private.to_pkcs8_pem(LineEnding::LF).unwrap();
        Self::from_encoding(
            Algorithm::ES256,
            kid,
            EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
        )
    }

    fn ed(kid: &str) -> Self {
        // PKCS#8 v1 wrapping of a random Ed25519 seed.
        let mut der = hex_bytes("302e020100300506032b657004220420");
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        der.extend_from_slice(&seed);
        Self::from_encoding(Algorithm::EdDSA, kid, EncodingKey::from_ed_der(&der))
    }

    fn from_encoding(alg: Algorithm, kid: &str, encoding: EncodingKey) -> Self {
        let mut jwk = Jwk::from_encoding_key(&encoding, alg).unwrap();
        jwk.common.key_id = Some(kid.to_owned());
        Self {
            alg,
            kid: kid.to_owned(),
            encoding,
            jwk,
        }
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_with_crit(claims, None)
    }

    fn sign_with_crit(&self, claims: &Value, crit: Option<Vec<String>>) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        header.crit = crit;
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": "lingo-news-dev", "aud": "lingo-news", "iat": now(), "exp": now() + 600})
}

fn hs256(claims: &Value) -> String {
    hs256_with(claims, SECRET.as_bytes())
}

fn hs256_with(claims: &Value, secret: &[u8]) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

fn hs256_with_crit(claims: &Value, crit: Vec<String>) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.crit = Some(crit);
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

fn hs_config() -> AuthConfig {
    AuthConfig::hs256(SECRET)
}

fn jwks_file(keys: &[&KeyPair]) -> tempfile_path::TempPath {
    let set = JwkSet {
        keys: keys.iter().map(|k| k.jwk.clone()).collect(),
    };
    tempfile_path::TempPath::with_contents(&serde_json::to_string(&set).unwrap())
}

/// A tiny temp file helper (no extra dependency).
mod tempfile_path {
    pub struct TempPath(pub std::path::PathBuf);
    impl TempPath {
        pub fn with_contents(text: &str) -> Self {
            let path = std::env::temp_dir().join(format!("jwks-{}.json", uuid::Uuid::new_v4()));
            std::fs::write(&path, text).unwrap();
            Self(path)
        }
    }
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn asymmetric_config(algs: &[&str], file: &tempfile_path::TempPath) -> AuthConfig {
    AuthConfig {
        auth_algorithms: algs.iter().map(|s| s.to_string()).collect(),
        auth_hs256_secret: algs.contains(&"HS256").then(|| SECRET.to_owned()),
        auth_jwks_file: Some(file.0.clone()),
        ..hs_config()
    }
}

async fn reason(verifier: &Verifier, token: &str) -> &'static str {
    match verifier.verify(token).await {
        Err(AuthError::InvalidToken(why)) => why,
        other => panic!("expected invalid_token, got {other:?}"),
    }
}

#[tokio::test]
async fn hs256_accepts_a_good_token_and_reads_scopes() {
    let verifier = Verifier::from_config(&hs_config()).await.unwrap();
    let mut c = claims("alice");
    c["scope"] = json!("lingo:analytics other");
    let caller = verifier.verify(&hs256(&c)).await.unwrap();
    assert_eq!(caller.sub, "alice");
    assert!(caller.has_scope("lingo:analytics"));
    assert!(caller.require_scope("missing").is_err());

    // Scopes are separated by spaces only: a tab or a no-break space is part of a name.
    for scope in ["a\tlingo:analytics", "a\u{a0}lingo:analytics"] {
        c["scope"] = json!(scope);
        let caller = verifier.verify(&hs256(&c)).await.unwrap();
        assert!(!caller.has_scope("lingo:analytics"), "{scope:?}");
    }
    c["scope"] = json!("  lingo:analytics  other ");
    let caller = verifier.verify(&hs256(&c)).await.unwrap();
    assert!(caller.has_scope("lingo:analytics") && caller.has_scope("other"));
}

#[tokio::test]
async fn hs256_rejects_every_bad_token_with_its_reason() {
    let verifier = Verifier::from_config(&hs_config()).await.unwrap();
    let with = |patch: Value| {
        let mut c = claims("alice");
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        hs256(&c)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            with(json!({"exp": now() - 120})),
            "token expired",
        ),
        (
            "nbf in the future",
            with(json!({"nbf": now() + 600})),
            "token not yet valid",
        ),
        (
            "iat in the future",
            with(json!({"iat": now() + 600})),
            "token issued in the future",
        ),
        (
            "wrong iss",
            with(json!({"iss": "someone-else"})),
            "wrong issuer",
        ),
        (
            "wrong aud",
            with(json!({"aud": "other-api"})),
            "wrong audience",
        ),
        (
            "missing sub",
            with(json!({"sub": null})),
            "missing sub claim",
        ),
        (
            "empty sub",
            with(json!({"sub": ""})),
            "sub must be 1 to 255 characters",
        ),
        (
            "long sub",
            with(json!({"sub": "x".repeat(256)})),
            "sub must be 1 to 255 characters",
        ),
        (
            "NUL in sub",
            with(json!({"sub": "ali\u{0}ce"})),
            "sub must not contain control characters",
        ),
        (
            "newline in sub",
            with(json!({"sub": "alice\n"})),
            "sub must not contain control characters",
        ),
        (
            "iss as an array holding the issuer",
            with(json!({"iss": ["lingo-news-dev"]})),
            "iss must be a single string",
        ),
        (
            "crit header",
            hs256_with_crit(&claims("alice"), vec!["exp".into()]),
            "crit header not supported",
        ),
        (
            "empty crit header",
            hs256_with_crit(&claims("alice"), vec![]),
            "crit header not supported",
        ),
        (
            "missing exp",
            with(json!({"exp": null})),
            "missing exp claim",
        ),
        (
            "missing iss",
            with(json!({"iss": null})),
            "missing iss claim",
        ),
        (
            "missing aud",
            with(json!({"aud": null})),
            "missing aud claim",
        ),
        (
            "bad signature",
            hs256_with(&claims("alice"), b"another-secret-another-secret-another"),
            "bad signature",
        ),
        (
            "malformed",
            "not.a.jwt".to_owned(),
            "malformed token or unsupported alg",
        ),
        (
            "garbage",
            "abc".to_owned(),
            "malformed token or unsupported alg",
        ),
        (
            "too long",
            format!("{}.{}.sig", "a".repeat(5000), "b".repeat(5000)),
            "token too long",
        ),
    ];
    for (name, token, expected) in cases {
        assert_eq!(reason(&verifier, &token).await, expected, "case {name}");
    }
    // Expired but inside the 60 s leeway is still fine; audience may be a list.
    assert!(
        verifier
            .verify(&with(json!({"exp": now() - 30})))
            .await
            .is_ok()
    );
    assert!(
        verifier
            .verify(&with(json!({"aud": ["x", "lingo-news"]})))
            .await
            .is_ok()
    );
}

/// An HS256 token over exactly this header and these claims, written as JSON text (so that the
/// shapes serde_json::Value cannot hold, such as a repeated member, can be tested).
fn hs256_raw(header: &str, claims: &str) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let key = EncodingKey::from_secret(SECRET.as_bytes());
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &key, Algorithm::HS256).unwrap();
    format!("{message}.{signature}")
}

#[tokio::test]
async fn token_shapes_are_read_strictly_and_signed_parts_exactly() {
    let verifier = Verifier::from_config(&hs_config()).await.unwrap();
    let header = r#"{"alg":"HS256","typ":"JWT"}"#;
    let (exp, iat) = (now() + 600, now());
    let with = |members: &str| {
        format!(r#"{{"iss":"lingo-news-dev","aud":"lingo-news","iat":{iat},{members}}}"#)
    };
    // RFC 7519 NumericDates may carry a fraction; an `exp` is never stretched by it.
    let fractional = hs256_raw(header, &with(&format!(r#""sub":"ada","exp":{exp}.75"#)));
    let caller = verifier.verify(&fractional).await.unwrap();
    assert_eq!(caller.expires_at, exp);

    let cases: Vec<(&str, String, &str)> = vec![
        (
            "exp as a string",
            hs256_raw(header, &with(&format!(r#""sub":"ada","exp":"{exp}""#))),
            "malformed token",
        ),
        (
            // A date is a number; `null` is not "no nbf" (found by tests/differential.rs).
            "nbf as null",
            hs256_raw(
                header,
                &with(&format!(r#""sub":"ada","exp":{exp},"nbf":null"#)),
            ),
            "malformed token",
        ),
        (
            "sub given twice",
            hs256_raw(
                header,
                &with(&format!(r#""sub":"ada","sub":"root","exp":{exp}"#)),
            ),
            "malformed token",
        ),
        (
            "alg given twice",
            hs256_raw(
                r#"{"alg":"HS256","alg":"none"}"#,
                &with(&format!(r#""sub":"ada","exp":{exp}"#)),
            ),
            "malformed token or unsupported alg",
        ),
        (
            "claims as an array",
            hs256_raw(header, &format!(r#"["ada",{exp}]"#)),
            "malformed token",
        ),
        (
            "iss as a number",
            hs256_raw(
                header,
                &format!(r#"{{"iss":7,"aud":"lingo-news","sub":"ada","exp":{exp}}}"#),
            ),
            "iss must be a single string",
        ),
        (
            "an empty audience list",
            hs256_raw(
                header,
                &format!(r#"{{"iss":"lingo-news-dev","aud":[],"sub":"ada","exp":{exp}}}"#),
            ),
            "wrong audience",
        ),
        (
            "a padded signature",
            format!("{}=", hs256(&claims("ada"))),
            "malformed token",
        ),
    ];
    for (name, token, expected) in cases {
        assert_eq!(reason(&verifier, &token).await, expected, "case {name}");
    }

    // The signature covers the header and claims exactly as sent: swapping either for another
    // encoding of the same JSON breaks it.
    let token = hs256(&claims("ada"));
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let (header_part, claims_part) = signed.split_once('.').unwrap();
    let decoded = URL_SAFE_NO_PAD.decode(claims_part).unwrap();
    let respaced = String::from_utf8(decoded).unwrap().replace(':', ": ");
    let reencoded = URL_SAFE_NO_PAD.encode(respaced);
    let tampered = format!("{header_part}.{reencoded}.{signature}");
    assert_eq!(reason(&verifier, &tampered).await, "bad signature");
}

#[tokio::test]
async fn a_jwks_key_that_is_not_a_valid_key_is_skipped_and_the_others_load() {
    let good = KeyPair::ec("good");
    let mut broken = KeyPair::ec("broken");
    if let jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(ec) = &mut broken.jwk.algorithm {
        // Not a point on P-256.
        ec.y = URL_SAFE_NO_PAD.encode([7u8; 32]);
    }
    let file = jwks_file(&[&good, &broken]);
    let verifier = Verifier::from_config(&asymmetric_config(&["ES256"], &file))
        .await
        .unwrap();
    assert!(verifier.verify(&good.sign(&claims("bob"))).await.is_ok());
    assert_eq!(
        reason(&verifier, &broken.sign(&claims("bob"))).await,
        "unknown kid"
    );
}

#[tokio::test]
async fn alg_none_and_disallowed_algs_are_rejected() {
    let verifier = Verifier::from_config(&hs_config()).await.unwrap();
    let body = URL_SAFE_NO_PAD.encode(claims("alice").to_string());
    let none = format!(
        "{}.{body}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#)
    );
    assert_eq!(
        reason(&verifier, &none).await,
        "malformed token or unsupported alg"
    );

    let rsa = KeyPair::ed("k1");
    assert_eq!(
        reason(&verifier, &rsa.sign(&claims("alice"))).await,
        "algorithm not allowed"
    );
}

#[tokio::test]
async fn asymmetric_keys_from_a_jwks_file_verify() {
    let (rsa, ec, ed) = (
        KeyPair::rsa("rsa-1"),
        KeyPair::ec("ec-1"),
        KeyPair::ed("ed-1"),
    );
    let file = jwks_file(&[&rsa, &ec, &ed]);
    let verifier = Verifier::from_config(&asymmetric_config(&["RS256", "ES256", "EdDSA"], &file))
        .await
        .unwrap();
    for key in [&rsa, &ec, &ed] {
        let caller = verifier.verify(&key.sign(&claims("bob"))).await.unwrap();
        assert_eq!(caller.sub, "bob", "{:?}", key.alg);
    }

    // A key unknown to the JWKS.
    let stranger = KeyPair::ec("ec-2");
    assert_eq!(
        reason(&verifier, &stranger.sign(&claims("bob"))).await,
        "unknown kid"
    );
    // A known kid used with the wrong algorithm: the key type must match the alg.
    let forged = KeyPair::from_encoding(Algorithm::ES256, "rsa-1", KeyPair::ec("x").encoding);
    assert_eq!(
        reason(&verifier, &forged.sign(&claims("bob"))).await,
        "key type does not match alg"
    );
    // Same kid, right type, wrong key: bad signature.
    let impostor = KeyPair::from_encoding(Algorithm::ES256, "ec-1", KeyPair::ec("y").encoding);
    assert_eq!(
        reason(&verifier, &impostor.sign(&claims("bob"))).await,
        "bad signature"
    );
    // Expiry is checked for asymmetric tokens too.
    let mut old = claims("bob");
    old["exp"] = json!(now() - 3600);
    assert_eq!(reason(&verifier, &rsa.sign(&old)).await, "token expired");
    // So are the header and claim shapes the library lets through.
    for key in [&rsa, &ed] {
        let crit = key.sign_with_crit(&claims("bob"), Some(vec!["b64".into()]));
        assert_eq!(reason(&verifier, &crit).await, "crit header not supported");
        let mut listed = claims("bob");
        listed["iss"] = json!(["lingo-news-dev", "other"]);
        assert_eq!(
            reason(&verifier, &key.sign(&listed)).await,
            "iss must be a single string"
        );
        let nul = key.sign(&claims("bo\u{0}b"));
        assert_eq!(
            reason(&verifier, &nul).await,
            "sub must not contain control characters"
        );
    }
}

#[tokio::test]
async fn hs_rs_confusion_is_rejected() {
    use rsa::pkcs8::{EncodePublicKey, LineEnding};
    let private = rsa::RsaPrivateKey::new(&mut OsRng, 2048).unwrap();
    let public_pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let rsa_key = KeyPair::from_encoding(
        Algorithm::RS256,
        "rsa-1",
        EncodingKey::from_rsa_pem(
            rsa::pkcs8::EncodePrivateKey::to_pkcs8_pem(&private, LineEnding::LF)
                .unwrap()
                .as_bytes(),
        )
        .unwrap(),
    );
    let file = jwks_file(&[&rsa_key]);
    // The attacker signs an HS256 token with the RSA public key as the HMAC secret.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-1".into());
    let forged = jsonwebtoken::encode(
        &header,
        &claims("mallory"),
        &EncodingKey::from_secret(public_pem.as_bytes()),
    )
    .unwrap();

    let rs_only = Verifier::from_config(&asymmetric_config(&["RS256"], &file))
        .await
        .unwrap();
    assert_eq!(reason(&rs_only, &forged).await, "algorithm not allowed");
    let both = Verifier::from_config(&asymmetric_config(&["HS256", "RS256"], &file))
        .await
        .unwrap();
    assert_eq!(reason(&both, &forged).await, "bad signature");
    assert!(both.verify(&rsa_key.sign(&claims("bob"))).await.is_ok());
}

#[tokio::test]
async fn jwks_url_rotation_is_picked_up_on_unknown_kid() {
    let first = KeyPair::ec("2026-01");
    let published = Arc::new(Mutex::new(JwkSet {
        keys: vec![first.jwk.clone()],
    }));
    let served = published.clone();
    let app = Router::new().route(
        "/jwks.json",
        get(move || {
            let set = served.lock().unwrap().clone();
            async move { axum::Json(set) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let config = AuthConfig {
        auth_algorithms: vec!["ES256".into()],
        auth_hs256_secret: None,
        auth_jwks_url: Some(url),
        auth_jwks_min_refresh_secs: 0,
        ..hs_config()
    };
    let verifier = Verifier::from_config(&config).await.unwrap();
    assert!(verifier.verify(&first.sign(&claims("carol"))).await.is_ok());

    let second = KeyPair::ec("2026-02");
    published.lock().unwrap().keys.push(second.jwk.clone());
    assert!(
        verifier
            .verify(&second.sign(&claims("carol")))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_failed_jwks_refresh_keeps_the_last_good_keys() {
    let key = KeyPair::ec("k");
    let file = jwks_file(&[&key]);
    let mut config = asymmetric_config(&["ES256"], &file);
    config.auth_jwks_min_refresh_secs = 0;
    let verifier = Verifier::from_config(&config).await.unwrap();
    std::fs::write(&file.0, "{ this is not json").unwrap();
    // An unknown kid forces a refresh, which fails; the known key still works afterwards.
    let stranger = KeyPair::ec("other");
    assert_eq!(
        reason(&verifier, &stranger.sign(&claims("dan"))).await,
        "unknown kid"
    );
    assert!(verifier.verify(&key.sign(&claims("dan"))).await.is_ok());
}

#[tokio::test]
async fn configuration_errors_are_reported() {
    let mut config = hs_config();
    config.auth_hs256_secret = None;
    assert!(Verifier::from_config(&config).await.is_err());
    config.auth_hs256_secret = Some("short".into());
    assert!(Verifier::from_config(&config).await.is_err());
    let config = AuthConfig {
        auth_algorithms: vec!["none".into()],
        ..hs_config()
    };
    assert!(Verifier::from_config(&config).await.is_err());
    let config = AuthConfig {
        auth_algorithms: vec!["RS256".into()],
        ..hs_config()
    };
    assert!(
        Verifier::from_config(&config).await.is_err(),
        "RS256 without a JWKS"
    );
}

// --- The HTTP answers of the extractors --------------------------------------------------------

async fn app() -> Router {
    let verifier = Verifier::from_config(&hs_config()).await.unwrap();
    Router::new()
        .route(
            "/required",
            get(|RequiredCaller(c): RequiredCaller| async move { c.sub }),
        )
        .route(
            "/optional",
            get(|OptionalCaller(c): OptionalCaller| async move {
                c.map(|c| c.sub).unwrap_or_else(|| "anonymous".into())
            }),
        )
        .route(
            "/scoped",
            get(|RequiredCaller(c): RequiredCaller| async move {
                c.require_scope("lingo:analytics").map(|()| c.sub)
            }),
        )
        .with_state(verifier)
}

async fn call(path: &str, authorization: &[&str]) -> (StatusCode, Option<String>, Value) {
    let mut request = Request::get(path);
    for value in authorization {
        request = request.header(header::AUTHORIZATION, *value);
    }
    let response = app()
        .await
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, challenge, body)
}

#[tokio::test]
async fn every_row_of_the_auth_table() {
    let good = format!("Bearer {}", hs256(&claims("erin")));
    let mut expired_claims = claims("erin");
    expired_claims["exp"] = json!(now() - 3600);
    let expired = format!("Bearer {}", hs256(&expired_claims));
    let realm = "Bearer realm=\"lingo-news\"";

    let (status, challenge, body) = call("/required", &[]).await;
    assert_eq!(
        (status, challenge.as_deref()),
        (StatusCode::UNAUTHORIZED, Some(realm))
    );
    assert_eq!(body["code"], "missing_token");
    assert_eq!(body["status"], 401);

    let invalid_request = format!("{realm}, error=\"invalid_request\"");
    for header in [
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer a b",
        "Bearer   ",
        "Bearer\tabc",
        "Bearer a,b",
        "Bearer abc\t",
        "Token abc",
    ] {
        let (status, challenge, body) = call("/required", &[header]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{header:?}");
        assert_eq!(
            challenge.as_deref(),
            Some(invalid_request.as_str()),
            "{header:?}"
        );
        assert_eq!(body["code"], "invalid_authorization_header", "{header:?}");
    }
    let (_, _, body) = call("/required", &[&good, &good]).await;
    assert_eq!(
        body["code"], "invalid_authorization_header",
        "two Authorization headers"
    );
    // RFC 6750: one or more spaces after the scheme.
    let spaced = good.replacen(' ', "   ", 1);
    let (status, _, body) = call("/required", &[&spaced]).await;
    assert_eq!(status, StatusCode::OK, "{spaced:?}: {body}");

    let (status, challenge, body) = call("/required", &[&expired]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        challenge.as_deref(),
        Some(
            "Bearer realm=\"lingo-news\", error=\"invalid_token\", error_description=\"token expired\""
        )
    );
    assert_eq!(body["code"], "invalid_token");

    let mut listed_iss = claims("erin");
    listed_iss["iss"] = json!(["lingo-news-dev"]);
    for (name, token) in [
        ("crit", hs256_with_crit(&claims("erin"), vec!["exp".into()])),
        ("iss array", hs256(&listed_iss)),
        ("NUL sub", hs256(&claims("er\u{0}in"))),
    ] {
        let (status, challenge, body) = call("/required", &[&format!("Bearer {token}")]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
        assert!(
            challenge.is_some_and(|c| c.contains("error=\"invalid_token\"")),
            "{name}"
        );
        assert_eq!(body["code"], "invalid_token", "{name}");
    }

    let (status, challenge, body) = call("/scoped", &[&good]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        challenge.as_deref(),
        Some(
            "Bearer realm=\"lingo-news\", error=\"insufficient_scope\", scope=\"lingo:analytics\""
        )
    );
    assert_eq!(body["code"], "insufficient_scope");

    let (status, _, body) = call("/required", &[&good]).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, Value::String("erin".into()))
    );
    let (status, _, body) = call(
        "/required",
        &[&format!("bearer {}", hs256(&claims("erin")))],
    )
    .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, Value::String("erin".into())),
        "scheme is case-insensitive"
    );
}

#[tokio::test]
async fn optional_endpoints_are_anonymous_without_a_token_and_fail_closed_with_a_bad_one() {
    let (status, _, body) = call("/optional", &[]).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, Value::String("anonymous".into()))
    );
    let good = format!("Bearer {}", hs256(&claims("frank")));
    let (_, _, body) = call("/optional", &[&good]).await;
    assert_eq!(body, Value::String("frank".into()));
    let (status, _, body) = call("/optional", &["Bearer nonsense"]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "invalid_token");
    let (_, _, body) = call("/optional", &["Basic abc"]).await;
    assert_eq!(body["code"], "invalid_authorization_header");
}
