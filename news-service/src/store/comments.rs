//! Comments: insert one, read one, an article's thread page, and the parent a reply hangs under.
//! Comments and articles are never deleted at run time, so what a create reads still holds at
//! its commit.

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgExecutor};
use uuid::Uuid;

use crate::domain::comments::Comment;
use crate::domain::comments::ParentRef;
use crate::domain::cursor::CursorPage;
use crate::domain::cursor::{KeysetPaging, Position, ThreadCursor};
use crate::error::Result;

/// A comment about to be stored; `depth` and `path` come from `domain::comments::placement`.
pub struct NewComment<'a> {
    pub id: Uuid,
    pub article_id: &'a str,
    pub parent_id: Option<Uuid>,
    pub author_id: &'a str,
    pub text: &'a str,
    pub depth: i16,
    pub path: &'a str,
    pub created_at: DateTime<Utc>,
}

/// Inserts the comment. A concurrent change that removed its article or parent would fail
/// `comments_article_id_fkey` / `comments_parent_id_fkey`, which `error::on_constraint` turns
/// into 422 `unknown_article` / `unknown_parent`.
pub async fn insert(db: impl PgExecutor<'_>, new: &NewComment<'_>) -> Result<Comment> {
    let comment = sqlx::query_as!(
        Comment,
        "INSERT INTO comments (id, article_id, parent_id, author_id, text, depth, path, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         RETURNING id, article_id, parent_id, author_id, text, depth, created_at",
        new.id,
        new.article_id,
        new.parent_id,
        new.author_id,
        new.text,
        new.depth,
        new.path,
        new.created_at,
    )
    .fetch_one(db)
    .await?;
    Ok(comment)
}

pub async fn find(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<Comment>> {
    let comment = sqlx::query_as!(
        Comment,
        "SELECT id, article_id, parent_id, author_id, text, depth, created_at \
         FROM comments WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(comment)
}

/// What a reply needs to know of its parent: its article, depth and thread path.
pub async fn find_parent(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<ParentRef>> {
    let parent = sqlx::query_as!(
        ParentRef,
        "SELECT article_id, depth, path FROM comments WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(parent)
}

/// A comment with its thread path, which orders the thread and positions its cursor.
#[derive(FromRow)]
struct ThreadRow {
    id: Uuid,
    article_id: String,
    parent_id: Option<Uuid>,
    author_id: String,
    text: String,
    depth: i16,
    created_at: DateTime<Utc>,
    path: String,
}

impl From<ThreadRow> for Comment {
    fn from(row: ThreadRow) -> Self {
        Self {
            id: row.id,
            article_id: row.article_id,
            parent_id: row.parent_id,
            author_id: row.author_id,
            text: row.text,
            depth: row.depth,
            created_at: row.created_at,
        }
    }
}

/// The thread statement: comments of article `$1` after path `$2` in thread order, `$3` of
/// them from offset `$4`. Every path is longer than `''`, so `''` starts at the beginning. One
/// range scan of the `(article_id, path)` index, whether the page starts at an offset or after a
/// cursor's path. A plain statement rather than `query_as!` so the plan test can EXPLAIN this
/// very text (it runs it against the migrated schema, which is what the macro's check would do).
///
/// Every value is an init plan `(SELECT $n)` the planner cannot see, so the plan made with the
/// values is the one made without them and the connection keeps that one after five executions.
/// With visible values an article with thousands of comments was planned at every request (its
/// custom plan looks cheaper than a plan for an average article): 0.05-0.06 ms of planning for
/// 0.03 ms of execution.
pub const THREAD_PAGE: &str = "SELECT id, article_id, parent_id, author_id, text, depth, created_at, path \
     FROM comments WHERE article_id = (SELECT $1::text) AND path > (SELECT $2::text) \
     ORDER BY path LIMIT (SELECT $3::bigint) OFFSET (SELECT $4::bigint)";

/// An article's comments in thread order, from an offset or after a cursor, with the cursor
/// that continues after the page.
pub async fn thread_page(
    db: impl PgExecutor<'_>,
    article_id: &str,
    paging: &KeysetPaging<ThreadCursor>,
) -> Result<CursorPage<Comment>> {
    let after = paging
        .after
        .as_ref()
        .map_or("", |cursor| cursor.path.as_str());
    let rows: Vec<ThreadRow> = sqlx::query_as(THREAD_PAGE)
        .bind(article_id)
        .bind(after)
        .bind(paging.paging.fetch_limit())
        .bind(paging.paging.offset)
        .fetch_all(db)
        .await?;
    let page = CursorPage::from_rows(rows, paging.paging, paging.after.is_some(), |last| {
        ThreadCursor::after(article_id, &last.path).encode()
    });
    Ok(page.map(Comment::from))
}
