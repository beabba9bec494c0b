//! `GET /v1/lingo/phrases` (paged `PhraseItem`s with cached stats) and `GET /phrases/{id}`.

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shared_auth::{OptionalCaller, Page, Paging, Problem, Query};
use sqlx::{FromRow, PgPool};

use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/phrases", get(list))
        .route("/phrases/{phrase_id}", get(show))
}

/// Columns of a `PhraseItem`; use with [`PHRASE_ITEM_FROM`] (aliases `p` and `s`).
pub const PHRASE_ITEM_COLUMNS: &str = "p.id, p.text, p.language_code, \
     (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = p.id) AS translation_count, \
     s.view_count, s.learner_count, s.accuracy, (s.phrase_id IS NOT NULL) AS has_stats";
pub const PHRASE_ITEM_FROM: &str = "phrases p LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id";

#[derive(Debug, FromRow)]
pub struct PhraseRow {
    pub id: String,
    pub text: String,
    pub language_code: String,
    pub translation_count: i64,
    pub view_count: Option<i64>,
    pub learner_count: Option<i64>,
    pub accuracy: Option<f64>,
    pub has_stats: bool,
}

#[derive(Debug, Serialize)]
pub struct PhraseItem {
    pub id: String,
    pub text: String,
    pub language_code: String,
    pub translation_count: i64,
    /// From the pipeline's stats cache; null when it has none for this phrase.
    pub stats: Option<PhraseStats>,
}

#[derive(Debug, Serialize)]
pub struct PhraseStats {
    pub view_count: i64,
    pub learner_count: i64,
    pub accuracy: Option<f64>,
}

impl From<PhraseRow> for PhraseItem {
    fn from(row: PhraseRow) -> Self {
        let stats = row.has_stats.then(|| PhraseStats {
            view_count: row.view_count.unwrap_or(0),
            learner_count: row.learner_count.unwrap_or(0),
            accuracy: row.accuracy,
        });
        Self {
            id: row.id,
            text: row.text,
            language_code: row.language_code,
            translation_count: row.translation_count,
            stats,
        }
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    language: Option<String>,
    limit: Option<i64>,
    offset: Option<i64>,
}

async fn list(
    OptionalCaller(_caller): OptionalCaller,
    State(db): State<PgPool>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Page<PhraseItem>>> {
    let paging = Paging::new(query.limit, query.offset)?;
    let sql = format!(
        "SELECT {PHRASE_ITEM_COLUMNS} FROM {PHRASE_ITEM_FROM} \
         WHERE ($1::text IS NULL OR p.language_code = $1) \
         ORDER BY p.id LIMIT $2 OFFSET $3"
    );
    let rows = sqlx::query_as::<_, PhraseRow>(&sql)
        .bind(query.language)
        .bind(paging.fetch_limit())
        .bind(paging.offset)
        .fetch_all(&db)
        .await?;
    Ok(Json(Page::from_rows(rows, paging).map(PhraseItem::from)))
}

#[derive(Debug, Serialize)]
pub struct Phrase {
    pub id: String,
    pub text: String,
    pub language_code: String,
    pub translation: Vec<Translation>,
}

#[derive(Debug, Serialize, FromRow)]
pub struct Translation {
    pub language_code: String,
    pub text: String,
}

#[derive(FromRow)]
struct PhraseHead {
    id: String,
    text: String,
    language_code: String,
}

async fn show(
    OptionalCaller(_caller): OptionalCaller,
    State(db): State<PgPool>,
    Path(phrase_id): Path<String>,
) -> Result<Json<Phrase>> {
    let head = sqlx::query_as::<_, PhraseHead>(
        "SELECT id, text, language_code FROM phrases WHERE id = $1",
    )
    .bind(&phrase_id)
    .fetch_optional(&db)
    .await?
    .ok_or_else(|| Problem::not_found("phrase_not_found").with_detail("no phrase with this id"))?;
    let translation = sqlx::query_as::<_, Translation>(
        "SELECT language_code, text FROM phrase_translations \
         WHERE phrase_id = $1 ORDER BY language_code",
    )
    .bind(&phrase_id)
    .fetch_all(&db)
    .await?;
    Ok(Json(Phrase {
        id: head.id,
        text: head.text,
        language_code: head.language_code,
        translation,
    }))
}
