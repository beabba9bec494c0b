//! `GET /v1/lingo/me/recommendations`: the pipeline's recommendations for the caller, best first.

use axum::Json;
use axum::extract::State;
use shared_auth::{Query, RequiredCaller};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::catalogue::Recommendation;
use crate::domain::cursor::{CursorPage, CursorPageQuery, ListCursor, RecommendationsCursor};
use crate::error::Result;
use crate::problems::ListProblems;
use crate::state::{AppState, Db};
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Phrases the pipeline recommends the caller study next, best first (highest `score`, ties by
/// phrase `id`).
///
/// `offset` jumps to a page near the start; to walk the whole list, pass each page's
/// `next_cursor` as `cursor`.
#[utoipa::path(
    get,
    path = "/me/recommendations",
    operation_id = "lingo_list_my_recommendations",
    tag = "lingo",
    params(CursorPageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of recommendations, highest `score` first", body = CursorPage<Recommendation>,
            links(
                ("NextPage" = (operation_id = "lingo_list_my_recommendations",
                    parameters(("cursor" = "$response.body#/next_cursor")))),
            )),
        ListProblems,
    )
)]
async fn list(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
    Query(query): Query<CursorPageQuery>,
) -> Result<Json<CursorPage<Recommendation>>> {
    let list = query.paging()?;
    let after = list
        .own_cursor::<RecommendationsCursor>()?
        .map(|cursor| (cursor.score(), cursor.phrase_id.as_str()));
    let rows =
        store::recommendations::list_for(&db.primary, &caller.sub, after, list.paging).await?;
    Ok(Json(CursorPage::from_rows(rows, &list, |row| {
        ListCursor::Recommendations(RecommendationsCursor {
            score_bits: row.score.to_bits(),
            phrase_id: row.phrase.id.clone(),
        })
    })))
}
