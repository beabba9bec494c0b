//! Differential test of the token checks (issue 34): generated tokens, valid ones and mutations
//! of them, are judged by our verifier and by `jsonwebtoken::decode` (the reference) with the same
//! keys and rules. Both must accept the same tokens, with the same `sub` and scopes, and refuse
//! the same tokens, except where docs/authentication.md documents a rule of ours that
//! jsonwebtoken does not have: those are listed in [`EXCEPTIONS`], each with its reason, and a
//! disagreement is only excused when the token shows what the exception names *and* our verifier
//! (or jsonwebtoken) gives the reason the exception expects.
//!
//! What is generated: HS256, RS256, ES256 and EdDSA tokens signed by the published keys, by keys
//! nobody published (under a published `kid`), by the RSA public key used as an HMAC secret, or
//! not at all (`alg: none`); then up to four mutations: any header or claims member changed,
//! removed, repeated (a JSON object with the same key twice) or given another JSON type, member
//! names written with escapes; parts that are not JSON objects, have trailing bytes, whitespace,
//! a byte-order mark; base64 with padding, non-canonical trailing bits, the `+`/`/` alphabet,
//! whitespace or other bytes; signatures bit-flipped, truncated, emptied, DER-encoded, or made by
//! another key or algorithm; parts added or taken away; tokens over 8 KiB. Each token is judged
//! under three configurations (all four algorithms; HS256 only; RS256 and EdDSA only).
//!
//! Fixed seed and a bounded number of cases by default (fast enough for CI in a debug build);
//! `DIFFERENTIAL_CASES=200000` for a long run, `DIFFERENTIAL_SEED=<n>` for another sequence. A
//! failure prints the seed and case number: the case can be replayed with
//! `DIFFERENTIAL_SEED=<seed> DIFFERENTIAL_FIRST=<case> DIFFERENTIAL_CASES=1`.
//!
//! The first short runs found one difference that was a bug of ours (`"nbf": null` was accepted
//! as "no nbf"; fixed in token.rs). After the fix, a long run (issue 34: 250,000 cases of the
//! default seed, 750,000 judgements, 7.5 min in a debug build) found none besides the exceptions.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, EncodingKey, Validation};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use serde::Deserialize;
use serde_json::Value;
use shared_auth::{AuthConfig, AuthError, Verifier};

const SECRET: &str = "differential-secret-differential-secret-0123";
const ISSUER: &str = "lingo-news-dev";
const AUDIENCE: &str = "lingo-news";
const LEEWAY: u64 = 60;
/// Our size limit (docs/authentication.md: tokens larger than 8 KiB are refused).
const MAX_TOKEN_BYTES: usize = 8 * 1024;
const DEFAULT_SEED: u64 = 0x34_d1ff;
/// Enough for every mutation and every exception to come up many times, in a few seconds.
const DEFAULT_CASES: u64 = 4_000;

// ---------------------------------------------------------------------------------------------
// The exceptions: documented rules of ours that jsonwebtoken does not apply.
// ---------------------------------------------------------------------------------------------

/// One documented difference. `applies` sees the case and both verdicts, and must check both the
/// token's content and the reason given, so that it cannot excuse an unrelated disagreement.
struct Exception {
    name: &'static str,
    /// Why the difference is right (docs/authentication.md says so).
    reason: &'static str,
    applies: fn(&Case, &Verdict, &Reference) -> bool,
}

const EXCEPTIONS: &[Exception] = &[
    Exception {
        name: "crit header",
        reason: "\"A header with a crit member is refused: no JWS extension is understood\" \
                 (RFC 7515 4.1.11); jsonwebtoken reads `crit` and ignores it",
        applies: |case, ours, _| {
            ours.refused_for(&["crit header not supported"]) && case.header.count("crit") == 1
        },
    },
    Exception {
        name: "sub length or control characters",
        reason: "`sub` must be 1..=255 characters without control characters (a NUL cannot be \
                 stored in PostgreSQL text); jsonwebtoken takes any string",
        applies: |case, ours, _| {
            ours.refused_for(&[
                "sub must be 1 to 255 characters",
                "sub must not contain control characters",
            ]) && case.claims.single("sub").is_some_and(|sub| {
                sub.as_str().is_some_and(|sub| {
                    !(1..=255).contains(&sub.chars().count()) || sub.chars().any(char::is_control)
                })
            })
        },
    },
    Exception {
        name: "iss array",
        reason: "`iss` must be a single string (an array is refused, even one holding the \
                 issuer); jsonwebtoken accepts an array that contains an accepted issuer",
        applies: |case, ours, _| {
            ours.refused_for(&["iss must be a single string"])
                && case.claims.single("iss").is_some_and(|iss| iss.is_array())
        },
    },
    Exception {
        name: "iat",
        reason: "`nbf` and `iat` are checked when present (not issued in the future) and a \
                 member that is read must be a number named once; jsonwebtoken never reads `iat`",
        applies: |case, ours, _| {
            let iat = case.claims.values("iat");
            let future = |v: &Value| v.as_f64().is_some_and(|t| t > (case.now + LEEWAY) as f64);
            // Repeated, not a number (null included), or a number no double holds (`1e309`,
            // which serde_json does not even read when jsonwebtoken skips the member).
            let unreadable = iat.len() > 1
                || iat
                    .iter()
                    .any(|v| v.as_ref().is_none_or(|v| !v.is_number()));
            (ours.refused_for(&["token issued in the future"])
                && iat.len() == 1
                && iat[0].as_ref().is_some_and(future))
                || (ours.refused_for(&["malformed token"]) && unreadable)
        },
    },
    Exception {
        name: "token size",
        reason: "tokens larger than 8 KiB are refused before they are read; jsonwebtoken has no \
                 limit",
        applies: |case, ours, _| {
            ours.refused_for(&["token too long"]) && case.token.len() > MAX_TOKEN_BYTES
        },
    },
    Exception {
        name: "unread header members",
        reason: "header members other than alg, kid and crit are ignored, repeated or not, \
                 whatever their type (RFC 7515; an embedded jwk is never used); jsonwebtoken's \
                 Header types typ, cty, jku, jwk, x5u, x5c, x5t, x5t#S256, enc, zip, url and \
                 nonce and refuses a repeated one",
        applies: |case, ours, reference| {
            ours.accepted()
                && matches!(reference, Reference::HeaderRefused(ErrorKind::Json(_)))
                && TYPED_HEADER_MEMBERS.iter().any(|name| {
                    let values = case.header.values(name);
                    values.len() > 1 || values.iter().any(|v| !fits_jsonwebtoken(name, v))
                })
        },
    },
    Exception {
        name: "NumericDate range",
        reason: "a NumericDate before the epoch counts as the epoch and one past the 64-bit \
                 range as the largest (docs: the `exp` rule, and `nbf`/`iat` are read alike); \
                 jsonwebtoken refuses a negative `nbf` and an `exp` at or past 2^64 as malformed",
        applies: |case, ours, reference| {
            let negative_nbf = case
                .claims
                .single("nbf")
                .and_then(|v| v.as_f64())
                .is_some_and(|nbf| nbf < 0.0);
            let huge_exp = case
                .claims
                .single("exp")
                .and_then(|v| v.as_f64())
                .is_some_and(|exp| exp >= u64::MAX as f64);
            ours.accepted()
                && match reference {
                    Reference::Refused(kind) => match kind {
                        ErrorKind::InvalidClaimFormat(claim) if claim == "nbf" => negative_nbf,
                        ErrorKind::MissingRequiredClaim(claim) if claim == "exp" => huge_exp,
                        _ => false,
                    },
                    _ => false,
                }
        },
    },
];

/// The header members jsonwebtoken's `Header` reads with a type (`alg`, `kid` and `crit`, which
/// we read too, are left out).
const TYPED_HEADER_MEMBERS: &[&str] = &[
    "typ", "cty", "jku", "jwk", "x5u", "x5c", "x5t", "x5t#S256", "enc", "zip", "url", "nonce",
];

/// Whether jsonwebtoken's `Header` can read this value of this member.
fn fits_jsonwebtoken(name: &str, value: &Option<Value>) -> bool {
    match value {
        None => false,
        Some(Value::Null) => true,
        Some(Value::String(_)) => name != "jwk" && name != "x5c",
        Some(Value::Array(items)) => name == "x5c" && items.iter().all(Value::is_string),
        // A well-formed embedded JWK would be read (and not used); the generated ones are all
        // incomplete, so jsonwebtoken refuses every object given here.
        Some(_) => false,
    }
}

// ---------------------------------------------------------------------------------------------
// The judges.
// ---------------------------------------------------------------------------------------------

/// What a judge made of a token: the caller it names, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Accepted {
    sub: String,
    scopes: BTreeSet<String>,
}

#[derive(Debug)]
enum Verdict {
    Accepted(Accepted),
    Refused(&'static str),
}

impl Verdict {
    fn accepted(&self) -> bool {
        matches!(self, Self::Accepted(_))
    }
    fn refused_for(&self, reasons: &[&str]) -> bool {
        matches!(self, Self::Refused(why) if reasons.contains(why))
    }
}

#[derive(Debug)]
enum Reference {
    Accepted(Accepted),
    /// `decode_header` failed: the header is not one jsonwebtoken reads.
    HeaderRefused(ErrorKind),
    /// The harness found no key: `alg` not configured, no such `kid`, no single key for the alg
    /// (the reason is shown in failure messages).
    NoKey(#[allow(dead_code)] &'static str),
    Refused(ErrorKind),
}

/// The claims the reference decodes into: what a service reads from a token.
#[derive(Deserialize)]
struct ReferenceClaims {
    sub: String,
    #[serde(default)]
    scope: Option<String>,
}

/// One configuration, judged by both sides.
struct Judge {
    name: &'static str,
    ours: Arc<Verifier>,
    allowed: Vec<Algorithm>,
    secret: Option<Vec<u8>>,
    jwks: Option<JwkSet>,
}

impl Judge {
    async fn ours(&self, token: &str) -> Verdict {
        match self.ours.verify(token).await {
            Ok(caller) => Verdict::Accepted(Accepted {
                sub: caller.sub,
                scopes: caller.scopes.into_iter().collect(),
            }),
            Err(AuthError::InvalidToken(why)) => Verdict::Refused(why),
            Err(other) => panic!("{}: not a token verdict: {other:?}", self.name),
        }
    }

    /// jsonwebtoken's verdict, set up like ours: the same algorithms, secret and key set, the
    /// issuer, audience and leeway, `exp`, `sub`, `iss` and `aud` required, `nbf` checked. Key
    /// selection is the harness's (jsonwebtoken has none); it follows the contract: HS256 uses the
    /// secret, whatever the `kid`; another alg uses the key its `kid` names, or without a `kid`
    /// the only key of its family.
    fn reference(&self, token: &str) -> Reference {
        let header = match jsonwebtoken::decode_header(token) {
            Ok(header) => header,
            Err(error) => return Reference::HeaderRefused(error.into_kind()),
        };
        if !self.allowed.contains(&header.alg) {
            return Reference::NoKey("alg not configured");
        }
        let key = if header.alg == Algorithm::HS256 {
            match &self.secret {
                Some(secret) => DecodingKey::from_secret(secret),
                None => return Reference::NoKey("no secret"),
            }
        } else {
            let Some(jwks) = &self.jwks else {
                return Reference::NoKey("no key set");
            };
            let jwk = match &header.kid {
                Some(kid) => jwks.find(kid),
                None => {
                    let family = header.alg.family();
                    let mut of_family = jwks.keys.iter().filter(|k| family_of(k) == family);
                    match (of_family.next(), of_family.next()) {
                        (Some(jwk), None) => Some(jwk),
                        _ => None,
                    }
                }
            };
            let Some(jwk) = jwk else {
                return Reference::NoKey("no key for kid");
            };
            match DecodingKey::from_jwk(jwk) {
                Ok(key) => key,
                Err(error) => return Reference::Refused(error.into_kind()),
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY;
        validation.validate_nbf = true;
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        match jsonwebtoken::decode::<ReferenceClaims>(token, &key, &validation) {
            Ok(data) => Reference::Accepted(Accepted {
                sub: data.claims.sub,
                scopes: data
                    .claims
                    .scope
                    .unwrap_or_default()
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            }),
            Err(error) => Reference::Refused(error.into_kind()),
        }
    }
}

fn family_of(jwk: &Jwk) -> AlgorithmFamily {
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
        AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
        AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
        _ => AlgorithmFamily::Hmac,
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and signers.
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Signer {
    name: &'static str,
    alg: Algorithm,
    kid: Option<&'static str>,
    /// `None`: `alg: none`, no signature.
    key: Option<EncodingKey>,
}

impl Signer {
    fn sign(&self, message: &[u8]) -> String {
        match &self.key {
            Some(key) => jsonwebtoken::crypto::sign(message, key, self.alg).unwrap(),
            None => String::new(),
        }
    }
}

fn rsa_key(rng: &mut StdRng) -> (EncodingKey, Vec<u8>) {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let private = rsa::RsaPrivateKey::new(rng, 2048).unwrap();
    let pem = private.to_pkcs8_pem(LineEnding::LF).unwrap();
    let public_der = private.to_public_key().to_public_key_der().unwrap();
    (
        EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
        public_der.as_bytes().to_vec(),
    )
}

fn ec_key(rng: &mut StdRng) -> EncodingKey {
    use p256::pkcs8::{EncodePrivateKey, LineEnding};
    let pem = p256::SecretKey::random(rng)
        .to_pkcs8_pem(LineEnding::LF)
        .unwrap();
    EncodingKey::from_ec_pem(pem.as_bytes()).unwrap()
}

fn ed_key(rng: &mut StdRng) -> EncodingKey {
    // PKCS#8 v1 wrapping of an Ed25519 seed.
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    der.extend_from_slice(&seed);
    EncodingKey::from_ed_der(&der)
}

fn published(alg: Algorithm, kid: &str, key: &EncodingKey) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    jwk
}

/// Every signer, with the weight it is picked with (RSA signing is slow in a debug build).
struct Keys {
    signers: Vec<(Signer, u32)>,
    jwks: JwkSet,
}

fn keys(rng: &mut StdRng) -> Keys {
    let (rsa1, rsa1_public_der) = rsa_key(rng);
    let (rsa2, _) = rsa_key(rng);
    let (rsa_outsider, _) = rsa_key(rng);
    let (ec1, ec_outsider) = (ec_key(rng), ec_key(rng));
    let (ed1, ed_outsider) = (ed_key(rng), ed_key(rng));
    let jwks = JwkSet {
        keys: vec![
            published(Algorithm::RS256, "rsa-1", &rsa1),
            published(Algorithm::RS256, "rsa-2", &rsa2),
            published(Algorithm::ES256, "ec-1", &ec1),
            published(Algorithm::EdDSA, "ed-1", &ed1),
        ],
    };
    let signer = |name, alg, kid, key| Signer {
        name,
        alg,
        kid,
        key: Some(key),
    };
    let hs = |secret: &[u8]| EncodingKey::from_secret(secret);
    let signers = vec![
        (
            signer("hs", Algorithm::HS256, None, hs(SECRET.as_bytes())),
            30,
        ),
        (signer("ec-1", Algorithm::ES256, Some("ec-1"), ec1), 18),
        (signer("ed-1", Algorithm::EdDSA, Some("ed-1"), ed1), 18),
        (signer("rsa-1", Algorithm::RS256, Some("rsa-1"), rsa1), 6),
        (signer("rsa-2", Algorithm::RS256, Some("rsa-2"), rsa2), 3),
        (
            signer("hs-other-secret", Algorithm::HS256, None, hs(b"another")),
            4,
        ),
        (
            signer("ec-outsider", Algorithm::ES256, Some("ec-1"), ec_outsider),
            4,
        ),
        (
            signer("ed-outsider", Algorithm::EdDSA, Some("ed-1"), ed_outsider),
            4,
        ),
        (
            signer(
                "rsa-outsider",
                Algorithm::RS256,
                Some("rsa-1"),
                rsa_outsider,
            ),
            2,
        ),
        // HS/RS confusion: the published RSA key used as an HMAC secret.
        (
            signer(
                "hs-with-rsa-public-key",
                Algorithm::HS256,
                Some("rsa-1"),
                hs(&rsa1_public_der),
            ),
            3,
        ),
        (
            Signer {
                name: "alg-none",
                alg: Algorithm::HS256,
                kid: None,
                key: None,
            },
            3,
        ),
    ];
    Keys { signers, jwks }
}

// ---------------------------------------------------------------------------------------------
// The generated case.
// ---------------------------------------------------------------------------------------------

/// One member of a JSON object, kept as written: the same name may come twice.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    /// The value as JSON text (not always valid JSON: `1e309`, a raw control character).
    value: String,
    /// Write the name with a `\u` escape (the same name to a JSON reader).
    escaped_name: bool,
}

#[derive(Debug, Clone, Default)]
struct Object(Vec<Member>);

impl Object {
    fn count(&self, name: &str) -> usize {
        self.0.iter().filter(|m| m.name == name).count()
    }
    /// Each value of `name`, `None` where it is not valid JSON.
    fn values(&self, name: &str) -> Vec<Option<Value>> {
        self.0
            .iter()
            .filter(|m| m.name == name)
            .map(|m| serde_json::from_str(&m.value).ok())
            .collect()
    }
    /// The value of a member named exactly once.
    fn single(&self, name: &str) -> Option<Value> {
        match self.values(name).as_slice() {
            [Some(value)] => Some(value.clone()),
            _ => None,
        }
    }
    fn set(&mut self, name: &str, value: String) {
        match self.0.iter_mut().find(|m| m.name == name) {
            Some(member) => member.value = value,
            None => self.push(name, value),
        }
    }
    fn push(&mut self, name: &str, value: String) {
        self.0.push(Member {
            name: name.to_owned(),
            value,
            escaped_name: false,
        });
    }
    fn remove(&mut self, name: &str) {
        self.0.retain(|m| m.name != name);
    }
    fn to_json(&self) -> Vec<u8> {
        let members: Vec<String> = self
            .0
            .iter()
            .map(|m| {
                let name = if m.escaped_name && !m.name.is_empty() {
                    let mut chars = m.name.chars();
                    let first = chars.next().unwrap();
                    format!("\"\\u{:04x}{}\"", first as u32, chars.as_str())
                } else {
                    Value::String(m.name.clone()).to_string()
                };
                format!("{name}:{}", m.value)
            })
            .collect();
        format!("{{{}}}", members.join(",")).into_bytes()
    }
}

struct Case {
    now: u64,
    header: Object,
    claims: Object,
    token: String,
    /// What was done to the token, for the failure message and the tallies.
    steps: Vec<String>,
}

fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// Values that keep a date clear of the acceptance boundaries (now - leeway for `exp`, now +
/// leeway for `nbf` and `iat`) by at least 5 s, so that the two judges, which read the clock a
/// moment apart and round fractions differently (we round down, jsonwebtoken to the nearest),
/// are never asked about the boundary second itself.
fn date(rng: &mut StdRng, now: u64) -> String {
    const OFFSETS: &[i64] = &[
        -1_000_000,
        -3_600,
        -70,
        -50,
        -5,
        0,
        30,
        50,
        70,
        3_600,
        1_000_000_000,
    ];
    let at = now as i64 + OFFSETS.choose(rng).unwrap();
    match rng.gen_range(0..10) {
        0 => format!("{at}.25"),
        1 => format!("{at}.75"),
        2 => format!("{:e}", at as f64),
        _ => at.to_string(),
    }
}

/// Unusual values for a NumericDate.
fn odd_date(rng: &mut StdRng, now: u64) -> String {
    [
        "-1".to_owned(),
        "-1.5".to_owned(),
        "-0".to_owned(),
        "0".to_owned(),
        "1e30".to_owned(),
        "18446744073709551615".to_owned(),
        "18446744073709551616".to_owned(),
        "1e309".to_owned(),
        json_string(&(now + 3600).to_string()),
        "true".to_owned(),
        "null".to_owned(),
        "[1]".to_owned(),
    ]
    .choose(rng)
    .unwrap()
    .clone()
}

/// A value of any JSON type (for "retyped").
fn any_type(rng: &mut StdRng) -> String {
    [
        "7",
        "1.5",
        "-3",
        "true",
        "false",
        "null",
        "\"7\"",
        "\"\"",
        "[]",
        "[\"x\"]",
        "{}",
        "{\"a\":1}",
    ]
    .choose(rng)
    .unwrap()
    .to_string()
}

/// A plausible or hostile value for a named member.
fn value_for(rng: &mut StdRng, name: &str, now: u64) -> String {
    let pick = |rng: &mut StdRng, options: &[&str]| options.choose(rng).unwrap().to_string();
    match name {
        "alg" => pick(
            rng,
            &[
                "\"HS256\"",
                "\"RS256\"",
                "\"ES256\"",
                "\"EdDSA\"",
                "\"none\"",
                "\"None\"",
                "\"HS384\"",
                "\"RS512\"",
                "\"PS256\"",
                "\"ES384\"",
                "\"hs256\"",
                "\"HS256 \"",
                "\"H\\u0053256\"",
            ],
        ),
        "kid" => pick(
            rng,
            &[
                "\"rsa-1\"",
                "\"rsa-2\"",
                "\"ec-1\"",
                "\"ed-1\"",
                "\"nope\"",
                "\"\"",
                "\"RSA-1\"",
                "\"ec-1\\u0000\"",
                "\"e\\u0063-1\"",
            ],
        ),
        "crit" => pick(rng, &["[\"exp\"]", "[]", "[\"b64\"]", "null", "\"exp\""]),
        "jwk" => pick(
            rng,
            &[
                "{\"kty\":\"nope\"}",
                "{\"kty\":\"oct\"}",
                "{\"kty\":\"EC\",\"crv\":\"P-256\"}",
            ],
        ),
        "x5c" => pick(rng, &["[\"MIIB\"]", "\"MIIB\"", "[1]"]),
        "typ" | "cty" | "jku" | "x5u" | "x5t" | "x5t#S256" | "enc" | "zip" | "url" | "nonce" => {
            pick(
                rng,
                &["\"JWT\"", "\"at+jwt\"", "\"DEF\"", "\"A128GCM\"", "\"\""],
            )
        }
        "sub" => {
            let long = |c: &str, n: usize| json_string(&c.repeat(n));
            match rng.gen_range(0..20) {
                0 => json_string(""),
                1 => long("x", 255),
                2 => long("x", 256),
                3 => long("é", 255),
                4 => long("é", 256),
                5 => "\"a\\u0000b\"".to_owned(),
                6 => "\"line\\nfeed\"".to_owned(),
                7 => "\"del\\u007f\"".to_owned(),
                8 => "\"next\\u0085line\"".to_owned(),
                // A raw control character inside a JSON string: not JSON.
                9 => "\"raw\ttab\"".to_owned(),
                10 => "\"\\ud800\"".to_owned(),
                11 => "\"\\ud83d\\ude00\"".to_owned(),
                12 => "\"J\\u00fcrgen\"".to_owned(),
                13 => json_string("a b"),
                14 => json_string("\u{a0}"),
                _ => pick(rng, &["\"alice\"", "\"bob-42\"", "\"Zoë\"", "\"用户\""]),
            }
        }
        "iss" => pick(
            rng,
            &[
                "\"lingo-news-dev\"",
                "\"lingo-news-dev \"",
                "\"Lingo-news-dev\"",
                "\"other\"",
                "\"lingo\\u002dnews-dev\"",
                "[\"lingo-news-dev\"]",
                "[\"lingo-news-dev\",\"x\"]",
                "[]",
                "[\"lingo-news-dev\",5]",
                "{\"iss\":\"lingo-news-dev\"}",
            ],
        ),
        "aud" => pick(
            rng,
            &[
                "\"lingo-news\"",
                "\"other\"",
                "\"lingo-news \"",
                "[\"lingo-news\"]",
                "[\"other\"]",
                "[]",
                "[\"other\",\"lingo-news\"]",
                "[\"lingo-news\",\"lingo-news\"]",
                "[\"lingo-news\",5]",
                "[null]",
                "[[\"lingo-news\"]]",
                "{\"aud\":\"lingo-news\"}",
            ],
        ),
        "exp" | "nbf" | "iat" => {
            if rng.gen_bool(0.7) {
                date(rng, now)
            } else {
                odd_date(rng, now)
            }
        }
        "scope" => pick(
            rng,
            &[
                "\"lingo:analytics\"",
                "\"openid lingo:analytics\"",
                "\"  a  b \"",
                "\"a\\tb\"",
                "\"a\\u00a0b\"",
                "\"\"",
                "[\"lingo:analytics\"]",
                "5",
                "null",
            ],
        ),
        _ => any_type(rng),
    }
}

const HEADER_NAMES: &[&str] = &[
    "alg", "kid", "typ", "crit", "cty", "jku", "jwk", "x5u", "x5c", "x5t", "x5t#S256", "enc",
    "zip", "url", "nonce", "b64", "extra",
];
const CLAIM_NAMES: &[&str] = &[
    "sub", "iss", "aud", "exp", "nbf", "iat", "scope", "jti", "extra",
];

/// Change, remove, repeat or retype one member, or write its name with an escape.
fn mutate_member(rng: &mut StdRng, object: &mut Object, names: &[&str], now: u64) -> String {
    let name = *names.choose(rng).unwrap();
    match rng.gen_range(0..6) {
        0 | 1 => {
            let value = value_for(rng, name, now);
            let step = format!("{name} = {value}");
            object.set(name, value);
            step
        }
        2 => {
            object.remove(name);
            format!("{name} removed")
        }
        3 => {
            let value = match object.values(name).first() {
                Some(_) if rng.gen_bool(0.5) => object
                    .0
                    .iter()
                    .find(|m| m.name == name)
                    .unwrap()
                    .value
                    .clone(),
                _ => value_for(rng, name, now),
            };
            let step = format!("{name} repeated as {value}");
            object.push(name, value);
            step
        }
        4 => {
            let value = any_type(rng);
            let step = format!("{name} retyped to {value}");
            object.set(name, value);
            step
        }
        _ => match object.0.iter_mut().find(|m| m.name == name) {
            Some(member) => {
                member.escaped_name = true;
                format!("{name} written with an escape")
            }
            None => "nothing".to_owned(),
        },
    }
}

/// A JSON text that is not the plain object: another type, trailing bytes, whitespace, ...
fn mutate_text(rng: &mut StdRng, json: Vec<u8>) -> (Vec<u8>, &'static str) {
    let inner = json[1..json.len() - 1].to_vec();
    let wrap = |before: &[u8], middle: &[u8], after: &[u8]| [before, middle, after].concat();
    match rng.gen_range(0..13) {
        0 => (wrap(b"[", &inner, b"]"), "object written as an array"),
        1 => (b"null".to_vec(), "null instead of an object"),
        2 => (b"\"x\"".to_vec(), "a string instead of an object"),
        3 => (Vec::new(), "empty"),
        4 => (wrap(b" \n\t", &json, b" \r\n"), "JSON whitespace around"),
        5 => (wrap(b"", &json, b"x"), "trailing byte"),
        6 => (wrap(b"", &json, b"{}"), "a second object"),
        7 => (wrap(b"{", &inner, b",}"), "trailing comma"),
        8 => (wrap("\u{feff}".as_bytes(), &json, b""), "byte-order mark"),
        9 => (json[..json.len() - 1].to_vec(), "truncated"),
        10 => (wrap(b"\x0c", &json, b""), "form feed before"),
        11 => (wrap(b"", &json, b"\xff"), "invalid UTF-8 after"),
        _ => (wrap(b"{", &inner, b"} "), "whitespace after"),
    }
}

/// Base64url text changed in a way a strict decoder refuses (or, for whitespace-free
/// re-encodings of equal bytes, accepts).
fn mutate_base64(rng: &mut StdRng, part: &str) -> (String, &'static str) {
    let mut text = part.to_owned();
    match rng.gen_range(0..8) {
        0 => {
            text.push_str(if rng.gen_bool(0.5) { "=" } else { "==" });
            (text, "padding")
        }
        1 => {
            // Set a bit the last character carries but the decoded bytes do not use.
            if text.len() % 4 == 2 || text.len() % 4 == 3 {
                let last = text.pop().unwrap();
                const ALPHABET: &[u8] =
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
                let index = ALPHABET.iter().position(|&c| c as char == last).unwrap();
                text.push(ALPHABET[index ^ 1] as char);
                (text, "non-canonical trailing bits")
            } else {
                (text, "nothing (no trailing bits)")
            }
        }
        2 => (
            text.replace('-', "+").replace('_', "/"),
            "standard alphabet",
        ),
        3 => {
            let at = rng.gen_range(0..=text.len());
            let space = *[" ", "\n", "\t", "\r"].choose(rng).unwrap();
            text.insert_str(at, space);
            (text, "whitespace inside")
        }
        4 => {
            let at = rng.gen_range(0..=text.len());
            let other = *["*", "%", "+", "/", "="].choose(rng).unwrap();
            text.insert_str(at, other);
            (text, "another byte inside")
        }
        5 => {
            text.pop();
            (text, "one character short")
        }
        6 => {
            let bytes = URL_SAFE_NO_PAD.decode(part).unwrap_or_default();
            (URL_SAFE.encode(bytes), "padded re-encoding")
        }
        _ => {
            let bytes = URL_SAFE_NO_PAD.decode(part).unwrap_or_default();
            (
                STANDARD_NO_PAD.encode(bytes),
                "standard-alphabet re-encoding",
            )
        }
    }
}

/// An ES256 signature (r || s, 32 bytes each) as ASN.1 DER, the form JWS does not use.
fn der_signature(fixed: &[u8]) -> Vec<u8> {
    let integer = |bytes: &[u8]| {
        let mut bytes: Vec<u8> = bytes.iter().copied().skip_while(|&b| b == 0).collect();
        if bytes.first().is_none_or(|&b| b & 0x80 != 0) {
            bytes.insert(0, 0);
        }
        [vec![0x02, bytes.len() as u8], bytes].concat()
    };
    let body = [integer(&fixed[..32]), integer(&fixed[32..])].concat();
    [vec![0x30, body.len() as u8], body].concat()
}

fn pick_signer<'k>(rng: &mut StdRng, keys: &'k Keys) -> &'k Signer {
    &keys
        .signers
        .choose_weighted(rng, |(_, weight)| *weight)
        .unwrap()
        .0
}

/// A token: a valid one for a random signer, then up to four mutations.
fn generate(rng: &mut StdRng, keys: &Keys) -> Case {
    let now = jsonwebtoken::get_current_timestamp();
    let signer = pick_signer(rng, keys);
    let mut steps = vec![format!("signed by {}", signer.name)];
    let alg_name = match signer.key {
        None => "none",
        Some(_) => match signer.alg {
            Algorithm::HS256 => "HS256",
            Algorithm::RS256 => "RS256",
            Algorithm::ES256 => "ES256",
            _ => "EdDSA",
        },
    };

    let mut header = Object::default();
    if rng.gen_bool(0.5) {
        header.push("typ", json_string("JWT"));
    }
    header.push("alg", json_string(alg_name));
    if let Some(kid) = signer.kid
        && rng.gen_bool(0.85)
    {
        header.push("kid", json_string(kid));
    }

    let mut claims = Object::default();
    let sub = ["alice", "bob-42", "Zoë", "用户"].choose(rng).unwrap();
    claims.push("sub", json_string(sub));
    claims.push("iss", json_string(ISSUER));
    claims.push(
        "aud",
        if rng.gen_bool(0.6) {
            json_string(AUDIENCE)
        } else {
            format!("[\"other\",{}]", json_string(AUDIENCE))
        },
    );
    claims.push("exp", (now + 3600).to_string());
    if rng.gen_bool(0.6) {
        claims.push("iat", (now - 5).to_string());
    }
    if rng.gen_bool(0.3) {
        claims.push("nbf", (now - 5).to_string());
    }
    if rng.gen_bool(0.5) {
        claims.push("scope", json_string("openid lingo:analytics"));
    }
    if rng.gen_bool(0.2) {
        claims.push("jti", json_string("0193a1b2"));
    }
    match rng.gen_range(0..40) {
        // Past 8 KiB, and just under it.
        0 => claims.push("pad", json_string(&"p".repeat(MAX_TOKEN_BYTES))),
        1 => claims.push("pad", json_string(&"p".repeat(5_500))),
        // Parts around the size we decode on the stack (768 bytes), larger ones go to the heap.
        2 => claims.push("pad", json_string(&"p".repeat(rng.gen_range(600..800)))),
        3 => header.push("pad", json_string(&"p".repeat(rng.gen_range(650..800)))),
        _ => {}
    }

    let mutations = *[0, 1, 1, 1, 2, 2, 3, 4].choose(rng).unwrap();
    // Member mutations come first (then the text is written), text and base64 ones later.
    let kinds: Vec<u32> = (0..mutations).map(|_| rng.gen_range(0..10)).collect();
    for &kind in &kinds {
        match kind {
            0..=2 => steps.push(format!(
                "header: {}",
                mutate_member(rng, &mut header, HEADER_NAMES, now)
            )),
            3..=6 => steps.push(format!(
                "claims: {}",
                mutate_member(rng, &mut claims, CLAIM_NAMES, now)
            )),
            _ => {}
        }
    }
    let mut header_json = header.to_json();
    let mut claims_json = claims.to_json();
    if kinds.contains(&7) {
        let (part, json) = if rng.gen_bool(0.5) {
            ("header", &mut header_json)
        } else {
            ("claims", &mut claims_json)
        };
        let (text, step) = mutate_text(rng, std::mem::take(json));
        *json = text;
        steps.push(format!("{part} text: {step}"));
    }
    let mut header_part = URL_SAFE_NO_PAD.encode(&header_json);
    let mut claims_part = URL_SAFE_NO_PAD.encode(&claims_json);
    if kinds.contains(&8) {
        let (name, part) = if rng.gen_bool(0.5) {
            ("header", &mut header_part)
        } else {
            ("claims", &mut claims_part)
        };
        let (text, step) = mutate_base64(rng, part);
        *part = text;
        steps.push(format!("{name} base64: {step}"));
    }
    let signing_input = format!("{header_part}.{claims_part}");
    let mut signature = signer.sign(signing_input.as_bytes());
    let mut token = None;
    if kinds.contains(&9) {
        let bytes = URL_SAFE_NO_PAD.decode(&signature).unwrap_or_default();
        let step = match rng.gen_range(0..8) {
            0 if !bytes.is_empty() => {
                let mut bytes = bytes;
                let at = rng.gen_range(0..bytes.len());
                bytes[at] ^= 1 << rng.gen_range(0..8);
                signature = URL_SAFE_NO_PAD.encode(bytes);
                "a bit flipped".to_owned()
            }
            1 if !bytes.is_empty() => {
                signature = URL_SAFE_NO_PAD.encode(&bytes[..bytes.len() - 1]);
                "one byte short".to_owned()
            }
            2 => {
                signature.clear();
                "emptied".to_owned()
            }
            3 => {
                let other = pick_signer(rng, keys);
                signature = other.sign(signing_input.as_bytes());
                format!("made by {} instead", other.name)
            }
            4 if bytes.len() == 64 => {
                signature = URL_SAFE_NO_PAD.encode(der_signature(&bytes));
                "DER-encoded".to_owned()
            }
            5 => {
                let (text, step) = mutate_base64(rng, &signature);
                signature = text;
                format!("base64: {step}")
            }
            6 => {
                token = Some(match rng.gen_range(0..4) {
                    0 => signing_input.clone(),
                    1 => format!("{signing_input}.{signature}."),
                    2 => format!("{signing_input}.{signature}.{signature}"),
                    _ => format!("{signing_input}..{signature}"),
                });
                "parts added or taken away".to_owned()
            }
            _ => "kept".to_owned(),
        };
        steps.push(format!("signature: {step}"));
    }
    let token = token.unwrap_or_else(|| format!("{signing_input}.{signature}"));
    Case {
        now,
        header,
        claims,
        token,
        steps,
    }
}

// ---------------------------------------------------------------------------------------------
// The run.
// ---------------------------------------------------------------------------------------------

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn jwks_file(set: &JwkSet) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("differential-jwks-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&path, serde_json::to_string(set).unwrap()).unwrap();
    path
}

async fn judges(keys: &Keys, jwks_path: &std::path::Path) -> Vec<Judge> {
    let configure = |algs: &[&str]| AuthConfig {
        auth_algorithms: algs.iter().map(|s| s.to_string()).collect(),
        auth_hs256_secret: algs.contains(&"HS256").then(|| SECRET.to_owned()),
        auth_jwks_file: (algs != ["HS256"]).then(|| jwks_path.to_owned()),
        auth_leeway_secs: LEEWAY,
        ..AuthConfig::hs256(SECRET)
    };
    let mut judges = Vec::new();
    for (name, algs) in [
        ("all four", &["HS256", "RS256", "ES256", "EdDSA"][..]),
        ("HS256 only", &["HS256"][..]),
        ("RS256 and EdDSA", &["RS256", "EdDSA"][..]),
    ] {
        let config = configure(algs);
        assert_eq!(config.auth_issuer, ISSUER);
        assert_eq!(config.auth_audience, AUDIENCE);
        let allowed: Vec<Algorithm> = algs.iter().map(|a| a.parse().unwrap()).collect();
        judges.push(Judge {
            name,
            ours: Verifier::from_config(&config).await.unwrap(),
            secret: allowed
                .contains(&Algorithm::HS256)
                .then(|| SECRET.as_bytes().to_vec()),
            jwks: (algs != ["HS256"]).then(|| keys.jwks.clone()),
            allowed,
        });
    }
    judges
}

#[derive(Default)]
struct Tally {
    judged: u64,
    both_accepted: u64,
    both_refused: u64,
    excused: BTreeMap<&'static str, u64>,
}

#[tokio::test(flavor = "current_thread")]
async fn our_verifier_agrees_with_jsonwebtoken_on_generated_tokens() {
    let seed = env_u64("DIFFERENTIAL_SEED", DEFAULT_SEED);
    let cases = env_u64("DIFFERENTIAL_CASES", DEFAULT_CASES);
    let first = env_u64("DIFFERENTIAL_FIRST", 0);
    let keys = keys(&mut StdRng::seed_from_u64(seed));
    let jwks_path = jwks_file(&keys.jwks);
    let judges = judges(&keys, &jwks_path).await;
    let started = std::time::Instant::now();

    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for number in first..first + cases {
        // One generator per case, so that any case can be replayed on its own.
        let mut rng = StdRng::seed_from_u64(seed ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let case = generate(&mut rng, &keys);
        for judge in &judges {
            tally.judged += 1;
            let ours = judge.ours(&case.token).await;
            let reference = judge.reference(&case.token);
            let agreed = match (&ours, &reference) {
                (Verdict::Accepted(a), Reference::Accepted(b)) => {
                    tally.both_accepted += 1;
                    a == b
                }
                (Verdict::Refused(_), Reference::Accepted(_)) | (Verdict::Accepted(_), _) => {
                    match EXCEPTIONS
                        .iter()
                        .find(|e| (e.applies)(&case, &ours, &reference))
                    {
                        Some(exception) => {
                            *tally.excused.entry(exception.name).or_default() += 1;
                            true
                        }
                        None => false,
                    }
                }
                (Verdict::Refused(_), _) => {
                    tally.both_refused += 1;
                    true
                }
            };
            if !agreed && failures.len() < 10 {
                failures.push(format!(
                    "seed {seed} case {number}, {}:\n  steps: {:?}\n  header: {}\n  claims: {}\n  \
                     token: {}\n  ours: {ours:?}\n  jsonwebtoken: {reference:?}",
                    judge.name,
                    case.steps,
                    String::from_utf8_lossy(&case.header.to_json()),
                    String::from_utf8_lossy(&case.claims.to_json()),
                    case.token,
                ));
            }
        }
    }
    let _ = std::fs::remove_file(&jwks_path);

    println!(
        "{cases} cases, {} judgements in {:.1?}: {} accepted by both, {} refused by both, \
         excused differences {:?}",
        tally.judged,
        started.elapsed(),
        tally.both_accepted,
        tally.both_refused,
        tally.excused,
    );
    assert!(
        failures.is_empty(),
        "disagreements:\n{}",
        failures.join("\n")
    );
    if cases >= DEFAULT_CASES {
        // The generator must produce both outcomes in earnest, and every listed exception must
        // still be needed (one that never fires is stale: delete it).
        assert!(
            tally.both_accepted * 10 > tally.judged,
            "too few valid tokens"
        );
        assert!(tally.both_refused * 10 > tally.judged, "too few refusals");
        for exception in EXCEPTIONS {
            assert!(
                tally.excused.contains_key(exception.name),
                "exception {:?} was never needed: {}",
                exception.name,
                exception.reason,
            );
        }
    }
}
