//! A compact JWS token taken apart once: its header and claims are decoded a single time each,
//! borrowing from the token where they can. The verifier (verify.rs) decides what they must
//! satisfy; this module only reads them, strictly:
//!
//! - exactly three base64url parts without padding (RFC 7515 section 7.1);
//! - the header and the claims are JSON objects, each member at most once (a second `alg` or
//!   `exp` is malformed, not "the last one wins");
//! - NumericDate claims are non-negative numbers that fit in a u64 (RFC 7519 section 2).

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};

/// Why a token could not even be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Not three parts, not base64url, or a header that is not JSON with a known `alg`.
    Header,
    /// The signature part is not base64url.
    Signature,
    /// The claims are not base64url, not a JSON object, or a member has the wrong type.
    Claims,
}

/// A token split into its parts, its header decoded; signature and claims are decoded on demand
/// (the signature is checked before the claims are read).
pub struct SignedToken<'a> {
    pub header: TokenHeader<'a>,
    /// `base64url(header) "." base64url(claims)`: what the signature covers.
    pub signing_input: &'a str,
    claims: &'a str,
    signature: &'a str,
}

impl<'a> SignedToken<'a> {
    pub fn parse(token: &'a str) -> Result<Self, Unreadable> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Unreadable::Header);
        };
        let header_json = decode_part(header).ok_or(Unreadable::Header)?;
        let header = json_object::<TokenHeader>(&header_json)
            .ok_or(Unreadable::Header)?
            .into_owned_strings();
        Ok(Self {
            header,
            signing_input: &token[..header_len(token)],
            claims,
            signature,
        })
    }

    pub fn signature(&self) -> Result<Vec<u8>, Unreadable> {
        decode_part(self.signature).ok_or(Unreadable::Signature)
    }

    /// The claims, read only after the signature was found good.
    pub fn claims(&self) -> Result<OwnedClaims, Unreadable> {
        let json = decode_part(self.claims).ok_or(Unreadable::Claims)?;
        let claims = json_object::<TokenClaims>(&json).ok_or(Unreadable::Claims)?;
        Ok(claims.into_owned())
    }
}

/// The length of `header.claims` in a token already known to have three parts.
fn header_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(token.len())
}

fn decode_part(part: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(part).ok()
}

/// `bytes` as a JSON object of type `T`. serde would also read a struct from a JSON array, member
/// by position; a token's header and claims are objects, so anything else is refused first.
fn json_object<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Option<T> {
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(bytes).ok()
}

/// The header members the verifier reads; the others (`typ`, `cty`, an embedded `jwk`, ...) are
/// ignored, never trusted.
#[derive(Deserialize)]
pub struct TokenHeader<'a> {
    /// An `alg` jsonwebtoken does not know (`none` above all) makes the header unreadable.
    pub alg: Algorithm,
    #[serde(default, borrow)]
    pub kid: Option<Cow<'a, str>>,
    /// Present at all (any value but `null`) means rejected: no extension is understood.
    #[serde(default)]
    pub crit: Option<IgnoredAny>,
}

impl TokenHeader<'_> {
    /// The header no longer borrows the decoded bytes it was read from.
    fn into_owned_strings(self) -> TokenHeader<'static> {
        TokenHeader {
            alg: self.alg,
            kid: self.kid.map(|kid| Cow::Owned(kid.into_owned())),
            crit: self.crit,
        }
    }
}

/// The registered claims the contract checks, plus `scope`. Every member is optional here, so
/// that a missing one is reported by name rather than as a parse error.
#[derive(Deserialize)]
struct TokenClaims<'a> {
    #[serde(default, borrow)]
    sub: Option<Cow<'a, str>>,
    #[serde(default)]
    exp: Option<NumericDate>,
    #[serde(default)]
    nbf: Option<NumericDate>,
    #[serde(default)]
    iat: Option<NumericDate>,
    #[serde(default, borrow)]
    iss: Option<MaybeString<'a>>,
    #[serde(default, borrow)]
    aud: Option<Audience<'a>>,
    #[serde(default, borrow)]
    scope: Option<Cow<'a, str>>,
}

impl TokenClaims<'_> {
    fn into_owned(self) -> OwnedClaims {
        OwnedClaims {
            sub: self.sub.map(Cow::into_owned),
            exp: self.exp.map(|date| date.0),
            nbf: self.nbf.map(|date| date.0),
            iat: self.iat.map(|date| date.0),
            iss: self.iss.map(|iss| match iss.0 {
                Some(iss) => Issuer::String(iss.into_owned()),
                None => Issuer::NotAString,
            }),
            aud: self
                .aud
                .map(|aud| aud.0.into_iter().map(Cow::into_owned).collect()),
            scope: self.scope.map(Cow::into_owned),
        }
    }
}

/// The claims of a token whose signature is good, before the verifier's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedClaims {
    pub sub: Option<String>,
    pub exp: Option<u64>,
    pub nbf: Option<u64>,
    pub iat: Option<u64>,
    pub iss: Option<Issuer>,
    /// `aud` as a single string or an array of strings, always read as a list.
    pub aud: Option<Vec<String>>,
    pub scope: Option<String>,
}

/// The contract wants `iss` to be a single string; an array (even one holding the right issuer)
/// is refused with its own reason, so it is kept apart from a missing `iss`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issuer {
    String(String),
    NotAString,
}

/// Seconds since the epoch. RFC 7519 allows a fraction; it is rounded down, so a fractional `exp`
/// never lasts longer than written (`nbf` and `iat` are compared with the leeway anyway).
struct NumericDate(u64);

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Seconds;
        impl Visitor<'_> for Seconds {
            type Value = NumericDate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative number of seconds")
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<NumericDate, E> {
                Ok(NumericDate(value))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<NumericDate, E> {
                u64::try_from(value)
                    .map(NumericDate)
                    .map_err(|_| E::custom("negative date"))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<NumericDate, E> {
                // u64::MAX as f64 rounds up to 2^64, so `<` keeps the cast exact-or-below.
                if value.is_finite() && value >= 0.0 && value < u64::MAX as f64 {
                    Ok(NumericDate(value.floor() as u64))
                } else {
                    Err(E::custom("date out of range"))
                }
            }
        }
        deserializer.deserialize_any(Seconds)
    }
}

/// `Some` for a JSON string, `None` for any other value (skipped without being kept).
struct MaybeString<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeString<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = MaybeString<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeString(Some(Cow::Borrowed(text))))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(MaybeString(Some(Cow::Owned(text.to_owned()))))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeString(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeString(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeString(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeString(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
                while items.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeString(None))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeString(None))
            }
        }
        deserializer.deserialize_any(Text)
    }
}

/// `aud`: one string or an array of strings (RFC 7519 section 4.1.3), read as a list. Any other
/// shape is unreadable claims.
struct Audience<'a>(Vec<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Audience<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> Visitor<'de> for Names {
            type Value = Audience<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }
            fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
                Ok(Audience(vec![Cow::Borrowed(name)]))
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(Audience(vec![Cow::Owned(name.to_owned())]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = items.next_element::<Cow<'de, str>>()? {
                    names.push(name);
                }
                Ok(Audience(names))
            }
        }
        deserializer.deserialize_any(Names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    fn token(header: &str, claims: &str) -> String {
        format!("{}.{}.c2ln", encode(header), encode(claims))
    }

    fn claims_of(claims: &str) -> Result<OwnedClaims, Unreadable> {
        SignedToken::parse(&token(r#"{"alg":"HS256"}"#, claims))?.claims()
    }

    #[test]
    fn the_parts_are_taken_apart_once() {
        let text = token(
            r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#,
            r#"{"sub":"ada"}"#,
        );
        let parsed = SignedToken::parse(&text).unwrap();
        assert_eq!(parsed.header.alg, Algorithm::RS256);
        assert_eq!(parsed.header.kid.as_deref(), Some("k1"));
        assert!(parsed.header.crit.is_none());
        assert_eq!(parsed.signing_input, &text[..text.rfind('.').unwrap()]);
        assert_eq!(parsed.signature().unwrap(), b"sig");
        assert_eq!(parsed.claims().unwrap().sub.as_deref(), Some("ada"));
    }

    #[test]
    fn anything_but_three_unpadded_base64url_parts_is_unreadable() {
        let good = token(r#"{"alg":"HS256"}"#, "{}");
        for bad in [
            String::new(),
            "abc".to_owned(),
            "a.b".to_owned(),
            format!("{good}.more"),
            format!("{}=.{}.c2ln", encode(r#"{"alg":"HS256"}"#), encode("{}")),
            format!("{}.{}.c2ln", "eyJhbGciOiJIUzI1NiJ9+", encode("{}")),
        ] {
            assert_eq!(
                SignedToken::parse(&bad).err(),
                Some(Unreadable::Header),
                "{bad}"
            );
        }
        let padded_signature = format!("{good}=");
        let parsed = SignedToken::parse(&padded_signature).unwrap();
        assert_eq!(parsed.signature(), Err(Unreadable::Signature));
    }

    #[test]
    fn a_header_must_be_one_object_with_a_known_alg_given_once() {
        for header in [
            r#"{"alg":"none"}"#,
            r#"{"typ":"JWT"}"#,
            r#"["HS256"]"#,
            r#"{"alg":"HS256","alg":"none"}"#,
            r#"{"alg":"HS256","kid":7}"#,
            "not json",
        ] {
            assert_eq!(
                SignedToken::parse(&token(header, "{}")).err(),
                Some(Unreadable::Header),
                "{header}"
            );
        }
        let crit = token(r#"{"alg":"HS256","crit":["exp"]}"#, "{}");
        assert!(SignedToken::parse(&crit).unwrap().header.crit.is_some());
    }

    #[test]
    fn claims_are_read_strictly() {
        let full = claims_of(
            r#"{"sub":"ada","exp":10,"nbf":1.9,"iat":2,"iss":"me","aud":["a","b"],"scope":"x y","other":{"deep":[1]}}"#,
        )
        .unwrap();
        assert_eq!(
            full,
            OwnedClaims {
                sub: Some("ada".into()),
                exp: Some(10),
                nbf: Some(1),
                iat: Some(2),
                iss: Some(Issuer::String("me".into())),
                aud: Some(vec!["a".into(), "b".into()]),
                scope: Some("x y".into()),
            }
        );
        let empty = claims_of(r#"{"sub":null,"exp":null}"#).unwrap();
        assert_eq!((empty.sub, empty.exp, empty.aud), (None, None, None));
        assert_eq!(
            claims_of(r#"{"iss":["me"]}"#).unwrap().iss,
            Some(Issuer::NotAString)
        );
        assert_eq!(
            claims_of(r#"{"aud":"one"}"#).unwrap().aud,
            Some(vec!["one".to_owned()])
        );
        assert_eq!(
            claims_of(r#"{"sub":"a\u0041"}"#).unwrap().sub.as_deref(),
            Some("aA")
        );
        for bad in [
            r#"{"exp":-1}"#,
            r#"{"exp":"10"}"#,
            r#"{"exp":1e30}"#,
            r#"{"sub":7}"#,
            r#"{"aud":[1]}"#,
            r#"{"aud":{}}"#,
            r#"{"scope":["a"]}"#,
            r#"{"sub":"a","sub":"b"}"#,
            r#"["ada",10]"#,
            "null",
        ] {
            assert_eq!(claims_of(bad).err(), Some(Unreadable::Claims), "{bad}");
        }
    }
}
