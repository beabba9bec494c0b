//! The query string several lists share (offset or keyset paging), documented once for the
//! OpenAPI document, as `path_params` does for path parameters.

use serde::Deserialize;
use utoipa::IntoParams;

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
