//! Articles: the list (offset or keyset cursor paging) and one article with its body.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use shared_auth::{OptionalCaller, Query};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::articles::{Article, ArticlePage};
use crate::domain::cursor::{ListKind, ListPaging};
use crate::error::{ErrorCode, Result};
use crate::path_params::ArticleIdPath;
use crate::problems::{ArticleListProblems, ArticleProblems};
use crate::state::{AppState, Db};
use crate::store::articles::{self, ListSpec};
use shared_auth::http::cache::{IfNoneMatch, json_read};
use shared_auth::http::path_id::PathId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_articles))
        .routes(routes!(get_article))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only articles of this organisation (an unknown id gives an empty page).
    organization_id: Option<String>,
    /// Only articles by this journalist (an unknown id gives an empty page).
    journalist_id: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    limit: Option<i64>,
    /// Items to skip; not together with `cursor`.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    #[serde(default, deserialize_with = "shared_auth::http::paging::query_integer")]
    offset: Option<i64>,
    /// A `next_cursor` from an earlier page (keyset paging); not together with `offset`. The
    /// filters given with it must equal the cursor's (those left out are taken from it). An
    /// empty `cursor=` is the same as none.
    cursor: Option<String>,
}

/// List articles, newest `published_at` first (ties by `id` descending).
///
/// Anonymous answers are cacheable (`ETag`, `Cache-Control: public, max-age=30`, 304 for a
/// matching `If-None-Match`); answers to a caller with a valid token are
/// `Cache-Control: private, no-store` and carry `viewer`.
#[utoipa::path(
    get,
    path = "/articles",
    operation_id = "news_list_articles",
    tag = "news-articles",
    params(ListQuery, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of articles.", body = ArticlePage,
            links(
                ("GetArticle" = (operation_id = "news_get_article",
                    parameters(("article_id" = "$response.body#/data/0/id")))),
                ("ListComments" = (operation_id = "news_list_comments",
                    parameters(("article_id" = "$response.body#/data/0/id")))),
                ("LikeArticle" = (operation_id = "news_like_article",
                    parameters(("article_id" = "$response.body#/data/0/id")))),
                ("BookmarkArticle" = (operation_id = "news_bookmark_article",
                    parameters(("article_id" = "$response.body#/data/0/id")))),
                ("NextPage" = (operation_id = "news_list_articles",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            ),
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        ArticleListProblems,
    )
)]
async fn list_articles(
    State(db): State<Db>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Result<Response> {
    let paging = ListPaging::parse(query.limit, query.offset, query.cursor.as_deref())?;
    let (organization_id, journalist_id) = match &paging.cursor {
        Some(cursor) => cursor
            .resolve_filter(
                ListKind::Articles,
                query.organization_id.as_deref(),
                query.journalist_id.as_deref(),
            )
            .map_err(shared_auth::Problem::from)?,
        None => (query.organization_id, query.journalist_id),
    };
    let viewer = caller.map(|c| c.sub);
    let signed_in = viewer.is_some();
    let spec = ListSpec {
        viewer,
        organization_id,
        journalist_id,
        ..ListSpec::default()
    };
    let (spec, paging) = (&spec, &paging);
    let page = db
        .read(signed_in, |pool| async move {
            articles::page(&pool, ListKind::Articles, spec.clone(), paging).await
        })
        .await?;
    Ok(json_read(&headers, signed_in, &page))
}

/// One article with its body; cacheable like the list.
#[utoipa::path(
    get,
    path = "/articles/{article_id}",
    operation_id = "news_get_article",
    tag = "news-articles",
    params(ArticleIdPath, IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The article.", body = Article,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        ArticleProblems,
    )
)]
async fn get_article(
    State(db): State<Db>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    PathId(article_id): PathId,
) -> Result<Response> {
    let viewer = caller.map(|c| c.sub);
    let (id, viewer_id) = (article_id.as_str(), viewer.as_deref());
    let article = db
        .read(viewer.is_some(), |pool| async move {
            articles::find(&pool, id, viewer_id).await
        })
        .await?
        .ok_or(ErrorCode::ArticleNotFound)?;
    Ok(json_read(&headers, viewer.is_some(), &article))
}
