//! Like, bookmark, follow journalist, follow organisation: POST is an idempotent upsert, DELETE an
//! idempotent removal, both answering the caller's state and the exact count. An unknown target is
//! 404 and writes nothing. Always on the primary; the count is read from the target's counters in
//! the writing transaction, so the answer includes the caller's own write.
//! The eight handlers are one piece of logic ([`answer`]) over the four edges of `store`.

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value};
use shared_auth::RequiredCaller;
use shared_auth::http::json::NoBody;
use shared_auth::http::path_id::PathId;
use shared_auth::pg::pool::begin_within_deadline;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::ids::can_exist;
use crate::error::Result;
use crate::path_params::{ArticleIdPath, JournalistIdPath, OrganizationIdPath};
use crate::problems::{ArticleEdgeProblems, JournalistEdgeProblems, OrganizationEdgeProblems};
use crate::state::{AppState, Db};
use crate::store::engagement::{self, Edge};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(like, unlike))
        .routes(routes!(bookmark, unbookmark))
        .routes(routes!(follow_journalist, unfollow_journalist))
        .routes(routes!(follow_organization, unfollow_organization))
}

// The answers `answer` writes, one per edge kind (documentation of its JSON object).

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

/// Sets or clears the caller's edge to `target` and answers the edge's state and count.
async fn answer(edge: Edge, db: &Db, target: String, user: &str, on: bool) -> Result<Json<Value>> {
    if !can_exist(&target) {
        return Err(edge.not_found().into());
    }
    let mut tx = begin_within_deadline(&db.primary).await?;
    engagement::take_turn(&mut *tx, edge, &target, user).await?;
    if !engagement::set(&mut *tx, edge, &target, user, on).await? {
        return Err(edge.not_found().into());
    }
    let count = engagement::count(&mut *tx, edge, &target).await?;
    tx.commit().await?;
    let mut body = Map::new();
    body.insert(edge.target_field().into(), Value::String(target));
    body.insert(edge.flag_field().into(), Value::Bool(on));
    body.insert(edge.count_field().into(), Value::from(count));
    Ok(Json(Value::Object(body)))
}

macro_rules! edge_handlers {
    ($($(#[$meta:meta])* $name:ident => $edge:expr, $on:expr;)*) => {$(
        $(#[$meta])*
        async fn $name(
            State(db): State<Db>,
            RequiredCaller(caller): RequiredCaller,
            PathId(id): PathId,
            _: NoBody,
        ) -> Result<Json<Value>> {
            answer($edge, &db, id, &caller.sub, $on).await
        }
    )*};
}

edge_handlers! {
    /// Like an article (idempotent: a repeat changes nothing).
    #[utoipa::path(
        post,
        path = "/articles/{article_id}/like",
        operation_id = "news_like_article",
        tag = "news-engagement",
        params(ArticleIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller likes the article.", body = LikeState),
            ArticleEdgeProblems,
        )
    )]
    like => Edge::Like, true;
    /// Remove the caller's like (idempotent).
    #[utoipa::path(
        delete,
        path = "/articles/{article_id}/like",
        operation_id = "news_unlike_article",
        tag = "news-engagement",
        params(ArticleIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller does not like the article.", body = LikeState),
            ArticleEdgeProblems,
        )
    )]
    unlike => Edge::Like, false;
    /// Bookmark an article (idempotent).
    #[utoipa::path(
        post,
        path = "/articles/{article_id}/bookmark",
        operation_id = "news_bookmark_article",
        tag = "news-engagement",
        params(ArticleIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller has bookmarked the article.", body = BookmarkState),
            ArticleEdgeProblems,
        )
    )]
    bookmark => Edge::Bookmark, true;
    /// Remove the caller's bookmark (idempotent).
    #[utoipa::path(
        delete,
        path = "/articles/{article_id}/bookmark",
        operation_id = "news_unbookmark_article",
        tag = "news-engagement",
        params(ArticleIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller has not bookmarked the article.", body = BookmarkState),
            ArticleEdgeProblems,
        )
    )]
    unbookmark => Edge::Bookmark, false;
    /// Follow a journalist (idempotent).
    #[utoipa::path(
        post,
        path = "/journalists/{journalist_id}/follow",
        operation_id = "news_follow_journalist",
        tag = "news-engagement",
        params(JournalistIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller follows the journalist.", body = JournalistFollowState),
            JournalistEdgeProblems,
        )
    )]
    follow_journalist => Edge::FollowJournalist, true;
    /// Stop following a journalist (idempotent).
    #[utoipa::path(
        delete,
        path = "/journalists/{journalist_id}/follow",
        operation_id = "news_unfollow_journalist",
        tag = "news-engagement",
        params(JournalistIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller does not follow the journalist.", body = JournalistFollowState),
            JournalistEdgeProblems,
        )
    )]
    unfollow_journalist => Edge::FollowJournalist, false;
    /// Follow an organisation (idempotent).
    #[utoipa::path(
        post,
        path = "/organizations/{organization_id}/follow",
        operation_id = "news_follow_organization",
        tag = "news-engagement",
        params(OrganizationIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller follows the organisation.", body = OrganizationFollowState),
            OrganizationEdgeProblems,
        )
    )]
    follow_organization => Edge::FollowOrganization, true;
    /// Stop following an organisation (idempotent).
    #[utoipa::path(
        delete,
        path = "/organizations/{organization_id}/follow",
        operation_id = "news_unfollow_organization",
        tag = "news-engagement",
        params(OrganizationIdPath),
        security(("bearer" = [])),
        responses(
            (status = 200, description = "The caller does not follow the organisation.", body = OrganizationFollowState),
            OrganizationEdgeProblems,
        )
    )]
    unfollow_organization => Edge::FollowOrganization, false;
}
