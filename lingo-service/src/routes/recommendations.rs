//! `GET /v1/lingo/me/recommendations`: the pipeline's recommendations for the caller, best first.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{Page, Paging, Query, RequiredCaller};
use sqlx::{FromRow, PgPool};

use crate::routes::phrases::{PHRASE_ITEM_COLUMNS, PhraseItem, PhraseRow};
use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new().route("/me/recommendations", get(list))
}

#[derive(Debug, Serialize)]
pub struct Recommendation {
    pub phrase: PhraseItem,
    pub score: f64,
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

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<i64>,
    offset: Option<i64>,
}

async fn list(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Page<Recommendation>>> {
    let paging = Paging::new(query.limit, query.offset)?;
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
