//! A compact JWS token taken apart once: its header and claims are decoded a single time each,
//! into the few members the contract checks. The verifier (verify.rs) decides what they must
//! satisfy; this module only reads them, strictly:
//!
//! - exactly three base64url parts without padding (RFC 7515 section 7.1);
//! - the header and the claims are JSON objects that name each member read here at most once (a
//!   second `alg` or `exp` is malformed, not "the last one wins");
//! - NumericDate claims are JSON numbers (RFC 7519 section 2), read as whole seconds into a u64
//!   (see `numeric_date`: before the epoch is 0, beyond the u64 range is its largest value).
//!
//! A gateway without a token cache does this for every request, so the usual token is read
//! without touching the heap: its parts are decoded into room on the caller's stack and its
//! string claims borrow from there.

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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

/// Stack room for one decoded part of a token: the usual header, claims and signature (up to
/// RS256 with a 4096-bit key) fit; a larger part is decoded onto the heap instead.
pub type PartRoom = [u8; PART_ROOM_BYTES];
pub const PART_ROOM_BYTES: usize = 768;

/// A token split into its parts, its header decoded; signature and claims are decoded on demand
/// (the signature is checked before the claims are read).
pub struct SignedToken<'a> {
    pub header: TokenHeader,
    /// `base64url(header) "." base64url(claims)`: what the signature covers.
    pub signing_input: &'a str,
    claims: &'a str,
    signature: &'a str,
}

impl<'a> SignedToken<'a> {
    pub fn parse(token: &'a str) -> Result<Self, Unreadable> {
        let mut parts = token.split('.');
        let (Some(header_part), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Unreadable::Header);
        };
        let mut room: PartRoom = [0; PART_ROOM_BYTES];
        let header_json = base64url_in(header_part, &mut room).ok_or(Unreadable::Header)?;
        Ok(Self {
            header: json_object(&header_json).ok_or(Unreadable::Header)?,
            signing_input: &token[..header_part.len() + 1 + claims.len()],
            claims,
            signature,
        })
    }

    pub fn signature<'r>(&self, room: &'r mut PartRoom) -> Result<Cow<'r, [u8]>, Unreadable> {
        base64url_in(self.signature, room).ok_or(Unreadable::Signature)
    }

    /// The claims, read only after the signature was found good. Their strings borrow from
    /// `room` where they can.
    pub fn claims<'r>(&self, room: &'r mut PartRoom) -> Result<Claims<'r>, Unreadable> {
        match base64url_in(self.claims, room).ok_or(Unreadable::Claims)? {
            Cow::Borrowed(json) => json_object(json),
            // Too large for the stack: the claims are read into owned strings.
            Cow::Owned(json) => json_object::<Claims>(&json).map(Claims::into_owned),
        }
        .ok_or(Unreadable::Claims)
    }
}

/// base64url without padding, as JWS (RFC 7515 section 2) and JWK (RFC 7518 section 6) use it.
pub fn base64url(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// [`base64url`] into `room` when the result fits there, else onto the heap.
fn base64url_in<'r>(text: &str, room: &'r mut [u8]) -> Option<Cow<'r, [u8]>> {
    if base64::decoded_len_estimate(text.len()) > room.len() {
        return base64url(text).map(Cow::Owned);
    }
    let len = URL_SAFE_NO_PAD.decode_slice(text, room).ok()?;
    Some(Cow::Borrowed(&room[..len]))
}

/// `bytes` as a JSON object of type `T`. serde would also read a struct from a JSON array, member
/// by position; a token's header and claims are objects, so anything else is refused first.
fn json_object<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(bytes).ok()
}

/// The header members the verifier reads; the others (`typ`, `cty`, an embedded `jwk`, ...) are
/// ignored, never trusted.
#[derive(Deserialize)]
pub struct TokenHeader {
    /// An `alg` jsonwebtoken does not know (`none` above all) makes the header unreadable.
    pub alg: Algorithm,
    #[serde(default)]
    pub kid: Option<String>,
    /// Present at all, whatever its value (`null` included), means rejected: no extension is
    /// understood.
    #[serde(default, deserialize_with = "present")]
    pub crit: Option<IgnoredAny>,
}

/// `Some` for a member that is there, even as `null` (plain `Option` reads `null` as absent).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<IgnoredAny>, D::Error> {
    IgnoredAny::deserialize(deserializer).map(Some)
}

/// The registered claims the contract checks, plus `scope`, before the verifier's checks. Every
/// member is optional here, so that a missing one is reported by name rather than as a parse
/// error. Strings borrow from the decoded JSON unless they hold escapes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Claims<'a> {
    #[serde(default, borrow, deserialize_with = "text")]
    pub sub: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub exp: Option<u64>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub nbf: Option<u64>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub iat: Option<u64>,
    #[serde(default, borrow, deserialize_with = "issuer")]
    pub iss: Option<Issuer<'a>>,
    /// `aud` as a single string or an array of strings, always read as a list.
    #[serde(default, borrow, deserialize_with = "audience")]
    pub aud: Option<Vec<Cow<'a, str>>>,
    #[serde(default, borrow, deserialize_with = "text")]
    pub scope: Option<Cow<'a, str>>,
}

impl Claims<'_> {
    fn into_owned(self) -> Claims<'static> {
        let owned = |text: Cow<'_, str>| Cow::Owned(text.into_owned());
        Claims {
            sub: self.sub.map(owned),
            exp: self.exp,
            nbf: self.nbf,
            iat: self.iat,
            iss: self.iss.map(|iss| match iss {
                Issuer::String(name) => Issuer::String(owned(name)),
                Issuer::NotAString => Issuer::NotAString,
            }),
            aud: self.aud.map(|names| names.into_iter().map(owned).collect()),
            scope: self.scope.map(owned),
        }
    }
}

/// The contract wants `iss` to be a single string; an array (even one holding the right issuer)
/// is refused with its own reason, so it is kept apart from a missing `iss`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issuer<'a> {
    String(Cow<'a, str>),
    NotAString,
}

/// A string borrowed from the JSON when it holds no escape, else copied.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// An optional string member (`null` counts as missing).
fn text<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    Ok(Option::<Text>::deserialize(deserializer)?.map(|text| text.0))
}

/// Seconds since the epoch. RFC 7519 allows a fraction; it is rounded down, so a fractional `exp`
/// never lasts longer than written (`nbf` and `iat` are compared with the leeway anyway). Any
/// number is a date: one before the epoch is the epoch (an `exp` there has expired), one past
/// `u64::MAX` seconds is `u64::MAX` (an `exp` there never comes). Anything else, `null` included,
/// is not (RFC 7519 4.1.4-4.1.6: the value MUST be a number): an `"nbf": null` is malformed, not
/// a token without `nbf` (jsonwebtoken refuses it too; found by tests/differential.rs).
fn numeric_date<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    struct Seconds;
    impl Visitor<'_> for Seconds {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number of seconds")
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
            Ok(Some(value))
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
            Ok(Some(u64::try_from(value).unwrap_or(0)))
        }
        fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
            if value.is_nan() {
                return Err(E::custom("not a date"));
            }
            // A float-to-integer `as` saturates: below 0 gives 0, past u64::MAX gives u64::MAX.
            Ok(Some(value.floor() as u64))
        }
    }
    deserializer.deserialize_any(Seconds)
}

/// `iss`: a string, or noted as something else (any other JSON value, skipped unread).
fn issuer<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Issuer<'a>>, D::Error> {
    struct AnyValue;
    impl<'de> Visitor<'de> for AnyValue {
        type Value = Option<Issuer<'de>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Issuer::String(Cow::Borrowed(text))))
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(Issuer::String(Cow::Owned(text.to_owned()))))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Some(Issuer::NotAString))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Some(Issuer::NotAString))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Some(Issuer::NotAString))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Some(Issuer::NotAString))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
            while items.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Some(Issuer::NotAString))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Some(Issuer::NotAString))
        }
    }
    deserializer.deserialize_any(AnyValue)
}

/// `aud`: one string or an array of strings (RFC 7519 section 4.1.3). Any other shape makes the
/// claims unreadable.
fn audience<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<Cow<'a, str>>>, D::Error> {
    struct Names;
    impl<'de> Visitor<'de> for Names {
        type Value = Option<Vec<Cow<'de, str>>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or an array of strings")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
            Ok(Some(vec![Cow::Borrowed(name)]))
        }
        fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
            Ok(Some(vec![Cow::Owned(name.to_owned())]))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
            let mut names = Vec::new();
            while let Some(Text(name)) = items.next_element::<Text>()? {
                names.push(name);
            }
            Ok(Some(names))
        }
    }
    deserializer.deserialize_any(Names)
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

    fn claims_of(claims: &str) -> Result<Claims<'static>, Unreadable> {
        let mut room = [0; PART_ROOM_BYTES];
        let token = token(r#"{"alg":"HS256"}"#, claims);
        Ok(SignedToken::parse(&token)?.claims(&mut room)?.into_owned())
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
        let mut room = [0; PART_ROOM_BYTES];
        assert_eq!(*parsed.signature(&mut room).unwrap(), *b"sig");
        assert_eq!(
            parsed.claims(&mut room).unwrap().sub.as_deref(),
            Some("ada")
        );
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
        assert_eq!(
            parsed.signature(&mut [0; PART_ROOM_BYTES]),
            Err(Unreadable::Signature)
        );
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
        for header in [
            r#"{"alg":"HS256","crit":["exp"]}"#,
            r#"{"alg":"HS256","crit":null}"#,
        ] {
            let crit = token(header, "{}");
            assert!(
                SignedToken::parse(&crit).unwrap().header.crit.is_some(),
                "{header}"
            );
        }
    }

    #[test]
    fn claims_are_read_strictly() {
        let full = claims_of(
            r#"{"sub":"ada","exp":10,"nbf":1.9,"iat":2,"iss":"me","aud":["a","b"],"scope":"x y","other":{"deep":[1]}}"#,
        )
        .unwrap();
        assert_eq!(
            full,
            Claims {
                sub: Some("ada".into()),
                exp: Some(10),
                nbf: Some(1),
                iat: Some(2),
                iss: Some(Issuer::String("me".into())),
                aud: Some(vec!["a".into(), "b".into()]),
                scope: Some("x y".into()),
            }
        );
        let empty = claims_of(r#"{"sub":null,"aud":null}"#).unwrap();
        assert_eq!((empty.sub, empty.exp, empty.aud), (None, None, None));
        assert_eq!(
            claims_of(r#"{"iss":["me"]}"#).unwrap().iss,
            Some(Issuer::NotAString)
        );
        assert_eq!(
            claims_of(r#"{"aud":"one"}"#).unwrap().aud,
            Some(vec![Cow::from("one")])
        );
        assert_eq!(
            claims_of(r#"{"sub":"a\u0041"}"#).unwrap().sub.as_deref(),
            Some("aA")
        );
        for (exp, read) in [
            ("-1", 0),
            ("-1.5", 0),
            ("1e30", u64::MAX),
            ("18446744073709551616", u64::MAX),
            ("1700000000.9", 1_700_000_000),
        ] {
            let claims = format!(r#"{{"exp":{exp}}}"#);
            assert_eq!(claims_of(&claims).unwrap().exp, Some(read), "{exp}");
        }
        for bad in [
            r#"{"exp":"10"}"#,
            // A date is a number: null is not "no date" (regression: `"nbf": null` was read as
            // a token without `nbf`, and accepted).
            r#"{"exp":null}"#,
            r#"{"nbf":null}"#,
            r#"{"iat":null}"#,
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

    #[test]
    fn plain_strings_are_borrowed_and_large_parts_still_read() {
        let mut room = [0; PART_ROOM_BYTES];
        let text = token(r#"{"alg":"HS256"}"#, r#"{"sub":"ada","iss":"me\u0021"}"#);
        let claims = SignedToken::parse(&text)
            .unwrap()
            .claims(&mut room)
            .unwrap();
        assert!(matches!(claims.sub, Some(Cow::Borrowed("ada"))));
        assert_eq!(claims.iss, Some(Issuer::String(Cow::Owned("me!".into()))));

        // Parts larger than the stack room are decoded onto the heap, with the same result.
        let scope = "s ".repeat(600);
        let big = format!(r#"{{"sub":"ada","scope":"{scope}"}}"#);
        let read = claims_of(&big).unwrap();
        assert_eq!(
            (read.sub.as_deref(), read.scope.as_deref()),
            (Some("ada"), Some(&*scope))
        );
        let long_signature = format!(
            "{}.{}",
            &text[..text.rfind('.').unwrap()],
            encode(&"x".repeat(1000))
        );
        let parsed = SignedToken::parse(&long_signature).unwrap();
        assert_eq!(parsed.signature(&mut room).unwrap().len(), 1000);
        let big_header = token(
            &format!(r#"{{"alg":"RS256","kid":"{}"}}"#, "k".repeat(900)),
            "{}",
        );
        assert_eq!(
            SignedToken::parse(&big_header)
                .unwrap()
                .header
                .kid
                .unwrap()
                .len(),
            900
        );
    }
}
