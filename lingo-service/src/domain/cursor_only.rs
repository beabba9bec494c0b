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
