//! `GET /v1/lingo/me/recommendations`: the pipeline's recommendations for the caller, best first.

use axum::Json;
use axum::extract::State;
use shared_auth::{Page, PageQuery, Query, RequiredCaller};
use sqlx::PgPool;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::catalogue::Recommendation;
use crate::error::Result;
use crate::problems::PagingProblems;
use crate::state::AppState;
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Phrases the pipeline recommends the caller study next, best first.
#[utoipa::path(
    get,
    path = "/me/recommendations",
    operation_id = "lingo_list_my_recommendations",
    tag = "lingo",
    params(PageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of recommendations, highest `score` first", body = Page<Recommendation>),
        PagingProblems,
    )
)]
async fn list(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    Query(query): Query<PageQuery>,
) -> Result<Json<Page<Recommendation>>> {
    let paging = query.paging()?;
    let rows = store::recommendations::list_for(&db, &caller.sub, paging).await?;
    Ok(Json(Page::from_rows(rows, paging)))
}
