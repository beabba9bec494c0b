//! The query of a list that pages by cursor only (`GET /me/phrases`, the analytics exports),
//! read in two steps, its paging and its cursor: a list checks its own filters in between, so
//! that of a query with several faults it always names the same one.

use shared_auth::http::cursor;
use shared_auth::{Paging, Problem};

use crate::error::{ErrorCode, Result};

/// The page size. An `offset` given is 400 `invalid_query` rather than ignored, so that a client
/// cannot believe the list pages by offset.
pub fn paging(limit: Option<i64>, offset_given: bool) -> Result<Paging> {
    if offset_given {
        let detail = "this list is paged by `cursor` only, not `offset`";
        return Err(Problem::invalid_query(detail).into());
    }
    Ok(Paging::new(limit, None)?)
}

/// The cursor of the query's `cursor` (an empty `cursor=` is none), decoded by the list's own
/// `decode`: 400 `invalid_cursor` when it refuses it. The lists paged by offset or by cursor
/// decode theirs with it too (`ListPaging::parse`).
pub fn cursor<C>(
    given: Option<&str>,
    decode: impl FnOnce(&str) -> Option<C>,
) -> Result<Option<C>, Problem> {
    let decoded = cursor::given(given).map(|text| decode(text).ok_or(ErrorCode::InvalidCursor));
    Ok(decoded.transpose()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(error: crate::error::Error) -> String {
        error.to_problem().code.into_owned()
    }

    #[test]
    fn an_offset_is_refused_rather_than_ignored() {
        let refused = paging(Some(10), true).expect_err("offset given");
        assert_eq!(code_of(refused), "invalid_query");
        assert_eq!(paging(Some(10), false).expect("in range").limit, 10);
        assert_eq!(
            code_of(paging(Some(0), false).expect_err("limit 0")),
            "invalid_query"
        );
    }

    #[test]
    fn an_empty_cursor_is_none_and_a_refused_one_is_invalid_cursor() {
        let decode = |text: &str| text.parse::<u32>().ok();
        assert_eq!(cursor(None, decode).expect("none"), None);
        assert_eq!(cursor(Some(""), decode).expect("empty is none"), None);
        assert_eq!(cursor(Some("7"), decode).expect("decodes"), Some(7));
        let refused = cursor(Some("x"), decode).expect_err("does not decode");
        assert_eq!(refused.code, "invalid_cursor");
    }
}
