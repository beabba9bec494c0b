//! Keyset cursors: an opaque string that names the last row served (its place in the list's
//! order) and the list it came from (which list, which filters), so the next page continues the
//! same ordering and filters. Article lists carry `published_at` and `id` ([`Cursor`]); the other
//! lists carry their own keys ([`ThreadCursor`], [`BookmarkCursor`], [`NameCursor`]). Every
//! cursor names its list in `k`, read first, so another list's cursor is told apart from one
//! that does not decode. Also the paging query several lists share and the page they answer
//! ([`CursorPageQuery`], [`CursorPage`]).

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shared_auth::http::cursor;
use shared_auth::{Page, Paging, Problem};
use utoipa::{IntoParams, ToSchema};

use crate::domain::comments::is_thread_path;
use crate::domain::ids::can_exist;
use crate::error::ErrorCode;

/// Which list a cursor belongs to; a cursor of one list is refused by the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListKind {
    #[serde(rename = "a")]
    Articles,
    #[serde(rename = "f")]
    Feed,
    /// An article's comments in thread order.
    #[serde(rename = "c")]
    Comments,
    /// The caller's bookmarks, most recently bookmarked first.
    #[serde(rename = "b")]
    Bookmarks,
    /// Organisations by name, then id.
    #[serde(rename = "o")]
    Organizations,
    /// Journalists (of one organisation or all) by name, then id.
    #[serde(rename = "j")]
    Journalists,
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
        if self.kind != kind {
            return Err(CursorError::OtherList);
        }
        Ok((
            cursor::continued_filter(organization_id, self.organization_id.as_deref())?,
            cursor::continued_filter(journalist_id, self.journalist_id.as_deref())?,
        ))
    }
}

/// A cursor given with filters other than its own continues another list.
impl From<cursor::OtherFilter> for CursorError {
    fn from(_: cursor::OtherFilter) -> Self {
        CursorError::OtherList
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
        let (paging, cursor) = cursor::paging_and_cursor(limit, offset, cursor)?;
        let cursor = cursor.map(Cursor::decode).transpose()?;
        Ok(Self { paging, cursor })
    }
}

/// The keys a list's cursor carries besides `k`, and what a forged one may not hold.
pub trait Position: Serialize + DeserializeOwned {
    /// The list the cursor belongs to.
    fn kind(&self) -> ListKind;
    /// Whether the database could hold every value (a forged cursor may name anything, and a
    /// statement given a value its column cannot hold fails).
    fn storable(&self) -> bool;

    fn encode(&self) -> String {
        cursor::encode(self)
    }
}

/// Decodes a cursor of list `kind`: `OtherList` when it names another list, `Undecodable` when
/// it is no cursor of ours or holds values no row can have.
pub fn decode_position<P: Position>(text: &str, kind: ListKind) -> Result<P, CursorError> {
    /// Only the list of a cursor: any cursor of ours has it, whatever else it carries.
    #[derive(Deserialize)]
    struct Head {
        #[serde(rename = "k")]
        kind: ListKind,
    }
    let head: Head = cursor::decode(text).ok_or(CursorError::Undecodable)?;
    if head.kind != kind {
        return Err(CursorError::OtherList);
    }
    let position: P = cursor::decode(text).ok_or(CursorError::Undecodable)?;
    if position.kind() != kind || !position.storable() {
        return Err(CursorError::Undecodable);
    }
    Ok(position)
}

/// Offset or cursor paging of a list with its own keys ([`Position`]), checked against the
/// contract: `after` is the decoded cursor, of the list asked for.
#[derive(Debug)]
pub struct KeysetPaging<P> {
    pub paging: Paging,
    pub after: Option<P>,
}

impl<P: Position> KeysetPaging<P> {
    pub fn parse(
        kind: ListKind,
        limit: Option<i64>,
        offset: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<Self, Problem> {
        let (paging, cursor) = cursor::paging_and_cursor(limit, offset, cursor)?;
        let after = cursor.map(|text| decode_position(text, kind)).transpose()?;
        Ok(Self { paging, after })
    }
}

/// A place in an article's thread: after the comment with this thread path (`path` orders the
/// thread, see `domain::comments::placement`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadCursor {
    #[serde(rename = "k")]
    pub kind: ListKind,
    #[serde(rename = "a")]
    pub article_id: String,
    #[serde(rename = "p")]
    pub path: String,
}

impl Position for ThreadCursor {
    fn kind(&self) -> ListKind {
        self.kind
    }
    fn storable(&self) -> bool {
        can_exist(&self.article_id) && is_thread_path(&self.path)
    }
}

impl ThreadCursor {
    pub fn after(article_id: &str, path: &str) -> Self {
        Self {
            kind: ListKind::Comments,
            article_id: article_id.to_owned(),
            path: path.to_owned(),
        }
    }

    /// A thread cursor continues the thread of its own article only.
    pub fn check_article(&self, article_id: &str) -> Result<(), CursorError> {
        if self.article_id == article_id {
            Ok(())
        } else {
            Err(CursorError::OtherList)
        }
    }
}

/// A place in the caller's bookmarks: after the bookmark made at this time (microseconds) of
/// this article. The caller is not in it: the list is always the caller's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BookmarkCursor {
    #[serde(rename = "k")]
    pub kind: ListKind,
    #[serde(rename = "t")]
    pub bookmarked_at_micros: i64,
    #[serde(rename = "i")]
    pub article_id: String,
}

impl Position for BookmarkCursor {
    fn kind(&self) -> ListKind {
        self.kind
    }
    fn storable(&self) -> bool {
        self.bookmarked_at().is_some() && can_exist(&self.article_id)
    }
}

impl BookmarkCursor {
    pub fn after(bookmarked_at: DateTime<Utc>, article_id: &str) -> Self {
        Self {
            kind: ListKind::Bookmarks,
            bookmarked_at_micros: bookmarked_at.timestamp_micros(),
            article_id: article_id.to_owned(),
        }
    }

    pub fn bookmarked_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.bookmarked_at_micros)
    }
}

/// A place in a directory list (organisations or journalists, by name then id): after the row
/// with this name and id, and, for journalists, the organisation filter of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameCursor {
    #[serde(rename = "k")]
    pub kind: ListKind,
    #[serde(rename = "n")]
    pub name: String,
    #[serde(rename = "i")]
    pub id: String,
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
}

impl Position for NameCursor {
    fn kind(&self) -> ListKind {
        self.kind
    }
    fn storable(&self) -> bool {
        let directory = matches!(self.kind, ListKind::Organizations | ListKind::Journalists);
        // Organisations have no filter: such a cursor was not written by us.
        let filter_fits = self.kind == ListKind::Journalists || self.organization_id.is_none();
        let values = [
            Some(&self.name),
            Some(&self.id),
            self.organization_id.as_ref(),
        ];
        directory && filter_fits && values.into_iter().flatten().all(|v| can_exist(v))
    }
}

impl NameCursor {
    /// Checks the request's organisation filter against the cursor's, as the article list does:
    /// one given must equal the cursor's; one left out is taken from the cursor.
    pub fn resolve_organization(&self, given: Option<&str>) -> Result<Option<String>, CursorError> {
        Ok(cursor::continued_filter(
            given,
            self.organization_id.as_deref(),
        )?)
    }
}

/// `limit` with `offset` or `cursor`.
#[derive(Debug, Deserialize, IntoParams)]
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
    /// A `next_cursor` from an earlier page of the same list (keyset paging, to walk the list
    /// to its end); not together with `offset`. A cursor of another list is 400
    /// `invalid_cursor`. An empty `cursor=` is the same as none.
    pub cursor: Option<String>,
}

impl CursorPageQuery {
    /// The query's paging of list `kind`, checked as [`KeysetPaging::parse`] does.
    pub fn keyset_paging<P: Position>(&self, kind: ListKind) -> Result<KeysetPaging<P>, Problem> {
        KeysetPaging::parse(kind, self.limit, self.offset, self.cursor.as_deref())
    }
}

/// A page of a list with offset and keyset paging (comments, organisations, journalists): the
/// same fields as `ArticlePage`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CursorPage<T> {
    pub data: Vec<T>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    #[schema(minimum = 1, maximum = 100)]
    pub limit: i64,
    #[schema(minimum = 0)]
    pub offset: i64,
    /// `offset + count` when more items follow an offset page; null at the end and on cursor pages.
    #[schema(required = true)]
    pub next_offset: Option<i64>,
    /// Opaque: pass it as `cursor` to continue the same list and filters; null at the end.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

impl<T> CursorPage<T> {
    /// The page of rows fetched with `LIMIT paging.fetch_limit()`, read from a cursor or not;
    /// `cursor_after` writes the cursor that continues after a row (the page's last).
    pub fn from_rows(
        rows: Vec<T>,
        paging: Paging,
        by_cursor: bool,
        cursor_after: impl FnOnce(&T) -> String,
    ) -> Self {
        let page = Page::from_rows(rows, paging);
        let next_cursor = page
            .next_offset
            .and_then(|_| page.data.last())
            .map(cursor_after);
        Self {
            data: page.data,
            count: page.count,
            limit: page.limit,
            offset: page.offset,
            // A cursor page has no absolute position: continue with `next_cursor`.
            next_offset: if by_cursor { None } else { page.next_offset },
            next_cursor,
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

    fn thread() -> ThreadCursor {
        ThreadCursor::after("art-1", &format!("{}.{}", "0".repeat(32), "f".repeat(32)))
    }

    fn journalists(org: Option<&str>) -> NameCursor {
        NameCursor {
            kind: ListKind::Journalists,
            name: "Ada Byrne".into(),
            id: "jrn-0001".into(),
            organization_id: org.map(str::to_owned),
        }
    }

    #[test]
    fn every_list_position_round_trips() {
        let bookmark = BookmarkCursor::after(
            DateTime::from_timestamp_micros(1_763_700_000_123_456).unwrap_or_default(),
            "art-7",
        );
        let organizations = NameCursor {
            kind: ListKind::Organizations,
            organization_id: None,
            ..journalists(None)
        };
        assert_eq!(
            decode_position(&thread().encode(), ListKind::Comments),
            Ok(thread())
        );
        assert_eq!(
            decode_position(&bookmark.encode(), ListKind::Bookmarks),
            Ok(bookmark)
        );
        assert_eq!(
            decode_position(&organizations.encode(), ListKind::Organizations),
            Ok(organizations)
        );
        let of_org = journalists(Some("org-1"));
        assert_eq!(
            decode_position(&of_org.encode(), ListKind::Journalists),
            Ok(of_org)
        );
    }

    #[test]
    fn a_cursor_of_another_list_is_told_apart_from_garbage() {
        let article = cursor(None).encode();
        let thread = thread().encode();
        let name = journalists(None).encode();
        let other = |text: &str, kind| decode_position::<NameCursor>(text, kind);
        assert_eq!(
            other(&article, ListKind::Journalists),
            Err(CursorError::OtherList)
        );
        assert_eq!(
            other(&thread, ListKind::Organizations),
            Err(CursorError::OtherList)
        );
        assert_eq!(
            other(&name, ListKind::Organizations),
            Err(CursorError::OtherList)
        );
        assert_eq!(
            decode_position::<ThreadCursor>(&name, ListKind::Comments),
            Err(CursorError::OtherList)
        );
        // The article list's own decoder refuses the new lists' cursors too.
        assert!(Cursor::decode(&thread).is_err());
        assert_eq!(
            Cursor::decode(&BookmarkCursor::after(Utc::now(), "a").encode())
                .and_then(|c| c.resolve_filter(ListKind::Articles, None, None)),
            Err(CursorError::OtherList)
        );
        // Truncated: a cursor cut anywhere no longer decodes.
        for end in 0..thread.len() {
            assert_eq!(
                decode_position::<ThreadCursor>(&thread[..end], ListKind::Comments),
                Err(CursorError::Undecodable),
                "{end}"
            );
        }
    }

    #[test]
    fn forged_positions_do_not_decode() {
        let forged = |json: &str| URL_SAFE_NO_PAD.encode(json.as_bytes());
        let hex = "a".repeat(32);
        let table: [(String, ListKind); 7] = [
            // Not a thread path, or a NUL in an id or a name.
            (
                forged(r#"{"k":"c","a":"art-1","p":"x"}"#),
                ListKind::Comments,
            ),
            (
                forged(r#"{"k":"c","a":"art-1","p":""}"#),
                ListKind::Comments,
            ),
            (
                forged(&format!(r#"{{"k":"c","a":"a\u0000","p":"{hex}"}}"#)),
                ListKind::Comments,
            ),
            (
                forged(r#"{"k":"o","n":"a\u0000","i":"x"}"#),
                ListKind::Organizations,
            ),
            // Organisations have no filter; an unknown field; a time Postgres cannot hold.
            (
                forged(r#"{"k":"o","n":"a","i":"x","o":"org-1"}"#),
                ListKind::Organizations,
            ),
            (
                forged(r#"{"k":"j","n":"a","i":"x","z":1}"#),
                ListKind::Journalists,
            ),
            (
                forged(r#"{"k":"b","t":-9223372036854775807,"i":"x"}"#),
                ListKind::Bookmarks,
            ),
        ];
        for (text, kind) in table {
            let got = match kind {
                ListKind::Comments => decode_position::<ThreadCursor>(&text, kind).map(|_| ()),
                ListKind::Bookmarks => decode_position::<BookmarkCursor>(&text, kind).map(|_| ()),
                _ => decode_position::<NameCursor>(&text, kind).map(|_| ()),
            };
            assert_eq!(got, Err(CursorError::Undecodable), "{kind:?} {text}");
        }
    }

    #[test]
    fn keyset_paging_excludes_offset_and_checks_the_list() {
        let text = thread().encode();
        let parse = |offset, cursor| {
            KeysetPaging::<ThreadCursor>::parse(ListKind::Comments, None, offset, cursor)
                .map(|p| p.after)
                .map_err(|p| p.code)
        };
        assert_eq!(parse(Some(0), Some(&*text)), Err("invalid_query".into()));
        assert_eq!(parse(Some(5), Some("")), Ok(None));
        assert_eq!(parse(None, Some(&*text)), Ok(Some(thread())));
        let name = journalists(None).encode();
        assert_eq!(parse(None, Some(&*name)), Err("invalid_cursor".into()));
    }

    #[test]
    fn a_cursor_keeps_its_article_and_its_organisation() {
        assert_eq!(thread().check_article("art-1"), Ok(()));
        assert_eq!(thread().check_article("art-2"), Err(CursorError::OtherList));
        let table = [
            (None, None, Ok(None)),
            (None, Some("org-1"), Err(CursorError::OtherList)),
            (Some("org-1"), None, Ok(Some("org-1".to_owned()))),
            (Some("org-1"), Some("org-1"), Ok(Some("org-1".to_owned()))),
            (Some("org-1"), Some("org-2"), Err(CursorError::OtherList)),
        ];
        for (own, given, expected) in table {
            assert_eq!(
                journalists(own).resolve_organization(given),
                expected,
                "{own:?} {given:?}"
            );
        }
    }
}
