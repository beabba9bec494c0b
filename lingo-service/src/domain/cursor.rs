//! Keyset cursors, written with shared-auth's cursor codec so they are opaque to clients: the
//! analytics export's [`Cursor`], and the [`ListCursor`] of the paged lists (phrases, the
//! caller's study sessions and recommendations), which names its list and filters so that a
//! cursor only ever continues the list it came from.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::http::cursor;
use shared_auth::{Page, Paging, Problem};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::domain::cursor_only;
use crate::domain::text::is_storable;
use crate::error::ErrorCode;

/// Position after the last row of a page, in the export's order
/// `(updated_at, learner_id, language_code)`. No other field is accepted, so that no cursor
/// decodes as both this and the phrase-progress export's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

/// A cursor given with other filters (an `updated_since`, a language) than those of its list.
#[derive(Debug, PartialEq, Eq)]
pub struct DifferentFilter;

/// The `updated_since` an export cursor continues (`since_micros`, as the cursor holds it), given
/// a request's own: the cursor's, when the request gives none or the same one; `Err` for another.
pub fn continued_since(
    since_micros: Option<i64>,
    asked: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, DifferentFilter> {
    let own = since_micros.and_then(cursor::timestamp);
    match asked {
        None => Ok(own),
        Some(asked) if Some(asked.timestamp_micros()) == since_micros => Ok(own),
        Some(_) => Err(DifferentFilter),
    }
}

/// Whether an export cursor's `since_micros` is one PostgreSQL can hold (or none): a forged
/// cursor may name any integer.
pub fn since_storable(since_micros: Option<i64>) -> bool {
    since_micros.is_none_or(|micros| cursor::timestamp(micros).is_some())
}

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
        continued_since(self.since_micros, asked)
    }

    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    /// `None` for anything [`Cursor::encode`] cannot have written, including values that name
    /// nothing storable.
    pub fn decode(text: &str) -> Option<Self> {
        let cursor: Self = cursor::decode(text)?;
        let storable = is_storable(&cursor.learner_id) && is_storable(&cursor.language_code);
        let since_valid = since_storable(cursor.since_micros);
        (storable && since_valid && cursor.updated_at().is_some()).then_some(cursor)
    }

    /// The cursor's time, when PostgreSQL can hold it (a forged cursor may name any integer).
    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.updated_at_micros)
    }
}

/// The position after the last row of a page of one of the paged lists, and the filters of that
/// list. The list is the cursor's tag (`k`), so one list's cursor never decodes as another's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k")]
pub enum ListCursor {
    /// `GET /phrases`, by `id`, or by relevance when it has a `q`.
    #[serde(rename = "p")]
    Phrases(PhrasesCursor),
    /// `GET /me/study-sessions`, newest first: `(created_at, id)` descending.
    #[serde(rename = "s")]
    StudySessions(StudySessionsCursor),
    /// `GET /me/recommendations`, best first: `score` descending, then `phrase_id`.
    #[serde(rename = "r")]
    Recommendations(RecommendationsCursor),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhrasesCursor {
    /// The `language` filter of the list.
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The search (`q`, trimmed) of the list.
    #[serde(rename = "q", default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The last row's rank, present exactly when `query` is: see [`SearchRank`].
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<SearchRank>,
    #[serde(rename = "i")]
    pub id: String,
}

/// Where a search match stands, best first: its `tier` (0: every word is a whole word of the
/// phrase's own text; 1: the phrase's text matches with the last word as a prefix; 2: every word
/// is a whole word of the text and its translations together; 3: the same with the last word as
/// a prefix), then the phrase text's length in characters (shorter first: the query covers more
/// of it), then `id`. Whole numbers, computed the same way on every read, so a cursor's position
/// is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRank {
    #[serde(rename = "t")]
    pub tier: i32,
    #[serde(rename = "n")]
    pub text_length: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudySessionsCursor {
    /// `created_at` in microseconds since the epoch (Postgres precision).
    #[serde(rename = "t")]
    pub created_at_micros: i64,
    #[serde(rename = "i")]
    pub id: Uuid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecommendationsCursor {
    /// The score's IEEE 754 bits: exact, and defined for any value the pipeline may write
    /// (NaN and infinities included, which JSON numbers cannot hold).
    #[serde(rename = "s")]
    pub score_bits: u64,
    #[serde(rename = "i")]
    pub phrase_id: String,
}

impl StudySessionsCursor {
    pub fn created_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.created_at_micros)
    }
}

impl RecommendationsCursor {
    pub fn score(&self) -> f64 {
        f64::from_bits(self.score_bits)
    }
}

impl ListCursor {
    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    /// `None` for anything [`ListCursor::encode`] cannot have written.
    pub fn decode(text: &str) -> Option<Self> {
        let cursor: Self = cursor::decode(text)?;
        let valid = match &cursor {
            Self::Phrases(c) => {
                [Some(&c.id), c.language.as_ref(), c.query.as_ref()]
                    .into_iter()
                    .flatten()
                    .all(|text| is_storable(text))
                    && c.query.is_some() == c.rank.is_some()
            }
            Self::StudySessions(c) => c.created_at().is_some(),
            Self::Recommendations(c) => is_storable(&c.phrase_id),
        };
        valid.then_some(cursor)
    }
}

/// The cursor of one of the paged lists, as [`ListPaging::own_cursor`] takes it out of a
/// [`ListCursor`].
pub trait OwnCursor {
    /// The cursor, when it is one of this list's.
    fn of(cursor: &ListCursor) -> Option<&Self>;
}

/// Implements [`OwnCursor`] for each list's cursor by its [`ListCursor`] variant.
macro_rules! own_cursors {
    ($($variant:ident($own:ty)),* $(,)?) => {$(
        impl OwnCursor for $own {
            fn of(cursor: &ListCursor) -> Option<&Self> {
                match cursor {
                    ListCursor::$variant(own) => Some(own),
                    _ => None,
                }
            }
        }
    )*};
}

own_cursors!(
    Phrases(PhrasesCursor),
    StudySessions(StudySessionsCursor),
    Recommendations(RecommendationsCursor),
);

/// The filters of a list: those given with a cursor must equal the cursor's own, and those left
/// out are taken from it (a cursor continues its list as it was asked for).
pub fn same_filter(given: Option<&str>, own: Option<&str>) -> Result<Option<String>, Problem> {
    cursor::continued_filter(given, own).map_err(|cursor::OtherFilter| other_list())
}

/// 400 `invalid_cursor` for a cursor of another list, or of this list with other filters.
pub fn other_list() -> Problem {
    Problem::from_code(ErrorCode::InvalidCursor)
        .with_detail("the cursor belongs to another list or to other filters")
}

/// Offset or cursor paging of a list, checked against the contract: `cursor` and `offset`
/// together is 400 `invalid_query`, a cursor that does not decode 400 `invalid_cursor`, and an
/// empty `cursor=` is no cursor.
#[derive(Debug)]
pub struct ListPaging {
    pub paging: Paging,
    pub cursor: Option<ListCursor>,
}

impl ListPaging {
    pub fn parse(
        limit: Option<i64>,
        offset: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<Self, Problem> {
        let (paging, cursor) = cursor::paging_and_cursor(limit, offset, cursor)?;
        let cursor = cursor_only::cursor(cursor, ListCursor::decode)?;
        Ok(Self { paging, cursor })
    }

    /// The cursor given, when it is one of list `C`'s (`None` without one): a cursor of another
    /// list is 400 `invalid_cursor` ([`other_list`]).
    pub fn own_cursor<C: OwnCursor>(&self) -> Result<Option<&C>, Problem> {
        let own = |cursor| C::of(cursor).ok_or_else(other_list);
        self.cursor.as_ref().map(own).transpose()
    }
}

/// The query string of a list without filters that pages by offset or by cursor, and its
/// OpenAPI parameters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CursorPageQuery {
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    pub limit: Option<i64>,
    /// Items to skip (to jump to a page near the start); not together with `cursor`.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    pub offset: Option<i64>,
    /// A `next_cursor` of an earlier page of this list, to walk it to its end; not together
    /// with `offset`. An empty `cursor=` is the same as none.
    pub cursor: Option<String>,
}

impl CursorPageQuery {
    pub fn paging(&self) -> Result<ListPaging, Problem> {
        ListPaging::parse(self.limit, self.offset, self.cursor.as_deref())
    }
}

/// One page of a list that pages by offset or by cursor.
#[derive(Debug, Serialize, ToSchema)]
pub struct CursorPage<T> {
    pub data: Vec<T>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    #[schema(minimum = 1, maximum = 100)]
    pub limit: i64,
    /// The `offset` asked for (0 on a cursor page).
    #[schema(minimum = 0)]
    pub offset: i64,
    /// `offset + count` when more items follow an offset page; null at the end and on cursor
    /// pages (a cursor page has no position to count from: continue with `next_cursor`).
    #[schema(required = true)]
    pub next_offset: Option<i64>,
    /// Opaque: pass it as `cursor` to continue the same list with the same filters; null at
    /// the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

impl<T> CursorPage<T> {
    /// The page from rows fetched with `LIMIT paging.fetch_limit()`; `after` gives the cursor
    /// after a row, used on the page's last row when more rows follow.
    pub fn from_rows(rows: Vec<T>, list: &ListPaging, after: impl Fn(&T) -> ListCursor) -> Self {
        let page = Page::from_rows(rows, list.paging);
        let next_cursor = page
            .next_offset
            .and(page.data.last())
            .map(|last| after(last).encode());
        Self {
            count: page.count,
            limit: page.limit,
            offset: page.offset,
            next_offset: page.next_offset.filter(|_| list.cursor.is_none()),
            next_cursor,
            data: page.data,
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> CursorPage<U> {
        CursorPage {
            data: self.data.into_iter().map(f).collect(),
            count: self.count,
            limit: self.limit,
            offset: self.offset,
            next_offset: self.next_offset,
            next_cursor: self.next_cursor,
        }
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

    fn phrases(query: Option<&str>) -> ListCursor {
        ListCursor::Phrases(PhrasesCursor {
            language: Some("es".into()),
            query: query.map(str::to_owned),
            rank: query.map(|_| SearchRank {
                tier: 1,
                text_length: 24,
            }),
            id: "ph-es-001".into(),
        })
    }

    #[test]
    fn list_cursors_round_trip_and_name_their_list() {
        let sessions = ListCursor::StudySessions(StudySessionsCursor {
            created_at_micros: 1_790_000_000_123_456,
            id: Uuid::now_v7(),
        });
        let recommendations = ListCursor::Recommendations(RecommendationsCursor {
            score_bits: f64::NAN.to_bits(),
            phrase_id: "ph-es-002".into(),
        });
        for cursor in [
            phrases(None),
            phrases(Some("dónde está")),
            sessions,
            recommendations,
        ] {
            assert_eq!(ListCursor::decode(&cursor.encode()), Some(cursor.clone()));
        }
    }

    #[test]
    fn bad_list_cursors_do_not_decode() {
        let encode = |json: &str| URL_SAFE_NO_PAD.encode(json.as_bytes());
        let text = phrases(Some("hola")).encode();
        let truncated = &text[..text.len() - 3];
        for text in [
            String::new(),
            "!!!".into(),
            truncated.into(),
            encode(r#"{"k":"x","i":"a"}"#),
            encode(r#"{"i":"a"}"#),
            // A search cursor without its rank, a rank without a search, an unknown field.
            encode(r#"{"k":"p","q":"a","i":"a"}"#),
            encode(r#"{"k":"p","r":{"t":0,"n":1},"i":"a"}"#),
            encode(r#"{"k":"p","i":"a","z":1}"#),
            encode(r#"{"k":"p","i":"a\u0000"}"#),
            encode(
                r#"{"k":"s","t":9223372036854775807,"i":"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}"#,
            ),
            encode(r#"{"k":"s","t":0,"i":"not-a-uuid"}"#),
            encode(r#"{"k":"r","s":-1,"i":"a"}"#),
        ] {
            assert_eq!(ListCursor::decode(&text), None, "{text:?}");
        }
    }

    #[test]
    fn offset_and_cursor_exclude_each_other_and_an_empty_cursor_is_none() {
        let text = phrases(None).encode();
        let both = ListPaging::parse(None, Some(0), Some(&text)).unwrap_err();
        assert_eq!(both.code, "invalid_query");
        let bad = ListPaging::parse(None, None, Some("!!!")).unwrap_err();
        assert_eq!(bad.code, "invalid_cursor");
        let empty = ListPaging::parse(None, Some(40), Some("")).unwrap();
        assert_eq!((empty.paging.offset, empty.cursor), (40, None));
        let good = ListPaging::parse(Some(5), None, Some(&text)).unwrap();
        assert_eq!(good.cursor, Some(phrases(None)));
    }

    #[test]
    fn filters_come_from_the_cursor_and_must_not_contradict_it() {
        assert_eq!(same_filter(None, Some("es")).unwrap(), Some("es".into()));
        assert_eq!(
            same_filter(Some("es"), Some("es")).unwrap(),
            Some("es".into())
        );
        assert_eq!(same_filter(None, None).unwrap(), None);
        for (given, own) in [(Some("de"), Some("es")), (Some("es"), None)] {
            assert_eq!(same_filter(given, own).unwrap_err().code, "invalid_cursor");
        }
    }

    #[test]
    fn a_page_has_a_next_cursor_only_when_rows_follow() {
        let list = ListPaging::parse(Some(2), None, None).unwrap();
        let after = |id: &&str| {
            ListCursor::Phrases(PhrasesCursor {
                language: None,
                query: None,
                rank: None,
                id: (*id).to_owned(),
            })
        };
        let page = CursorPage::from_rows(vec!["a", "b", "c"], &list, after);
        let next = page.next_cursor.as_deref().and_then(ListCursor::decode);
        assert_eq!(next, Some(after(&"b")));
        assert_eq!((page.count, page.next_offset), (2, Some(2)));
        let page = CursorPage::from_rows(vec!["a", "b"], &list, after);
        assert_eq!((page.next_cursor, page.next_offset), (None, None));

        let by_cursor = ListPaging::parse(Some(2), None, Some(&after(&"b").encode())).unwrap();
        let page = CursorPage::from_rows(vec!["c", "d", "e"], &by_cursor, after);
        assert_eq!(page.next_offset, None);
        assert!(page.next_cursor.is_some());
    }
}
