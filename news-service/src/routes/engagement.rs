//! Like, bookmark, follow journalist, follow organisation: POST is an idempotent upsert, DELETE an
//! idempotent removal, both answering the caller's state and the exact count. An unknown target is
//! 404 and writes nothing. Always on the primary, so the answer includes the caller's own write.

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Map, Value};
use shared_auth::{Problem, RequiredCaller};
use sqlx::PgPool;

use crate::AppState;
use crate::error::Result;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/articles/{id}/like", post(like).delete(unlike))
        .route("/articles/{id}/bookmark", post(bookmark).delete(unbookmark))
        .route(
            "/journalists/{id}/follow",
            post(follow_journalist).delete(unfollow_journalist),
        )
        .route(
            "/organizations/{id}/follow",
            post(follow_organization).delete(unfollow_organization),
        )
}

/// One kind of engagement edge between a caller and a target. All names are static SQL
/// identifiers of our own schema, never input.
pub struct Edge {
    target_table: &'static str,
    edge_table: &'static str,
    target_column: &'static str,
    flag_field: &'static str,
    count_field: &'static str,
    not_found: &'static str,
}

pub const LIKE: Edge = Edge {
    target_table: "articles",
    edge_table: "likes",
    target_column: "article_id",
    flag_field: "liked",
    count_field: "like_count",
    not_found: "article_not_found",
};
pub const BOOKMARK: Edge = Edge {
    target_table: "articles",
    edge_table: "bookmarks",
    target_column: "article_id",
    flag_field: "bookmarked",
    count_field: "bookmark_count",
    not_found: "article_not_found",
};
pub const FOLLOW_JOURNALIST: Edge = Edge {
    target_table: "journalists",
    edge_table: "journalist_follows",
    target_column: "journalist_id",
    flag_field: "following",
    count_field: "follower_count",
    not_found: "journalist_not_found",
};
pub const FOLLOW_ORGANIZATION: Edge = Edge {
    target_table: "organizations",
    edge_table: "organization_follows",
    target_column: "organization_id",
    flag_field: "following",
    count_field: "follower_count",
    not_found: "organization_not_found",
};

impl Edge {
    /// Adds (`on`) or removes the caller's edge in one statement that also tells whether the
    /// target exists; the primary key makes a repeat a no-op.
    async fn set(&self, pool: &PgPool, target: &str, user: &str, on: bool) -> Result<bool> {
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
            .fetch_one(pool)
            .await?)
    }

    /// The number of edges to the target, counted (not cached), so it equals the rows.
    pub async fn count(&self, pool: &PgPool, target: &str) -> Result<i64> {
        let sql = format!(
            "SELECT count(*) FROM {edge} WHERE {col} = $1",
            edge = self.edge_table,
            col = self.target_column
        );
        Ok(sqlx::query_scalar(&sql)
            .bind(target)
            .fetch_one(pool)
            .await?)
    }

    async fn answer(
        &self,
        state: &AppState,
        target: String,
        user: &str,
        on: bool,
    ) -> Result<Json<Value>> {
        let pool = &state.pools.primary;
        if !self.set(pool, &target, user, on).await? {
            return Err(Problem::not_found(self.not_found)
                .with_detail("no such target")
                .into());
        }
        let count = self.count(pool, &target).await?;
        let mut body = Map::new();
        body.insert(self.target_column.into(), Value::String(target));
        body.insert(self.flag_field.into(), Value::Bool(on));
        body.insert(self.count_field.into(), Value::from(count));
        Ok(Json(Value::Object(body)))
    }
}

macro_rules! edge_handlers {
    ($($name:ident => $edge:expr, $on:expr;)*) => {$(
        async fn $name(
            State(state): State<AppState>,
            RequiredCaller(caller): RequiredCaller,
            Path(id): Path<String>,
        ) -> Result<Json<Value>> {
            $edge.answer(&state, id, &caller.sub, $on).await
        }
    )*};
}

edge_handlers! {
    like => LIKE, true;
    unlike => LIKE, false;
    bookmark => BOOKMARK, true;
    unbookmark => BOOKMARK, false;
    follow_journalist => FOLLOW_JOURNALIST, true;
    unfollow_journalist => FOLLOW_JOURNALIST, false;
    follow_organization => FOLLOW_ORGANIZATION, true;
    unfollow_organization => FOLLOW_ORGANIZATION, false;
}
