//! Articles: the list (offset or keyset cursor paging) and one article with its body. The item
//! shape and its SQL are shared with `/me/bookmarks` and `/me/feed`.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{OptionalCaller, Page, Paging, Problem, Query};
use sqlx::{FromRow, PgPool, Postgres, QueryBuilder};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::cache::json_read;
use crate::domain::cursor::{Cursor, CursorError, ListKind};
use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::openapi::{
    ArticleNotFound, BadListQuery, BadPath, Internal, NotModified, Unauthorized, Unavailable,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/articles", get(list_articles))
        .route("/articles/{article_id}", get(get_article))
}

/// An organisation or journalist as an article names it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct Named {
    pub id: String,
    pub name: String,
}

/// The caller's relation to an article (only for a caller with a valid token).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct ArticleViewer {
    pub liked: bool,
    pub bookmarked: bool,
    pub following_journalist: bool,
    pub following_organization: bool,
}

/// An article in a list (no body). Counts are exact: they equal the rows they count.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "art-000001", "title": "Harbour Council Approves Night Ferry",
    "summary": "The council voted 7-2 for a trial service.",
    "url": "https://news.example/articles/art-000001", "published_at": "2026-11-21T09:30:00Z",
    "organization": {"id": "org-001", "name": "Harbour Herald"},
    "journalist": {"id": "jrn-0001", "name": "Ada Byrne"},
    "organization_id": "org-001", "journalist_id": "jrn-0001",
    "like_count": 12, "bookmark_count": 3, "comment_count": 5,
    "viewer": {"liked": true, "bookmarked": false, "following_journalist": false,
               "following_organization": true}
}))]
pub struct ArticleItem {
    pub id: String,
    pub title: String,
    pub summary: String,
    pub url: String,
    pub published_at: DateTime<Utc>,
    pub organization: Named,
    pub journalist: Named,
    pub organization_id: String,
    pub journalist_id: String,
    #[schema(minimum = 0)]
    pub like_count: i64,
    #[schema(minimum = 0)]
    pub bookmark_count: i64,
    /// Every comment of the article, replies included.
    #[schema(minimum = 0)]
    pub comment_count: i64,
    /// The caller's relation to the article; null without a token.
    #[schema(required = true)]
    pub viewer: Option<ArticleViewer>,
}

/// One article: the list item plus its `body`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Article {
    #[serde(flatten)]
    pub item: ArticleItem,
    pub body: String,
}

/// A page of articles: offset paging fields plus the keyset `next_cursor`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ArticlePage {
    pub data: Vec<ArticleItem>,
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

#[derive(Debug, FromRow)]
pub struct ArticleRow {
    id: String,
    title: String,
    summary: String,
    url: String,
    published_at: DateTime<Utc>,
    organization_id: String,
    organization_name: String,
    journalist_id: String,
    journalist_name: String,
    like_count: i64,
    bookmark_count: i64,
    comment_count: i64,
    liked: Option<bool>,
    bookmarked: Option<bool>,
    following_journalist: Option<bool>,
    following_organization: Option<bool>,
    body: Option<String>,
}

impl ArticleRow {
    /// The row as an `Article`; `None` when it was selected without its body.
    fn into_article(mut self) -> Option<Article> {
        let body = self.body.take()?;
        Some(Article {
            item: self.into(),
            body,
        })
    }
}

impl From<ArticleRow> for ArticleItem {
    fn from(row: ArticleRow) -> Self {
        // The viewer columns are all NULL for an anonymous reader and all set for a caller.
        let viewer = match (
            row.liked,
            row.bookmarked,
            row.following_journalist,
            row.following_organization,
        ) {
            (
                Some(liked),
                Some(bookmarked),
                Some(following_journalist),
                Some(following_organization),
            ) => Some(ArticleViewer {
                liked,
                bookmarked,
                following_journalist,
                following_organization,
            }),
            _ => None,
        };
        Self {
            organization: Named {
                id: row.organization_id.clone(),
                name: row.organization_name,
            },
            journalist: Named {
                id: row.journalist_id.clone(),
                name: row.journalist_name,
            },
            id: row.id,
            title: row.title,
            summary: row.summary,
            url: row.url,
            published_at: row.published_at,
            organization_id: row.organization_id,
            journalist_id: row.journalist_id,
            like_count: row.like_count,
            bookmark_count: row.bookmark_count,
            comment_count: row.comment_count,
            viewer,
        }
    }
}

/// The columns of an `ArticleRow` over `articles a JOIN organizations o JOIN journalists j`.
/// Counts are COUNTs over the engagement rows (primary-key index scans), so they are exact.
fn push_item_columns(qb: &mut QueryBuilder<'_, Postgres>, viewer: Option<&str>, with_body: bool) {
    qb.push(
        "SELECT a.id, a.title, a.summary, a.url, a.published_at, \
         a.organization_id, \
         (SELECT o.name FROM organizations o WHERE o.id = a.organization_id) AS organization_name, \
         a.journalist_id, \
         (SELECT j.name FROM journalists j WHERE j.id = a.journalist_id) AS journalist_name, \
         (SELECT count(*) FROM likes x WHERE x.article_id = a.id) AS like_count, \
         (SELECT count(*) FROM bookmarks x WHERE x.article_id = a.id) AS bookmark_count, \
         (SELECT count(*) FROM comments x WHERE x.article_id = a.id) AS comment_count, ",
    );
    match viewer {
        Some(user) => {
            qb.push("EXISTS (SELECT 1 FROM likes x WHERE x.article_id = a.id AND x.user_id = ")
                .push_bind(user.to_owned())
                .push(") AS liked, EXISTS (SELECT 1 FROM bookmarks x WHERE x.article_id = a.id AND x.user_id = ")
                .push_bind(user.to_owned())
                .push(") AS bookmarked, EXISTS (SELECT 1 FROM journalist_follows x WHERE x.journalist_id = a.journalist_id AND x.user_id = ")
                .push_bind(user.to_owned())
                .push(") AS following_journalist, EXISTS (SELECT 1 FROM organization_follows x WHERE x.organization_id = a.organization_id AND x.user_id = ")
                .push_bind(user.to_owned())
                .push(") AS following_organization, ");
        }
        None => {
            qb.push(
                "NULL::boolean AS liked, NULL::boolean AS bookmarked, \
                 NULL::boolean AS following_journalist, NULL::boolean AS following_organization, ",
            );
        }
    }
    qb.push(if with_body {
        "a.body"
    } else {
        "NULL::text AS body"
    });
}

// Names come from scalar subqueries in the select list rather than joins, so a list keeps the
// order of its index scan (no Sort) and only the rows of the page look anything up.
const FROM_ARTICLES: &str = " FROM articles a";

/// What an article list selects, and where its page starts.
#[derive(Debug, Clone, Default)]
pub struct ListSpec {
    pub viewer: Option<String>,
    pub organization_id: Option<String>,
    pub journalist_id: Option<String>,
    /// Only articles by journalists or organisations this user follows (`/me/feed`).
    /// (A caller id comes from a verified token, not from the request line.)
    pub followed_by: Option<String>,
    /// Keyset position: rows strictly after this `(published_at, id)` in list order.
    pub after: Option<(DateTime<Utc>, String)>,
    pub limit: i64,
    pub offset: i64,
}

/// The list query, newest first, ties by id descending. Each filter combination is its own
/// statement text (no `$1 IS NULL OR ...`), so Postgres plans it against the matching
/// `(filter, published_at DESC, id DESC)` index. The page is chosen in a subquery first, so the
/// counts and viewer flags are computed for the page's rows only, never for the rows an OFFSET
/// skips. `prefix` lets tests prepend `EXPLAIN`.
pub fn list_query(prefix: &str, spec: &ListSpec) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    push_item_columns(&mut qb, spec.viewer.as_deref(), false);
    qb.push(" FROM (SELECT * FROM articles a WHERE true");
    if let Some(organization_id) = &spec.organization_id {
        qb.push(" AND a.organization_id = ")
            .push_bind(organization_id.clone());
    }
    if let Some(journalist_id) = &spec.journalist_id {
        qb.push(" AND a.journalist_id = ")
            .push_bind(journalist_id.clone());
    }
    if let Some(user) = &spec.followed_by {
        qb.push(" AND (a.journalist_id IN (SELECT journalist_id FROM journalist_follows WHERE user_id = ")
            .push_bind(user.clone())
            .push(") OR a.organization_id IN (SELECT organization_id FROM organization_follows WHERE user_id = ")
            .push_bind(user.clone())
            .push("))");
    }
    if let Some((published_at, id)) = &spec.after {
        qb.push(" AND (a.published_at, a.id) < (")
            .push_bind(*published_at)
            .push(", ")
            .push_bind(id.clone())
            .push(")");
    }
    qb.push(" ORDER BY a.published_at DESC, a.id DESC LIMIT ")
        .push_bind(spec.limit)
        .push(" OFFSET ")
        .push_bind(spec.offset)
        .push(") a ORDER BY a.published_at DESC, a.id DESC");
    qb
}

/// Offset or cursor paging of an article list, checked against the contract.
pub struct ListPaging {
    pub paging: Paging,
    pub cursor: Option<Cursor>,
}

impl ListSpec {
    /// Whether a filter names an id no row can have, so the list is empty without a query.
    fn matches_nothing(&self) -> bool {
        [&self.organization_id, &self.journalist_id]
            .into_iter()
            .flatten()
            .any(|id| !can_exist(id))
    }
}

impl ListPaging {
    pub fn parse(
        limit: Option<i64>,
        offset: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<Self, Problem> {
        if offset.is_some() && cursor.is_some() {
            return Err(Problem::invalid_query(
                "give either offset or cursor, not both",
            ));
        }
        let paging = Paging::new(limit, offset)?;
        let cursor = cursor
            .map(Cursor::decode)
            .transpose()
            .map_err(invalid_cursor)?;
        Ok(Self { paging, cursor })
    }
}

pub fn invalid_cursor(error: CursorError) -> Problem {
    Problem::new(axum::http::StatusCode::BAD_REQUEST, "invalid_cursor")
        .with_detail(error.to_string())
}

/// Runs a list query and builds the page with `next_cursor` (continuing the same list and filters).
pub async fn fetch_cursor_page(
    pool: &PgPool,
    kind: ListKind,
    mut spec: ListSpec,
    paging: &ListPaging,
) -> Result<ArticlePage> {
    spec.limit = paging.paging.fetch_limit();
    spec.offset = paging.paging.offset;
    if let Some(cursor) = &paging.cursor {
        let published_at = cursor
            .published_at()
            .ok_or_else(|| invalid_cursor(CursorError::Undecodable))?;
        spec.after = Some((published_at, cursor.id.clone()));
    }
    let rows: Vec<ArticleRow> = if spec.matches_nothing() {
        Vec::new()
    } else {
        list_query("", &spec)
            .build_query_as()
            .fetch_all(pool)
            .await?
    };
    let limit = paging.paging.limit as usize;
    let next_cursor = (rows.len() > limit).then(|| {
        let last = &rows[limit - 1];
        Cursor {
            kind,
            published_at_micros: last.published_at.timestamp_micros(),
            id: last.id.clone(),
            organization_id: spec.organization_id.clone(),
            journalist_id: spec.journalist_id.clone(),
        }
        .encode()
    });
    let mut page = Page::from_rows(rows, paging.paging).map(ArticleItem::from);
    if paging.cursor.is_some() {
        // A cursor page has no absolute position: continue with `next_cursor`.
        page.next_offset = None;
    }
    Ok(ArticlePage {
        data: page.data,
        count: page.count,
        limit: page.limit,
        offset: page.offset,
        next_offset: page.next_offset,
        next_cursor,
    })
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
    limit: Option<i64>,
    /// Items to skip; not together with `cursor`.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    offset: Option<i64>,
    /// A `next_cursor` from an earlier page (keyset paging); not together with `offset`. The
    /// filters given with it must equal the cursor's (those left out are taken from it).
    cursor: Option<String>,
}

/// List articles, newest `published_at` first (ties by `id` descending).
///
/// Anonymous answers are cacheable (`ETag`, `Cache-Control: public, max-age=30`, 304 for a
/// matching `If-None-Match`); answers to a caller with a valid token are
/// `Cache-Control: private, no-store` and carry `viewer`.
#[utoipa::path(
    get,
    path = "/v1/news/articles",
    operation_id = "news_list_articles",
    tag = "news-articles",
    params(ListQuery, crate::openapi::IfNoneMatch),
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
        (status = 304, response = inline(NotModified)),
        (status = 400, response = inline(BadListQuery)),
        (status = 401, response = inline(Unauthorized)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn list_articles(
    State(state): State<AppState>,
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
            .map_err(invalid_cursor)?,
        None => (query.organization_id, query.journalist_id),
    };
    let viewer = caller.map(|c| c.sub);
    let spec = ListSpec {
        viewer,
        organization_id,
        journalist_id,
        ..ListSpec::default()
    };
    let signed_in = spec.viewer.is_some();
    let (spec, paging) = (&spec, &paging);
    let page = state
        .pools
        .read(signed_in, |pool| async move {
            fetch_cursor_page(&pool, ListKind::Articles, spec.clone(), paging).await
        })
        .await?;
    Ok(json_read(&headers, signed_in, &page))
}

/// One article with its body, as `viewer` sees it; `None` when there is no such article.
pub async fn find_article(
    pool: &PgPool,
    id: &str,
    viewer: Option<&str>,
) -> Result<Option<Article>> {
    if !can_exist(id) {
        return Ok(None);
    }
    let mut qb = QueryBuilder::new("");
    push_item_columns(&mut qb, viewer, true);
    qb.push(FROM_ARTICLES)
        .push(" WHERE a.id = ")
        .push_bind(id.to_owned());
    let row: Option<ArticleRow> = qb.build_query_as().fetch_optional(pool).await?;
    Ok(row.and_then(ArticleRow::into_article))
}

/// One article with its body; cacheable like the list.
#[utoipa::path(
    get,
    path = "/v1/news/articles/{article_id}",
    operation_id = "news_get_article",
    tag = "news-articles",
    params(("article_id" = String, Path, min_length = 1, max_length = 255, example = "art-000001", description = "An article id (opaque, 1..=255 characters)."), crate::openapi::IfNoneMatch),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The article.", body = Article,
            headers(
                ("Cache-Control" = String, description = "`public, max-age=30` anonymous, `private, no-store` with a token."),
                ("ETag" = String, description = "Strong validator; anonymous answers only."),
                ("Vary" = String, description = "`authorization`."),
            )),
        (status = 304, response = inline(NotModified)),
        (status = 400, response = inline(BadPath)),
        (status = 401, response = inline(Unauthorized)),
        (status = 404, response = inline(ArticleNotFound)),
        (status = 500, response = inline(Internal)),
        (status = 503, response = inline(Unavailable)),
    )
)]
async fn get_article(
    State(state): State<AppState>,
    OptionalCaller(caller): OptionalCaller,
    headers: HeaderMap,
    Path(article_id): Path<String>,
) -> Result<Response> {
    let viewer = caller.map(|c| c.sub);
    let (id, viewer_id) = (&article_id, viewer.as_deref());
    let article = state
        .pools
        .read(viewer.is_some(), |pool| async move {
            find_article(&pool, id, viewer_id).await
        })
        .await?
        .ok_or_else(|| {
            Problem::not_found("article_not_found").with_detail("no article has this id")
        })?;
    Ok(json_read(&headers, viewer.is_some(), &article))
}

/// `/me/bookmarks`: the caller's bookmarked articles, most recently bookmarked first.
pub fn push_bookmarks_query(qb: &mut QueryBuilder<'static, Postgres>, user: &str, paging: Paging) {
    push_item_columns(qb, Some(user), false);
    qb.push(FROM_ARTICLES)
        .push(" JOIN bookmarks mine ON mine.article_id = a.id AND mine.user_id = ")
        .push_bind(user.to_owned())
        .push(" ORDER BY mine.created_at DESC, mine.article_id DESC LIMIT ")
        .push_bind(paging.fetch_limit())
        .push(" OFFSET ")
        .push_bind(paging.offset);
}
