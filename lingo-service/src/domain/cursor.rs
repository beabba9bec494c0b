//! The analytics export's keyset cursor: the position after the last row of a page, written
//! with shared-auth's cursor codec so it is opaque to clients.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::http::cursor;

use crate::domain::text::is_storable;

/// Position after the last row of a page, in the export's order
/// `(updated_at, learner_id, language_code)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// `updated_at` in microseconds since the epoch (Postgres precision, so no row is skipped).
    #[serde(rename = "u")]
    pub updated_at_micros: i64,
    #[serde(rename = "l")]
    pub learner_id: String,
    #[serde(rename = "c")]
    pub language_code: String,
    /// The `updated_since` of the list it continues (microseconds), if any: a cursor continues its
    /// own list, not one with another filter.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub since_micros: Option<i64>,
}

/// A cursor given with an `updated_since` other than the one of its list.
#[derive(Debug, PartialEq, Eq)]
pub struct DifferentFilter;

impl Cursor {
    /// The position after a row, in the list filtered by `since`.
    pub fn after(
        updated_at: DateTime<Utc>,
        learner_id: &str,
        language_code: &str,
        since: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            updated_at_micros: updated_at.timestamp_micros(),
            learner_id: learner_id.to_owned(),
            language_code: language_code.to_owned(),
            since_micros: since.map(|since| since.timestamp_micros()),
        }
    }

    /// The `updated_since` of the list this cursor continues, given a request's own: the cursor's,
    /// when the request gives none or the same one; `Err` for another one.
    pub fn since(
        &self,
        asked: Option<DateTime<Utc>>,
    ) -> Result<Option<DateTime<Utc>>, DifferentFilter> {
        let own = self.since_micros.and_then(cursor::timestamp);
        match asked {
            None => Ok(own),
            Some(asked) if Some(asked.timestamp_micros()) == self.since_micros => Ok(own),
            Some(_) => Err(DifferentFilter),
        }
    }

    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    /// `None` for anything [`Cursor::encode`] cannot have written, including values that name
    /// nothing storable.
    pub fn decode(text: &str) -> Option<Self> {
        let cursor: Self = cursor::decode(text)?;
        let storable = is_storable(&cursor.learner_id) && is_storable(&cursor.language_code);
        let since_valid = cursor
            .since_micros
            .is_none_or(|micros| cursor::timestamp(micros).is_some());
        (storable && since_valid && cursor.updated_at().is_some()).then_some(cursor)
    }

    /// The cursor's time, when PostgreSQL can hold it (a forged cursor may name any integer).
    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.updated_at_micros)
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    #[test]
    fn cursor_round_trip() {
        let cursor = Cursor {
            updated_at_micros: 1_790_000_000_123_456,
            learner_id: "learner/ü 1".into(),
            language_code: "es".into(),
            since_micros: Some(1_780_000_000_000_000),
        };
        let text = cursor.encode();
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(Cursor::decode(&text), Some(cursor));
    }

    #[test]
    fn bad_cursors_do_not_decode() {
        let not_json = URL_SAFE_NO_PAD.encode(b"hello");
        let wrong_shape = URL_SAFE_NO_PAD.encode(br#"{"u":"x","l":"a","c":"es"}"#);
        let out_of_range = URL_SAFE_NO_PAD.encode(br#"{"u":9223372036854775807,"l":"a","c":"es"}"#);
        let nul = URL_SAFE_NO_PAD.encode(br#"{"u":0,"l":"a\u0000b","c":"es"}"#);
        // Inside chrono's range, before PostgreSQL's earliest timestamptz.
        let before_postgres =
            URL_SAFE_NO_PAD.encode(br#"{"u":-210866803200000001,"l":"a","c":"es"}"#);
        for text in [
            "",
            "!!!",
            "abc=",
            not_json.as_str(),
            wrong_shape.as_str(),
            out_of_range.as_str(),
            nul.as_str(),
            before_postgres.as_str(),
        ] {
            assert_eq!(Cursor::decode(text), None, "{text:?}");
        }
    }
}
