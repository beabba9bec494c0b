//! Opaque keyset cursors, written the same way by every service: base64url (no padding) of a
//! small JSON object, opaque to clients and easy to debug, and the rules every cursor shares.
//! What a cursor holds, and which list it belongs to, is the service's own business.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::http::paging::Paging;
use crate::http::problem::Problem;

/// The earliest `timestamptz` PostgreSQL can hold (4714-11-24 BC 00:00 UTC) in Unix
/// microseconds; chrono's latest time is earlier than PostgreSQL's latest, so only this end
/// needs a check.
const POSTGRES_MIN_MICROS: i64 = -210_866_803_200_000_000;

/// The cursor as the string a client passes back.
pub fn encode(cursor: &impl Serialize) -> String {
    // Serialising plain strings and integers cannot fail.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(cursor).unwrap_or_default())
}

/// The cursor a string names, or `None` for anything [`encode`] cannot have written (padding
/// is tolerated, since some clients add it back).
pub fn decode<T: DeserializeOwned>(text: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A cursor's timestamp (microseconds, PostgreSQL's precision), when PostgreSQL can hold it: a
/// forged cursor may name any integer, and a query with an out-of-range time would fail.
pub fn timestamp(micros: i64) -> Option<DateTime<Utc>> {
    if micros < POSTGRES_MIN_MICROS {
        return None;
    }
    DateTime::from_timestamp_micros(micros)
}

/// The query's `cursor`: an empty `cursor=` is the same as none (what a client sends when it
/// passes the previous page's `next_cursor` through a form or a URL template).
pub fn given(cursor: Option<&str>) -> Option<&str> {
    cursor.filter(|text| !text.is_empty())
}

/// The checked `limit` and `offset` of a list that pages by offset or by cursor, and the cursor
/// text to decode: `offset` and a non-empty `cursor` exclude each other (400 `invalid_query`),
/// and an empty `cursor=` is none ([`given`]).
pub fn paging_and_cursor(
    limit: Option<i64>,
    offset: Option<i64>,
    cursor: Option<&str>,
) -> Result<(Paging, Option<&str>), Problem> {
    let cursor = given(cursor);
    if offset.is_some() && cursor.is_some() {
        return Err(Problem::invalid_query(
            "give either offset or cursor, not both",
        ));
    }
    Ok((Paging::new(limit, offset)?, cursor))
}

/// A filter given with a cursor that is not the filter of the cursor's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherFilter;

/// The filter a cursor continues its list with: one given with the request must equal the
/// cursor's own, and one left out is taken from the cursor (a cursor continues its list as it
/// was asked for). [`OtherFilter`] when they differ; each service answers it as its
/// `invalid_cursor`.
pub fn continued_filter(
    given: Option<&str>,
    own: Option<&str>,
) -> Result<Option<String>, OtherFilter> {
    match given {
        Some(given) if own != Some(given) => Err(OtherFilter),
        _ => Ok(own.map(str::to_owned)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_url_safe_and_tolerates_padding() {
        let text = encode(&("a/b+c?", 42));
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(decode::<(String, i64)>(&text), Some(("a/b+c?".into(), 42)));
        assert_eq!(
            decode::<(String, i64)>(&format!("{text}==")),
            Some(("a/b+c?".into(), 42))
        );
        assert_eq!(decode::<(String, i64)>("not base64!"), None);
    }

    #[test]
    fn timestamps_outside_postgres_are_refused() {
        assert!(timestamp(0).is_some());
        assert!(timestamp(POSTGRES_MIN_MICROS).is_some());
        assert!(timestamp(POSTGRES_MIN_MICROS - 1).is_none());
        assert!(timestamp(i64::MIN).is_none());
        assert!(timestamp(i64::MAX).is_none());
    }

    #[test]
    fn an_empty_cursor_is_no_cursor() {
        assert_eq!(given(Some("")), None);
        assert_eq!(given(Some("abc")), Some("abc"));
        assert_eq!(given(None), None);
    }

    #[test]
    fn offset_and_a_cursor_exclude_each_other() {
        let code = |offset, cursor| paging_and_cursor(None, offset, cursor).map_err(|p| p.code);
        assert_eq!(code(Some(0), Some("abc")), Err("invalid_query".into()));
        assert_eq!(
            code(Some(40), Some("")).map(|(p, c)| (p.offset, c)),
            Ok((40, None))
        );
        assert_eq!(code(None, Some("abc")).map(|(_, c)| c), Ok(Some("abc")));
        assert!(paging_and_cursor(Some(0), None, None).is_err());
    }

    #[test]
    fn a_filter_given_with_a_cursor_must_be_the_cursors() {
        assert_eq!(continued_filter(None, Some("es")), Ok(Some("es".into())));
        assert_eq!(
            continued_filter(Some("es"), Some("es")),
            Ok(Some("es".into()))
        );
        assert_eq!(continued_filter(None, None), Ok(None));
        assert_eq!(continued_filter(Some("de"), Some("es")), Err(OtherFilter));
        assert_eq!(continued_filter(Some("es"), None), Err(OtherFilter));
    }
}
