//! Engagement edges between a caller and a target: likes and bookmarks of articles, follows of
//! journalists and organisations. The four share one statement shape over an [`Edge`] (which
//! target table, which edge table), so adding, removing and counting work alike for all of them.

use sqlx::PgExecutor;

use crate::error::{ErrorCode, Result};

/// One kind of engagement edge between a caller and a target. All names are static SQL
/// identifiers of our own schema, never input.
pub struct Edge {
    pub target_table: &'static str,
    pub edge_table: &'static str,
    /// The edge's column naming the target; also the target's field in the answer.
    pub target_column: &'static str,
    /// The answer's field saying whether the edge now exists.
    pub flag_field: &'static str,
    /// The answer's field with the number of edges to the target.
    pub count_field: &'static str,
    /// The 404 of an unknown target.
    pub not_found: ErrorCode,
}

pub const LIKE: Edge = Edge {
    target_table: "articles",
    edge_table: "likes",
    target_column: "article_id",
    flag_field: "liked",
    count_field: "like_count",
    not_found: ErrorCode::ArticleNotFound,
};
pub const BOOKMARK: Edge = Edge {
    target_table: "articles",
    edge_table: "bookmarks",
    target_column: "article_id",
    flag_field: "bookmarked",
    count_field: "bookmark_count",
    not_found: ErrorCode::ArticleNotFound,
};
pub const FOLLOW_JOURNALIST: Edge = Edge {
    target_table: "journalists",
    edge_table: "journalist_follows",
    target_column: "journalist_id",
    flag_field: "following",
    count_field: "follower_count",
    not_found: ErrorCode::JournalistNotFound,
};
pub const FOLLOW_ORGANIZATION: Edge = Edge {
    target_table: "organizations",
    edge_table: "organization_follows",
    target_column: "organization_id",
    flag_field: "following",
    count_field: "follower_count",
    not_found: ErrorCode::OrganizationNotFound,
};

impl Edge {
    /// Adds (`on`) or removes the caller's edge in one statement that also tells whether the
    /// target exists; the primary key makes a repeat a no-op. A target removed between the two
    /// halves fails `<edge>_<target>_fkey` (`likes_article_id_fkey`, ...), which
    /// `error::on_constraint` turns into this edge's 404.
    pub async fn set(
        &self,
        db: impl PgExecutor<'_>,
        target: &str,
        user: &str,
        on: bool,
    ) -> Result<bool> {
        let change = if on {
            format!(
                "INSERT INTO {edge} ({col}, user_id) SELECT id, $2 FROM target ON CONFLICT DO NOTHING",
                edge = self.edge_table,
                col = self.target_column
            )
        } else {
            format!(
                "DELETE FROM {edge} WHERE {col} = $1 AND user_id = $2",
                edge = self.edge_table,
                col = self.target_column
            )
        };
        let sql = format!(
            "WITH target AS (SELECT id FROM {table} WHERE id = $1), change AS ({change}) \
             SELECT EXISTS (SELECT 1 FROM target)",
            table = self.target_table
        );
        Ok(sqlx::query_scalar(&sql)
            .bind(target)
            .bind(user)
            .fetch_one(db)
            .await?)
    }

    /// The number of edges to the target, counted (not cached), so it equals the rows.
    pub async fn count(&self, db: impl PgExecutor<'_>, target: &str) -> Result<i64> {
        let sql = format!(
            "SELECT count(*) FROM {edge} WHERE {col} = $1",
            edge = self.edge_table,
            col = self.target_column
        );
        Ok(sqlx::query_scalar(&sql).bind(target).fetch_one(db).await?)
    }
}
