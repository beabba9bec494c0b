//! The paging convention of docs/conventions.md: `limit` 1..=100 (default 20), `offset` 0..=10000,
//! answered as `{data, count, limit, offset, next_offset}`.

use serde::{Deserialize, Deserializer, Serialize};

use crate::http::problem::Problem;

pub const DEFAULT_LIMIT: i64 = 20;
pub const MAX_LIMIT: i64 = 100;
pub const MAX_OFFSET: i64 = 10_000;

/// A query-string integer (`limit`, `offset`) as the contract writes one: digits, with an
/// optional leading `-` (which the range check then refuses). Rust's own parser also takes a
/// leading `+` (`limit=%2B5`), which nothing else in the contract accepts, and `-0`, which is
/// zero written with a sign. For `#[serde(default, deserialize_with = "...")]` on an
/// `Option<i64>` field.
pub fn query_integer<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let Some(text) = Option::<String>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let digits = text.strip_prefix('-').unwrap_or(&text);
    let signed_zero = digits.len() < text.len() && digits.bytes().all(|b| b == b'0');
    let well_formed =
        !digits.is_empty() && !signed_zero && digits.bytes().all(|b| b.is_ascii_digit());
    let number = well_formed.then(|| text.parse::<i64>().ok()).flatten();
    number.map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!("`{text}` is not an integer in plain digits"))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    pub limit: i64,
    pub offset: i64,
}

impl Paging {
    /// Out-of-range values are refused, never clamped.
    pub fn new(limit: Option<i64>, offset: Option<i64>) -> Result<Self, Problem> {
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        let offset = offset.unwrap_or(0);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Problem::invalid_query(format!(
                "limit must be an integer from 1 to {MAX_LIMIT}"
            )));
        }
        if !(0..=MAX_OFFSET).contains(&offset) {
            return Err(Problem::invalid_query(format!(
                "offset must be an integer from 0 to {MAX_OFFSET}"
            )));
        }
        Ok(Self { limit, offset })
    }

    /// Rows to fetch: one more than the page, to learn whether another page follows.
    pub fn fetch_limit(&self) -> i64 {
        self.limit + 1
    }
}

/// The query string of a plain paged list, and its OpenAPI parameters.
#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "crate::http::paging::query_integer")]
    pub limit: Option<i64>,
    /// Items to skip.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "crate::http::paging::query_integer")]
    pub offset: Option<i64>,
}

impl PageQuery {
    /// The checked paging (400 `invalid_query` when out of range).
    pub fn paging(&self) -> Result<Paging, Problem> {
        Paging::new(self.limit, self.offset)
    }
}

/// Cuts rows fetched with `LIMIT paging.fetch_limit()` to the page; true when more rows follow.
pub fn cut_to_page<T>(rows: &mut Vec<T>, paging: Paging) -> bool {
    let has_more = rows.len() as i64 > paging.limit;
    rows.truncate(paging.limit as usize);
    has_more
}

/// For lists paged by cursor only: cuts rows fetched with `LIMIT paging.fetch_limit()` to the
/// page and gives the cursor `after` the page's last row when more rows follow (else `None`).
pub fn next_cursor<T>(
    rows: &mut Vec<T>,
    paging: Paging,
    after: impl FnOnce(&T) -> String,
) -> Option<String> {
    let has_more = cut_to_page(rows, paging);
    rows.last().filter(|_| has_more).map(after)
}

/// One page of a list.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Number of items in `data`.
    pub count: usize,
    pub limit: i64,
    pub offset: i64,
    /// `offset + count`, or null when nothing follows this page.
    #[schema(required = true)]
    pub next_offset: Option<i64>,
}

impl<T> Page<T> {
    /// Builds the page from rows fetched with `LIMIT paging.fetch_limit()`.
    pub fn from_rows(mut rows: Vec<T>, paging: Paging) -> Self {
        let has_more = cut_to_page(&mut rows, paging);
        let count = rows.len();
        Self {
            data: rows,
            count,
            limit: paging.limit,
            offset: paging.offset,
            next_offset: has_more.then_some(paging.offset + count as i64),
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            count: self.count,
            limit: self.limit,
            offset: self.offset,
            next_offset: self.next_offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_integers_are_digits_with_an_optional_minus() {
        let read = |query: &str| serde_urlencoded::from_str::<PageQuery>(query).map(|q| q.limit);
        assert_eq!(read("").unwrap(), None);
        assert_eq!(read("limit=5").unwrap(), Some(5));
        assert_eq!(read("limit=-1").unwrap(), Some(-1));
        for refused in [
            "limit=%2B5",
            "limit=+5",
            "limit=",
            "limit=5.0",
            "limit=abc",
            "limit=-",
        ] {
            assert!(read(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn limits_are_checked_not_clamped() {
        assert_eq!(
            Paging::new(None, None).unwrap(),
            Paging {
                limit: 20,
                offset: 0
            }
        );
        for (limit, offset) in [(0, 0), (101, 0), (-1, 0), (10, -1), (10, 10_001)] {
            let problem = Paging::new(Some(limit), Some(offset)).unwrap_err();
            assert_eq!(problem.code, "invalid_query");
        }
        assert!(Paging::new(Some(100), Some(10_000)).is_ok());
    }

    #[test]
    fn next_offset_only_when_more_rows_exist() {
        let paging = Paging::new(Some(2), Some(4)).unwrap();
        let page = Page::from_rows(vec![1, 2, 3], paging);
        assert_eq!((page.count, page.next_offset), (2, Some(6)));
        let page = Page::from_rows(vec![1, 2], paging);
        assert_eq!((page.count, page.next_offset), (2, None));
    }

    #[test]
    fn a_next_cursor_only_when_more_rows_exist_and_after_the_pages_last_row() {
        let paging = Paging::new(Some(2), None).unwrap();
        let mut rows = vec![1, 2, 3];
        let cursor = next_cursor(&mut rows, paging, |last| format!("after {last}"));
        assert_eq!((rows, cursor), (vec![1, 2], Some("after 2".to_owned())));
        let mut rows = vec![1, 2];
        let cursor = next_cursor(&mut rows, paging, |last| format!("after {last}"));
        assert_eq!((rows, cursor), (vec![1, 2], None));
    }
}
