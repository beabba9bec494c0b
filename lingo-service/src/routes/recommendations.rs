//! `GET /v1/lingo/me/recommendations`: the pipeline's recommendations for the caller, best first.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Serialize;
use shared_auth::{Page, PageQuery, Query, RequiredCaller};
use sqlx::{FromRow, PgPool};
use utoipa::ToSchema;

use crate::openapi::{PROBLEM, ProblemDocument};
use crate::routes::phrases::{PHRASE_ITEM_COLUMNS, PhraseItem, PhraseRow};
use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new().route("/me/recommendations", get(list))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "phrase": {
        "id": "ph-es-001", "text": "Buenos días", "language_code": "es", "translation_count": 5,
        "stats": {"view_count": 120, "learner_count": 14, "accuracy": 0.82}
    },
    "score": 0.93,
    "generated_at": "2026-11-21T06:00:00Z"
}))]
pub struct Recommendation {
    pub phrase: PhraseItem,
    /// The pipeline's score; higher is better.
    pub score: f64,
    /// When the pipeline computed this recommendation.
    #[serde(serialize_with = "crate::time::serialize")]
    pub generated_at: DateTime<Utc>,
}

#[derive(FromRow)]
struct RecommendationRow {
    #[sqlx(flatten)]
    phrase: PhraseRow,
    score: f64,
    generated_at: DateTime<Utc>,
}

/// Phrases the pipeline recommends the caller study next, best first.
#[utoipa::path(
    get,
    path = "/v1/lingo/me/recommendations",
    operation_id = "lingo_list_my_recommendations",
    tag = "lingo",
    params(PageQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "One page of recommendations, highest `score` first", body = Page<Recommendation>),
        (status = 400, description = "`invalid_query`: `limit` or `offset` is not an integer or out of range", body = ProblemDocument, content_type = PROBLEM),
    )
)]
async fn list(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    Query(query): Query<PageQuery>,
) -> Result<Json<Page<Recommendation>>> {
    let paging = query.paging()?;
    let sql = format!(
        "SELECT {PHRASE_ITEM_COLUMNS}, r.score, r.generated_at \
         FROM phrase_recommendations r \
         JOIN phrases p ON p.id = r.phrase_id \
         LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id \
         WHERE r.learner_id = $1 \
         ORDER BY r.score DESC, r.phrase_id LIMIT $2 OFFSET $3"
    );
    let rows = sqlx::query_as::<_, RecommendationRow>(&sql)
        .bind(&caller.sub)
        .bind(paging.fetch_limit())
        .bind(paging.offset)
        .fetch_all(&db)
        .await?;
    Ok(Json(Page::from_rows(rows, paging).map(|row| {
        Recommendation {
            phrase: row.phrase.into(),
            score: row.score,
            generated_at: row.generated_at,
        }
    })))
}
