//! The caller's own lists: bookmarks, what they follow, and their feed. Always from the primary.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use shared_auth::{Problem, Query, RequiredCaller};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::articles::ArticlePage;
use crate::domain::cursor::{BookmarkCursor, CursorPageQuery, ListKind, ListPaging};
use crate::domain::directory::{Journalist, Organization};
use crate::error::Result;
use crate::problems::{FeedProblems, PrivatePageProblems, PrivateProblems};
use crate::state::{AppState, Db};
use crate::store::articles::{self, ListSpec};
use crate::store::directory;
use shared_auth::http::cache::json_read;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(my_bookmarks))
        .routes(routes!(my_following))
        .routes(routes!(my_feed))
}

/// The caller's bookmarked articles, most recently bookmarked first (ties by article id
/// descending).
///
/// Walk all of them with `cursor`: every bookmark once, in this order; bookmarks made during the
/// walk are newer than the walker's position, so they do not show up in it. `offset` only
/// reaches the first 10,000.
#[utoipa::path(
    get,
    path = "/me/bookmarks",
    operation_id = "news_list_my_bookmarks",
    tag = "news-me",
    params(CursorPageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of articles.", body = ArticlePage,
            links(
                ("NextPage" = (operation_id = "news_list_my_bookmarks",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`private, no-store`."),
                ("Vary" = String, description = "`authorization`."),
            )),
        PrivatePageProblems,
    )
)]
async fn my_bookmarks(
    State(db): State<Db>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Query(query): Query<CursorPageQuery>,
) -> Result<Response> {
    let paging = query.keyset_paging::<BookmarkCursor>(ListKind::Bookmarks)?;
    let page = articles::bookmarked_by(&db.primary, &caller.sub, &paging).await?;
    Ok(json_read(&headers, true, &page))
}

/// Everything the caller follows, each list ordered by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct Following {
    journalists: Vec<Journalist>,
    organizations: Vec<Organization>,
}

/// The journalists and organisations the caller follows (not paged).
#[utoipa::path(
    get,
    path = "/me/following",
    operation_id = "news_list_my_following",
    tag = "news-me",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "What the caller follows.", body = Following,
            headers(
                ("Cache-Control" = String, description = "`private, no-store`."),
                ("Vary" = String, description = "`authorization`."),
            )),
        PrivateProblems,
    )
)]
async fn my_following(
    State(db): State<Db>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
) -> Result<Response> {
    let (journalists, organizations) = directory::followed_by(&db.primary, &caller.sub).await?;
    let following = Following {
        journalists,
        organizations,
    };
    Ok(json_read(&headers, true, &following))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct FeedQuery {
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Items to skip; not together with `cursor`.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    offset: Option<i64>,
    /// A `next_cursor` from an earlier feed page; not together with `offset`. An empty
    /// `cursor=` is the same as none.
    cursor: Option<String>,
}

/// Articles by the journalists or organisations the caller follows, newest first.
#[utoipa::path(
    get,
    path = "/me/feed",
    operation_id = "news_list_my_feed",
    tag = "news-me",
    params(FeedQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of the feed.", body = ArticlePage,
            headers(
                ("Cache-Control" = String, description = "`private, no-store`."),
                ("Vary" = String, description = "`authorization`."),
            )),
        FeedProblems,
    )
)]
async fn my_feed(
    State(db): State<Db>,
    RequiredCaller(caller): RequiredCaller,
    headers: HeaderMap,
    Query(query): Query<FeedQuery>,
) -> Result<Response> {
    let paging = ListPaging::parse(query.limit, query.offset, query.cursor.as_deref())?;
    if let Some(cursor) = &paging.cursor {
        cursor
            .resolve_filter(ListKind::Feed, None, None)
            .map_err(Problem::from)?;
    }
    let spec = ListSpec {
        viewer: Some(caller.sub.clone()),
        followed_by: Some(caller.sub),
        ..ListSpec::default()
    };
    let page = articles::page(&db.primary, ListKind::Feed, spec, &paging).await?;
    Ok(json_read(&headers, true, &page))
}
