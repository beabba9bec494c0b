//! Comments: insert one, read one, an article's thread page, and the parent a reply hangs under.
//! Comments and articles are never deleted at run time, so what a create reads still holds at
//! its commit.

use chrono::{DateTime, Utc};
use shared_auth::{Page, Paging};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::domain::comments::ParentRef;
use crate::error::Result;
use crate::views::Comment;

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

/// An article's comments in thread order: one range scan of the `(article_id, path)` index.
pub async fn thread_page(
    db: impl PgExecutor<'_>,
    article_id: &str,
    paging: Paging,
) -> Result<Page<Comment>> {
    let rows = sqlx::query_as!(
        Comment,
        "SELECT id, article_id, parent_id, author_id, text, depth, created_at \
         FROM comments WHERE article_id = $1 ORDER BY path LIMIT $2 OFFSET $3",
        article_id,
        paging.fetch_limit(),
        paging.offset,
    )
    .fetch_all(db)
    .await?;
    Ok(Page::from_rows(rows, paging))
}
