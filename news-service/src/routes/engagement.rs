//! Like, bookmark, follow journalist, follow organisation: POST is an idempotent upsert, DELETE an
//! idempotent removal, both answering the caller's state and the exact count. An unknown target is
//! 404 and writes nothing. Always on the primary; the count is read from the target's counters in
//! the writing transaction, so the answer includes the caller's own write.

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Map, Value};
use shared_auth::{Problem, RequiredCaller};
use sqlx::PgConnection;
use utoipa::ToSchema;

use crate::AppState;
use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::openapi::{
    ArticleNotFound, BadPath, Internal, JournalistNotFound, OrganizationNotFound, Unauthorized,
    Unavailable,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/articles/{article_id}/like", post(like).delete(unlike))
        .route(
            "/articles/{article_id}/bookmark",
            post(bookmark).delete(unbookmark),
        )
        .route(
            "/journalists/{journalist_id}/follow",
            post(follow_journalist).delete(unfollow_journalist),
        )
        .route(
            "/organizations/{organization_id}/follow",
            post(follow_organization).delete(unfollow_organization),
        )
}

// The answers `Edge::answer` writes, one per edge kind (documentation of its JSON object).

/// The caller's like of an article and the article's like count.
#[derive(ToSchema)]
#[schema(example = json!({"article_id": "art-000001", "liked": true, "like_count": 13}))]
pub struct LikeState {
    pub article_id: String,
    pub liked: bool,
    #[schema(minimum = 0)]
    pub like_count: i64,
}

/// The caller's bookmark of an article and the article's bookmark count.
#[derive(ToSchema)]
#[schema(example = json!({"article_id": "art-000001", "bookmarked": true, "bookmark_count": 4}))]
pub struct BookmarkState {
    pub article_id: String,
    pub bookmarked: bool,
    #[schema(minimum = 0)]
    pub bookmark_count: i64,
}

/// Whether the caller follows the journalist, and the journalist's follower count.
#[derive(ToSchema)]
#[schema(example = json!({"journalist_id": "jrn-0001", "following": true, "follower_count": 8}))]
pub struct JournalistFollowState {
    pub journalist_id: String,
    pub following: bool,
    #[schema(minimum = 0)]
    pub follower_count: i64,
}

/// Whether the caller follows the organisation, and the organisation's follower count.
#[derive(ToSchema)]
#[schema(example = json!({"organization_id": "org-001", "following": true, "follower_count": 21}))]
pub struct OrganizationFollowState {
    pub organization_id: String,
    pub following: bool,
    #[schema(minimum = 0)]
    pub follower_count: i64,
}

/// One kind of engagement edge between a caller and a target. All names are static SQL
/// identifiers of our own schema, never input.
pub struct Edge {
    target_table: &'static str,
    edge_table: &'static str,
    /// The counter table its triggers keep; its counter column is named like `count_field`.
    stats_table: &'static str,
    target_column: &'static str,
    flag_field: &'static str,
    count_field: &'static str,
    not_found: &'static str,
}

pub const LIKE: Edge = Edge {
    target_table: "articles",
    edge_table: "likes",
    stats_table: "article_stats",
    target_column: "article_id",
    flag_field: "liked",
    count_field: "like_count",
    not_found: "article_not_found",
};
pub const BOOKMARK: Edge = Edge {
    target_table: "articles",
    edge_table: "bookmarks",
    stats_table: "article_stats",
    target_column: "article_id",
    flag_field: "bookmarked",
    count_field: "bookmark_count",
    not_found: "article_not_found",
};
pub const FOLLOW_JOURNALIST: Edge = Edge {
    target_table: "journalists",
    edge_table: "journalist_follows",
    stats_table: "journalist_stats",
    target_column: "journalist_id",
    flag_field: "following",
    count_field: "follower_count",
    not_found: "journalist_not_found",
};
pub const FOLLOW_ORGANIZATION: Edge = Edge {
    target_table: "organizations",
    edge_table: "organization_follows",
    stats_table: "organization_stats",
    target_column: "organization_id",
    flag_field: "following",
    count_field: "follower_count",
    not_found: "organization_not_found",
};

impl Edge {
    /// Adds (`on`) or removes the caller's edge in one statement that also tells whether the
    /// target exists; the primary key makes a repeat a no-op.
    async fn set(
        &self,
        conn: &mut PgConnection,
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
            .fetch_one(conn)
            .await?)
    }

    /// The number of edges to the target: the sum of its counter slots, which the edge table's
    /// triggers keep equal to the rows (O(1) however many there are).
    pub async fn count(&self, conn: &mut PgConnection, target: &str) -> Result<i64> {
        let sql = format!(
            "SELECT coalesce(sum({counter}), 0)::bigint FROM {stats} WHERE {col} = $1",
            counter = self.count_field,
            stats = self.stats_table,
            col = self.target_column
        );
        Ok(sqlx::query_scalar(&sql)
            .bind(target)
            .fetch_one(conn)
            .await?)
    }

    fn target_not_found(&self) -> crate::error::Error {
        Problem::not_found(self.not_found)
            .with_detail("no such target")
            .into()
    }

    async fn answer(
        &self,
        state: &AppState,
        target: String,
        user: &str,
        on: bool,
    ) -> Result<Json<Value>> {
        if !can_exist(&target) {
            return Err(self.target_not_found());
        }
        let mut tx = state.pools.primary.begin().await?;
        if !self.set(&mut tx, &target, user, on).await? {
            return Err(self.target_not_found());
        }
        let count = self.count(&mut tx, &target).await?;
        tx.commit().await?;
        let mut body = Map::new();
        body.insert(self.target_column.into(), Value::String(target));
        body.insert(self.flag_field.into(), Value::Bool(on));
        body.insert(self.count_field.into(), Value::from(count));
        Ok(Json(Value::Object(body)))
    }
}

macro_rules! edge_handlers {
    ($($(#[$meta:meta])* $name:ident => $edge:expr, $on:expr;)*) => {$(
        $(#[$meta])*
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
    /// Like an article (idempotent: a repeat changes nothing).
    #[utoipa::path(
        post,
        path = "/v1/news/articles/{article_id}/like",
        operation_id = "news_like_article",
        tag = "news-engagement",
        params(("article_id" = String, Path, min_length = 1, max_length = 255, example = "art-000001", description = "An article id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller likes the article.", body = LikeState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(ArticleNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    like => LIKE, true;
    /// Remove the caller's like (idempotent).
    #[utoipa::path(
        delete,
        path = "/v1/news/articles/{article_id}/like",
        operation_id = "news_unlike_article",
        tag = "news-engagement",
        params(("article_id" = String, Path, min_length = 1, max_length = 255, example = "art-000001", description = "An article id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller does not like the article.", body = LikeState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(ArticleNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    unlike => LIKE, false;
    /// Bookmark an article (idempotent).
    #[utoipa::path(
        post,
        path = "/v1/news/articles/{article_id}/bookmark",
        operation_id = "news_bookmark_article",
        tag = "news-engagement",
        params(("article_id" = String, Path, min_length = 1, max_length = 255, example = "art-000001", description = "An article id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller has bookmarked the article.", body = BookmarkState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(ArticleNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    bookmark => BOOKMARK, true;
    /// Remove the caller's bookmark (idempotent).
    #[utoipa::path(
        delete,
        path = "/v1/news/articles/{article_id}/bookmark",
        operation_id = "news_unbookmark_article",
        tag = "news-engagement",
        params(("article_id" = String, Path, min_length = 1, max_length = 255, example = "art-000001", description = "An article id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller has not bookmarked the article.", body = BookmarkState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(ArticleNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    unbookmark => BOOKMARK, false;
    /// Follow a journalist (idempotent).
    #[utoipa::path(
        post,
        path = "/v1/news/journalists/{journalist_id}/follow",
        operation_id = "news_follow_journalist",
        tag = "news-engagement",
        params(("journalist_id" = String, Path, min_length = 1, max_length = 255, example = "jrn-0001", description = "A journalist id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller follows the journalist.", body = JournalistFollowState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(JournalistNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    follow_journalist => FOLLOW_JOURNALIST, true;
    /// Stop following a journalist (idempotent).
    #[utoipa::path(
        delete,
        path = "/v1/news/journalists/{journalist_id}/follow",
        operation_id = "news_unfollow_journalist",
        tag = "news-engagement",
        params(("journalist_id" = String, Path, min_length = 1, max_length = 255, example = "jrn-0001", description = "A journalist id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller does not follow the journalist.", body = JournalistFollowState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(JournalistNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    unfollow_journalist => FOLLOW_JOURNALIST, false;
    /// Follow an organisation (idempotent).
    #[utoipa::path(
        post,
        path = "/v1/news/organizations/{organization_id}/follow",
        operation_id = "news_follow_organization",
        tag = "news-engagement",
        params(("organization_id" = String, Path, min_length = 1, max_length = 255, example = "org-001", description = "An organisation id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller follows the organisation.", body = OrganizationFollowState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(OrganizationNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    follow_organization => FOLLOW_ORGANIZATION, true;
    /// Stop following an organisation (idempotent).
    #[utoipa::path(
        delete,
        path = "/v1/news/organizations/{organization_id}/follow",
        operation_id = "news_unfollow_organization",
        tag = "news-engagement",
        params(("organization_id" = String, Path, min_length = 1, max_length = 255, example = "org-001", description = "An organisation id (opaque, 1..=255 characters).")),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller does not follow the organisation.", body = OrganizationFollowState),
            (status = 400, response = inline(BadPath)),
            (status = 401, response = inline(Unauthorized)),
            (status = 404, response = inline(OrganizationNotFound)),
            (status = 500, response = inline(Internal)),
            (status = 503, response = inline(Unavailable)),
        )
    )]
    unfollow_organization => FOLLOW_ORGANIZATION, false;
}
