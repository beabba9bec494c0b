//! Article reads: the list (any filter, offset or keyset position, with or without the viewer's
//! columns), one article, the caller's bookmarks, and whether an article exists. The item
//! columns are one piece of SQL for all of them, so every article answer counts the same way.

use chrono::{DateTime, Utc};
use shared_auth::Paging;
use shared_auth::pg::push_opaque;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{FromRow, PgExecutor, Postgres, QueryBuilder};

use crate::domain::articles::{Article, ArticleItem, ArticlePage, ArticleViewer, Named};
use crate::domain::cursor::CursorPage;
use crate::domain::cursor::{
    BookmarkCursor, Cursor, CursorError, KeysetPaging, ListKind, ListPaging, Position,
};
use crate::domain::ids::can_exist;
use crate::error::Result;

#[derive(Debug, FromRow)]
struct ArticleRow {
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
/// Counts are sums of the article's counter slots (kept exact by triggers, see the migration
/// `engagement_counters`), so they cost the same at any size.
fn push_item_columns(qb: &mut QueryBuilder<'_, Postgres>, viewer: Option<&str>, with_body: bool) {
    qb.push(
        "SELECT a.id, a.title, a.summary, a.url, a.published_at, \
         a.organization_id, \
         (SELECT o.name FROM organizations o WHERE o.id = a.organization_id) AS organization_name, \
         a.journalist_id, \
         (SELECT j.name FROM journalists j WHERE j.id = a.journalist_id) AS journalist_name, \
         (SELECT coalesce(sum(s.like_count), 0)::bigint FROM article_stats s WHERE s.article_id = a.id) AS like_count, \
         (SELECT coalesce(sum(s.bookmark_count), 0)::bigint FROM article_stats s WHERE s.article_id = a.id) AS bookmark_count, \
         (SELECT coalesce(sum(s.comment_count), 0)::bigint FROM article_stats s WHERE s.article_id = a.id) AS comment_count, ",
    );
    match viewer {
        Some(user) => {
            // `OFFSET 0` keeps each flag a lookup per row of the page: without it the plan made
            // without the viewer hashes all of the viewer's rows first (cheap for the average
            // reader it assumes), 2.6 ms for a page of a reader with thousands of bookmarks and
            // follows against 0.45 ms.
            qb.push("EXISTS (SELECT 1 FROM likes x WHERE x.article_id = a.id AND x.user_id = ");
            push_opaque(qb, user.to_owned());
            qb.push(" OFFSET 0) AS liked, EXISTS (SELECT 1 FROM bookmarks x WHERE x.article_id = a.id AND x.user_id = ");
            push_opaque(qb, user.to_owned());
            qb.push(" OFFSET 0) AS bookmarked, EXISTS (SELECT 1 FROM journalist_follows x WHERE x.journalist_id = a.journalist_id AND x.user_id = ");
            push_opaque(qb, user.to_owned());
            qb.push(" OFFSET 0) AS following_journalist, EXISTS (SELECT 1 FROM organization_follows x WHERE x.organization_id = a.organization_id AND x.user_id = ");
            push_opaque(qb, user.to_owned());
            qb.push(" OFFSET 0) AS following_organization, ");
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

impl ListSpec {
    /// Whether a filter names an id no row can have, so the list is empty without a query.
    fn matches_nothing(&self) -> bool {
        [&self.organization_id, &self.journalist_id]
            .into_iter()
            .flatten()
            .any(|id| !can_exist(id))
    }
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
        qb.push(" AND a.organization_id = ");
        push_opaque(&mut qb, organization_id.clone());
    }
    if let Some(journalist_id) = &spec.journalist_id {
        qb.push(" AND a.journalist_id = ");
        push_opaque(&mut qb, journalist_id.clone());
    }
    if let Some(user) = &spec.followed_by {
        qb.push(" AND (a.journalist_id IN (SELECT journalist_id FROM journalist_follows WHERE user_id = ");
        push_opaque(&mut qb, user.clone());
        qb.push(") OR a.organization_id IN (SELECT organization_id FROM organization_follows WHERE user_id = ");
        push_opaque(&mut qb, user.clone());
        qb.push("))");
    }
    if let Some((published_at, id)) = &spec.after {
        qb.push(" AND (a.published_at, a.id) < (");
        push_opaque(&mut qb, *published_at);
        qb.push(", ");
        push_opaque(&mut qb, id.clone());
        qb.push(")");
    }
    qb.push(" ORDER BY a.published_at DESC, a.id DESC");
    push_limit_offset(&mut qb, spec.limit, spec.offset);
    qb.push(") a ORDER BY a.published_at DESC, a.id DESC");
    qb
}

/// ` LIMIT n` written into the statement rather than bound, and ` OFFSET m` (bound) only past
/// the first page. With a bound limit PostgreSQL estimates a prepared statement's plan made
/// without its values (generic) for a tenth of the rows, dearer than the ones made with them
/// (custom), so a list was planned again at every request (0.27 ms of a page 1 of 0.67 ms in
/// PostgreSQL). The limit is the validated paging's (1 to 101), not text from the request, so a
/// connection keeps at most one statement a limit (clients use one or two); an offset stays
/// bound, so paging by offset adds none (those pages are planned with their values, as before).
/// Every other value of a list goes in through [`push_opaque`].
pub(crate) fn push_limit_offset(qb: &mut QueryBuilder<'_, Postgres>, limit: i64, offset: i64) {
    qb.push(format_args!(" LIMIT {limit}"));
    if offset != 0 {
        qb.push(" OFFSET ").push_bind(offset);
    }
}

/// One page of an article list, with `next_cursor` continuing the same list and filters.
pub async fn page(
    db: impl PgExecutor<'_>,
    kind: ListKind,
    mut spec: ListSpec,
    paging: &ListPaging,
) -> Result<ArticlePage> {
    spec.limit = paging.paging.fetch_limit();
    spec.offset = paging.paging.offset;
    if let Some(cursor) = &paging.cursor {
        let published_at = cursor
            .published_at()
            .ok_or(shared_auth::Problem::from(CursorError::Undecodable))?;
        spec.after = Some((published_at, cursor.id.clone()));
    }
    let rows: Vec<ArticleRow> = if spec.matches_nothing() {
        Vec::new()
    } else {
        list_query("", &spec).build_query_as().fetch_all(db).await?
    };
    let page = CursorPage::from_rows(rows, paging.paging, paging.cursor.is_some(), |last| {
        Cursor {
            kind,
            published_at_micros: last.published_at.timestamp_micros(),
            id: last.id.clone(),
            organization_id: spec.organization_id.clone(),
            journalist_id: spec.journalist_id.clone(),
        }
        .encode()
    })
    .map(ArticleItem::from);
    Ok(page.into())
}

/// One article with its body, as `viewer` sees it; `None` when there is no such article.
pub async fn find(
    db: impl PgExecutor<'_>,
    id: &str,
    viewer: Option<&str>,
) -> Result<Option<Article>> {
    if !can_exist(id) {
        return Ok(None);
    }
    let row: Option<ArticleRow> = article_query("", id, viewer)
        .build_query_as()
        .fetch_optional(db)
        .await?;
    Ok(row.and_then(ArticleRow::into_article))
}

/// The statement of one article with its body; `prefix` lets tests prepend `EXPLAIN`.
pub fn article_query(
    prefix: &str,
    id: &str,
    viewer: Option<&str>,
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    push_item_columns(&mut qb, viewer, true);
    qb.push(FROM_ARTICLES)
        .push(" WHERE a.id = ")
        .push_bind(id.to_owned());
    qb
}

/// An article of `/me/bookmarks` with the time it was bookmarked (its cursor's key).
#[derive(Debug, FromRow)]
struct BookmarkRow {
    #[sqlx(flatten)]
    article: ArticleRow,
    bookmarked_at: DateTime<Utc>,
}

/// The bookmarks statement: the user's bookmarks, most recently bookmarked first, ties by article
/// id descending, strictly after `after` when given. The page is chosen from the
/// `(user_id, created_at DESC, article_id DESC)` index first (a range scan from the cursor), so
/// article columns are computed for its rows only. `prefix` lets tests prepend `EXPLAIN`.
pub fn bookmarks_query(
    prefix: &str,
    user: &str,
    after: Option<(DateTime<Utc>, String)>,
    paging: Paging,
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    push_item_columns(&mut qb, Some(user), false);
    qb.push(", mine.created_at AS bookmarked_at FROM (SELECT b.article_id, b.created_at FROM bookmarks b WHERE b.user_id = ");
    push_opaque(&mut qb, user.to_owned());
    if let Some((bookmarked_at, article_id)) = after {
        qb.push(" AND (b.created_at, b.article_id) < (");
        push_opaque(&mut qb, bookmarked_at);
        qb.push(", ");
        push_opaque(&mut qb, article_id);
        qb.push(")");
    }
    qb.push(" ORDER BY b.created_at DESC, b.article_id DESC");
    push_limit_offset(&mut qb, paging.fetch_limit(), paging.offset);
    qb.push(") mine JOIN articles a ON a.id = mine.article_id")
        .push(" ORDER BY mine.created_at DESC, mine.article_id DESC");
    qb
}

/// `/me/bookmarks`: the user's bookmarked articles, most recently bookmarked first, from an
/// offset or after a cursor, with the cursor that continues after the page.
pub async fn bookmarked_by(
    db: impl PgExecutor<'_>,
    user: &str,
    paging: &KeysetPaging<BookmarkCursor>,
) -> Result<ArticlePage> {
    let after = match &paging.after {
        Some(cursor) => Some((
            cursor
                .bookmarked_at()
                .ok_or(shared_auth::Problem::from(CursorError::Undecodable))?,
            cursor.article_id.clone(),
        )),
        None => None,
    };
    let rows: Vec<BookmarkRow> = bookmarks_query("", user, after, paging.paging)
        .build_query_as()
        .fetch_all(db)
        .await?;
    let page = CursorPage::from_rows(rows, paging.paging, paging.after.is_some(), |last| {
        BookmarkCursor::after(last.bookmarked_at, &last.article.id).encode()
    })
    .map(|row| ArticleItem::from(row.article));
    Ok(page.into())
}

/// Whether an article has this id.
pub async fn exists(db: impl PgExecutor<'_>, id: &str) -> Result<bool> {
    if !can_exist(id) {
        return Ok(false);
    }
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM articles WHERE id = $1) AS "exists!""#,
        id
    )
    .fetch_one(db)
    .await?;
    Ok(found)
}

/// `SELECT <list item columns>, <extra> FROM (<source>) a`: the list items of the articles
/// `source` selects (a statement over `articles a`, whose own order and limit choose the rows;
/// they come back in any order) as `viewer` sees them, with the columns `extra` pushes (after
/// `, `). Search pages read their hits and what the highlights need here, in one statement.
/// `prefix` lets tests prepend `EXPLAIN`.
pub fn items_query(
    prefix: &str,
    viewer: Option<&str>,
    source: impl FnOnce(&mut QueryBuilder<'static, Postgres>),
    extra: impl FnOnce(&mut QueryBuilder<'static, Postgres>),
) -> QueryBuilder<'static, Postgres> {
    let mut qb = QueryBuilder::new(prefix);
    push_item_columns(&mut qb, viewer, false);
    qb.push(", ");
    extra(&mut qb);
    qb.push(" FROM (");
    source(&mut qb);
    qb.push(") a");
    qb
}

/// The rows of an [`items_query`]: each article's item and its `extra` columns as `T`.
pub async fn fetch_items<'q, T>(
    db: impl PgExecutor<'_>,
    query: Query<'q, Postgres, PgArguments>,
) -> Result<Vec<(ArticleItem, T)>>
where
    T: for<'r> FromRow<'r, PgRow>,
{
    let rows: Vec<PgRow> = query.fetch_all(db).await?;
    rows.iter()
        .map(|row| Ok((ArticleRow::from_row(row)?.into(), T::from_row(row)?)))
        .collect()
}
