//! The caller's own lists: bookmarks, what they follow, and their feed. Always from the primary.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use shared_auth::{Page, Paging, Query, RequiredCaller};
use sqlx::QueryBuilder;

use crate::AppState;
use crate::cache::json_read;
use crate::domain::cursor::ListKind;
use crate::error::Result;
use crate::routes::articles::{
    ArticleItem, ArticleRow, ListPaging, ListSpec, fetch_cursor_page, invalid_cursor,
};
use crate::routes::directory::{Journalist, Organization, Selection, journalists, organizations};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/bookmarks", get(my_bookmarks))
        .route("/me/following", get(my_following))
        .route("/me/feed", get(my_feed))
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    limit: Option<i64>,
    offset: Option<i64>,
}

async fn my_bookmarks(
    State(state): State<AppState>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> Result<Response> {
    let paging = Paging::new(query.limit, query.offset)?;
    let mut qb = QueryBuilder::new("");
    crate::routes::articles::push_bookmarks_query(&mut qb, &caller.sub, paging);
    let rows: Vec<ArticleRow> = qb.build_query_as().fetch_all(&state.pools.primary).await?;
    let page = Page::from_rows(rows, paging).map(ArticleItem::from);
    Ok(json_read(&headers, true, &page))
}

#[derive(Debug, Serialize)]
struct Following {
    journalists: Vec<Journalist>,
    organizations: Vec<Organization>,
}

async fn my_following(
    State(state): State<AppState>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
) -> Result<Response> {
    let pool = &state.pools.primary;
    let me = caller.sub.as_str();
    let following = Following {
        journalists: journalists(pool, Selection::FollowedBy(me), Some(me), None).await?,
        organizations: organizations(pool, Selection::FollowedBy(me), Some(me), None).await?,
    };
    Ok(json_read(&headers, true, &following))
}

#[derive(Debug, Deserialize)]
struct FeedQuery {
    limit: Option<i64>,
    offset: Option<i64>,
    cursor: Option<String>,
}

async fn my_feed(
    State(state): State<AppState>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Query(query): Query<FeedQuery>,
) -> Result<Response> {
    let paging = ListPaging::parse(query.limit, query.offset, query.cursor.as_deref())?;
    if let Some(cursor) = &paging.cursor {
        cursor
            .resolve_filter(ListKind::Feed, None, None)
            .map_err(invalid_cursor)?;
    }
    let spec = ListSpec {
        viewer: Some(caller.sub.clone()),
        followed_by: Some(caller.sub),
        ..ListSpec::default()
    };
    let page = fetch_cursor_page(&state.pools.primary, ListKind::Feed, spec, &paging).await?;
    Ok(json_read(&headers, true, &page))
}
