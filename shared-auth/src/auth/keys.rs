//! Verification keys, parsed once when they are loaded rather than once per token: the HMAC key
//! of the HS256 secret, and the public keys of a JWKS (RSA, P-256, Ed25519) as aws-lc-rs keys.
//! Each key belongs to exactly one algorithm, and a key is only ever asked to verify tokens of
//! that algorithm (verify.rs and jwks.rs see to it).

use aws_lc_rs::hmac;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ED25519, ParsedPublicKey, RSA_PKCS1_2048_8192_SHA256,
    RsaPublicKeyComponents,
};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};

use crate::auth::token::base64url;

/// A key ready to check signatures.
// Each key exists once, behind an `Arc`: the size of the HMAC variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum VerifyingKey {
    /// HS256: the shared secret.
    Hmac(hmac::Key),
    /// RS256 (PKCS#1 v1.5, 2048 to 8192 bits), ES256 (P-256, the 64-byte JWS signature form) or
    /// EdDSA (Ed25519).
    Public(ParsedPublicKey),
}

impl VerifyingKey {
    pub fn hs256(secret: &[u8]) -> Self {
        Self::Hmac(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// The public key of a JWK of type RSA, EC P-256 or OKP Ed25519; `None` for any other key or
    /// for components that do not form a valid key.
    pub fn from_public_jwk(jwk: &Jwk) -> Option<Self> {
        let parsed = match &jwk.algorithm {
            AlgorithmParameters::RSA(rsa) => {
                let n = base64url(&rsa.n)?;
                let e = base64url(&rsa.e)?;
                RsaPublicKeyComponents { n, e }
                    .to_parsed_public_key(&RSA_PKCS1_2048_8192_SHA256)
                    .ok()?
            }
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                // The uncompressed point: 0x04, then x and y.
                let mut point = vec![0x04];
                point.extend(base64url(&ec.x)?);
                point.extend(base64url(&ec.y)?);
                ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point).ok()?
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                ParsedPublicKey::new(&ED25519, base64url(&okp.x)?).ok()?
            }
            _ => return None,
        };
        Some(Self::Public(parsed))
    }

    /// Whether `signature` signs `message` under this key. HMAC tags are compared in constant
    /// time.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            Self::Hmac(key) => hmac::verify(key, message, signature).is_ok(),
            Self::Public(key) => key.verify_sig(message, signature).is_ok(),
        }
    }
}
