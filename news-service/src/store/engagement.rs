//! Engagement edges between a caller and a target: likes and bookmarks of articles, follows of
//! journalists and organisations. Each edge has the same three statements (add, remove, count),
//! written out per edge so the compiler checks every one against the migrations. Counts read the
//! counter tables the edge tables' triggers keep (migration `engagement_counters`).

use sqlx::PgExecutor;

use crate::error::{ErrorCode, Result};

/// One kind of engagement edge between a caller and a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    Like,
    Bookmark,
    FollowJournalist,
    FollowOrganization,
}

impl Edge {
    /// The edge's column naming the target; also the target's field in the answer.
    pub fn target_field(self) -> &'static str {
        match self {
            Self::Like | Self::Bookmark => "article_id",
            Self::FollowJournalist => "journalist_id",
            Self::FollowOrganization => "organization_id",
        }
    }

    /// The answer's field saying whether the edge now exists.
    pub fn flag_field(self) -> &'static str {
        match self {
            Self::Like => "liked",
            Self::Bookmark => "bookmarked",
            Self::FollowJournalist | Self::FollowOrganization => "following",
        }
    }

    /// The answer's field with the number of edges to the target.
    pub fn count_field(self) -> &'static str {
        match self {
            Self::Like => "like_count",
            Self::Bookmark => "bookmark_count",
            Self::FollowJournalist | Self::FollowOrganization => "follower_count",
        }
    }

    /// The advisory-lock space of the edge's callers (see [`take_turn`]).
    fn lock_scope(self) -> &'static str {
        match self {
            Self::Like => "news:like",
            Self::Bookmark => "news:bookmark",
            Self::FollowJournalist => "news:follow-journalist",
            Self::FollowOrganization => "news:follow-organization",
        }
    }

    /// The 404 of an unknown target.
    pub fn not_found(self) -> ErrorCode {
        match self {
            Self::Like | Self::Bookmark => ErrorCode::ArticleNotFound,
            Self::FollowJournalist => ErrorCode::JournalistNotFound,
            Self::FollowOrganization => ErrorCode::OrganizationNotFound,
        }
    }
}

/// Makes one caller's requests on one edge take turns until the transaction ends. An answer
/// gives the edge's state after the request's own write and a count read after it: without
/// turns, the same caller's opposite request could commit in between, and a like would answer
/// `liked: true` with a count that no longer had it. Other callers never wait on each other here.
pub async fn take_turn(
    db: impl PgExecutor<'_>,
    edge: Edge,
    target: &str,
    user: &str,
) -> Result<()> {
    let lock = shared_auth::pg::idempotency::lock_key(edge.lock_scope(), user, target);
    sqlx::query!("SELECT FROM pg_advisory_xact_lock($1)", lock)
        .execute(db)
        .await?;
    Ok(())
}

/// Adds (`on`) or removes the caller's edge; `false` when the target does not exist.
pub async fn set(
    db: impl PgExecutor<'_>,
    edge: Edge,
    target: &str,
    user: &str,
    on: bool,
) -> Result<bool> {
    if on {
        add(db, edge, target, user).await
    } else {
        remove(db, edge, target, user).await
    }
}

/// Adds the caller's edge in one statement that also tells whether the target exists; the
/// primary key makes a repeat a no-op. A target removed between the two halves fails
/// `likes_article_id_fkey` / `bookmarks_article_id_fkey` /
/// `journalist_follows_journalist_id_fkey` / `organization_follows_organization_id_fkey`, which
/// `error::on_constraint` turns into the edge's 404.
async fn add(db: impl PgExecutor<'_>, edge: Edge, target: &str, user: &str) -> Result<bool> {
    let exists = match edge {
        Edge::Like => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM articles WHERE id = $1), change AS (INSERT INTO likes (article_id, user_id) SELECT id, $2 FROM target ON CONFLICT DO NOTHING) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
        Edge::Bookmark => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM articles WHERE id = $1), change AS (INSERT INTO bookmarks (article_id, user_id) SELECT id, $2 FROM target ON CONFLICT DO NOTHING) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
        Edge::FollowJournalist => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM journalists WHERE id = $1), change AS (INSERT INTO journalist_follows (journalist_id, user_id) SELECT id, $2 FROM target ON CONFLICT DO NOTHING) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
        Edge::FollowOrganization => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM organizations WHERE id = $1), change AS (INSERT INTO organization_follows (organization_id, user_id) SELECT id, $2 FROM target ON CONFLICT DO NOTHING) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
    };
    Ok(exists)
}

/// Removes the caller's edge in one statement that also tells whether the target exists.
async fn remove(db: impl PgExecutor<'_>, edge: Edge, target: &str, user: &str) -> Result<bool> {
    let exists = match edge {
        Edge::Like => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM articles WHERE id = $1), change AS (DELETE FROM likes WHERE article_id = $1 AND user_id = $2) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
        Edge::Bookmark => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM articles WHERE id = $1), change AS (DELETE FROM bookmarks WHERE article_id = $1 AND user_id = $2) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
        Edge::FollowJournalist => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM journalists WHERE id = $1), change AS (DELETE FROM journalist_follows WHERE journalist_id = $1 AND user_id = $2) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
        Edge::FollowOrganization => {
            sqlx::query_scalar!(
                r#"WITH target AS (SELECT id FROM organizations WHERE id = $1), change AS (DELETE FROM organization_follows WHERE organization_id = $1 AND user_id = $2) SELECT EXISTS (SELECT 1 FROM target) AS "exists!""#,
                target,
                user
            )
            .fetch_one(db)
            .await?
        }
    };
    Ok(exists)
}

/// The number of edges to the target: the sum of its counter slots, which the edge table's
/// triggers keep equal to the rows (O(1) however many there are).
pub async fn count(db: impl PgExecutor<'_>, edge: Edge, target: &str) -> Result<i64> {
    let count = match edge {
        Edge::Like => {
            sqlx::query_scalar!(
                r#"SELECT coalesce(sum(like_count), 0)::bigint AS "count!" FROM article_stats WHERE article_id = $1"#,
                target
            )
            .fetch_one(db)
            .await?
        }
        Edge::Bookmark => {
            sqlx::query_scalar!(
                r#"SELECT coalesce(sum(bookmark_count), 0)::bigint AS "count!" FROM article_stats WHERE article_id = $1"#,
                target
            )
            .fetch_one(db)
            .await?
        }
        Edge::FollowJournalist => {
            sqlx::query_scalar!(
                r#"SELECT coalesce(sum(follower_count), 0)::bigint AS "count!" FROM journalist_stats WHERE journalist_id = $1"#,
                target
            )
            .fetch_one(db)
            .await?
        }
        Edge::FollowOrganization => {
            sqlx::query_scalar!(
                r#"SELECT coalesce(sum(follower_count), 0)::bigint AS "count!" FROM organization_stats WHERE organization_id = $1"#,
                target
            )
            .fetch_one(db)
            .await?
        }
    };
    Ok(count)
}
