//! Keyset cursors for article lists: an opaque string that names the last row served (its
//! `published_at` and `id`) and the list it came from (which list, which filters), so the next
//! page continues the same ordering and filters.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::http::cursor;
use shared_auth::{Paging, Problem};

use crate::domain::ids::can_exist;
use crate::error::ErrorCode;

/// Which list a cursor belongs to; a cursor of one list is refused by the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListKind {
    #[serde(rename = "a")]
    Articles,
    #[serde(rename = "f")]
    Feed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    #[serde(rename = "k")]
    pub kind: ListKind,
    /// `published_at` of the last row, in microseconds (Postgres' precision).
    #[serde(rename = "t")]
    pub published_at_micros: i64,
    #[serde(rename = "i")]
    pub id: String,
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    #[serde(rename = "j", default, skip_serializing_if = "Option::is_none")]
    pub journalist_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("the cursor does not decode")]
    Undecodable,
    #[error("the cursor belongs to another list or other filters")]
    OtherList,
}

impl Cursor {
    /// The cursor's time, when Postgres can hold it (a forged cursor may name any integer).
    pub fn published_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.published_at_micros)
    }

    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    pub fn decode(text: &str) -> Result<Self, CursorError> {
        let cursor: Self = cursor::decode(text).ok_or(CursorError::Undecodable)?;
        let ids = [
            Some(&cursor.id),
            cursor.organization_id.as_ref(),
            cursor.journalist_id.as_ref(),
        ];
        let storable = ids.into_iter().flatten().all(|id| can_exist(id));
        if cursor.published_at().is_none() || cursor.id.is_empty() || !storable {
            return Err(CursorError::Undecodable);
        }
        Ok(cursor)
    }

    /// Checks the cursor against the list being asked for. Filters given with the request must
    /// equal the cursor's; filters left out are taken from the cursor.
    pub fn resolve_filter(
        &self,
        kind: ListKind,
        organization_id: Option<&str>,
        journalist_id: Option<&str>,
    ) -> Result<(Option<String>, Option<String>), CursorError> {
        let same = |given: Option<&str>, own: &Option<String>| {
            given.is_none_or(|given| own.as_deref() == Some(given))
        };
        if self.kind != kind
            || !same(organization_id, &self.organization_id)
            || !same(journalist_id, &self.journalist_id)
        {
            return Err(CursorError::OtherList);
        }
        Ok((self.organization_id.clone(), self.journalist_id.clone()))
    }
}

impl From<CursorError> for Problem {
    fn from(error: CursorError) -> Self {
        Problem::from_code(ErrorCode::InvalidCursor).with_detail(error.to_string())
    }
}

/// Offset or cursor paging of an article list, checked against the contract.
pub struct ListPaging {
    pub paging: Paging,
    pub cursor: Option<Cursor>,
}

impl ListPaging {
    pub fn parse(
        limit: Option<i64>,
        offset: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<Self, Problem> {
        let cursor = cursor::given(cursor);
        if offset.is_some() && cursor.is_some() {
            return Err(Problem::invalid_query(
                "give either offset or cursor, not both",
            ));
        }
        let paging = Paging::new(limit, offset)?;
        let cursor = cursor.map(Cursor::decode).transpose()?;
        Ok(Self { paging, cursor })
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::*;

    fn cursor(org: Option<&str>) -> Cursor {
        Cursor {
            kind: ListKind::Articles,
            published_at_micros: 1_763_700_000_123_456,
            id: "art-000042".into(),
            organization_id: org.map(str::to_owned),
            journalist_id: None,
        }
    }

    #[test]
    fn offset_and_cursor_exclude_each_other() {
        let text = cursor(None).encode();
        let both = ListPaging::parse(None, Some(0), Some(&text));
        assert_eq!(both.err().map(|p| p.code), Some("invalid_query".into()));
        let bad = ListPaging::parse(None, None, Some("!!!"));
        assert_eq!(bad.err().map(|p| p.code), Some("invalid_cursor".into()));
        let good = ListPaging::parse(Some(5), None, Some(&text)).ok();
        assert_eq!(good.and_then(|p| p.cursor), Some(cursor(None)));
    }

    #[test]
    fn round_trips_and_is_url_safe() {
        let original = cursor(Some("org-001"));
        let text = original.encode();
        assert!(
            text.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(Cursor::decode(&text), Ok(original));
    }

    #[test]
    fn garbage_does_not_decode() {
        // Then well-formed cursors whose id holds a NUL, or whose time Postgres cannot hold.
        let nul = URL_SAFE_NO_PAD.encode(br#"{"k":"a","t":1,"i":"a\u0000"}"#);
        let ancient = URL_SAFE_NO_PAD.encode(br#"{"k":"a","t":-210866803200000001,"i":"a"}"#);
        let far = URL_SAFE_NO_PAD.encode(br#"{"k":"a","t":9223372036854775807,"i":"a"}"#);
        let texts = ["", "!!!", "bm90IGpzb24", "e30", "eyJrIjoieCJ9"];
        for text in texts.iter().copied().chain([&*nul, &*ancient, &*far]) {
            assert_eq!(
                Cursor::decode(text),
                Err(CursorError::Undecodable),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_earliest_time_postgres_holds_is_still_a_cursor() {
        let mut c = cursor(None);
        // The earliest timestamptz PostgreSQL can hold.
        c.published_at_micros = -210_866_803_200_000_000;
        assert_eq!(Cursor::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn filters_come_from_the_cursor_and_must_not_contradict_it() {
        let c = cursor(Some("org-001"));
        let table: [(ListKind, Option<&str>, Option<&str>, bool); 5] = [
            (ListKind::Articles, None, None, true),
            (ListKind::Articles, Some("org-001"), None, true),
            (ListKind::Articles, Some("org-002"), None, false),
            (ListKind::Articles, None, Some("jrn-0001"), false),
            (ListKind::Feed, None, None, false),
        ];
        for (kind, org, jrn, ok) in table {
            let got = c.resolve_filter(kind, org, jrn);
            assert_eq!(got.is_ok(), ok, "{kind:?} {org:?} {jrn:?}");
            if ok {
                assert_eq!(got, Ok((Some("org-001".into()), None)));
            }
        }
    }
}
