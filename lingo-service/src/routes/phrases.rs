//! `GET /v1/lingo/phrases` (paged `PhraseItem`s with cached stats) and `GET /phrases/{id}`.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use shared_auth::{OptionalCaller, Page, Paging, Problem, Query};
use sqlx::{FromRow, PgPool};
use utoipa::{IntoParams, ToSchema};

use crate::db::is_storable;
use crate::openapi::{PROBLEM, ProblemDocument};
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

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "ph-es-001", "text": "Buenos días", "language_code": "es", "translation_count": 5,
    "stats": {"view_count": 120, "learner_count": 14, "accuracy": 0.82}
}))]
pub struct PhraseItem {
    pub id: String,
    pub text: String,
    pub language_code: String,
    /// Number of translations of this phrase.
    #[schema(minimum = 0)]
    pub translation_count: i64,
    /// From the pipeline's stats cache; null when it has none for this phrase.
    pub stats: Option<PhraseStats>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PhraseStats {
    #[schema(minimum = 0)]
    pub view_count: i64,
    #[schema(minimum = 0)]
    pub learner_count: i64,
    /// Share of correct answers, 0..=1; null when nobody answered yet.
    #[schema(minimum = 0.0, maximum = 1.0)]
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

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only phrases in this language (their own language, not a translation's); an unknown
    /// language gives an empty page.
    #[param(example = "es")]
    language: Option<String>,
    /// Page size.
    #[param(minimum = 1, maximum = 100, default = 20)]
    limit: Option<i64>,
    /// Items to skip.
    #[param(minimum = 0, maximum = 10000, default = 0)]
    offset: Option<i64>,
}

/// Phrases of the catalogue with their cached statistics, ordered by `id`.
#[utoipa::path(
    get,
    path = "/v1/lingo/phrases",
    operation_id = "lingo_list_phrases",
    tag = "lingo",
    params(ListQuery),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "One page of phrases, ordered by `id`", body = Page<PhraseItem>),
        (status = 400, description = "`invalid_query`: `limit` or `offset` is not an integer or out of range", body = ProblemDocument, content_type = PROBLEM),
    )
)]
async fn list(
    OptionalCaller(_caller): OptionalCaller,
    State(db): State<PgPool>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Page<PhraseItem>>> {
    let paging = Paging::new(query.limit, query.offset)?;
    if !query.language.as_deref().is_none_or(is_storable) {
        // No language code can contain NUL: the page is empty, like for any unknown language.
        return Ok(Json(Page::from_rows(Vec::new(), paging)));
    }
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

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "ph-es-001", "text": "Buenos días", "language_code": "es",
    "translation": [{"language_code": "de", "text": "Guten Morgen"}, {"language_code": "en", "text": "Good morning"}]
}))]
pub struct Phrase {
    pub id: String,
    pub text: String,
    pub language_code: String,
    /// Every translation, ordered by `language_code`.
    pub translation: Vec<Translation>,
}

#[derive(Debug, Serialize, FromRow, ToSchema)]
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

/// One phrase with all its translations.
#[utoipa::path(
    get,
    path = "/v1/lingo/phrases/{phrase_id}",
    operation_id = "lingo_get_phrase",
    tag = "lingo",
    params(("phrase_id" = String, Path, description = "The phrase's id (opaque)", example = "ph-es-001")),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The phrase and its translations", body = Phrase),
        (status = 404, description = "`phrase_not_found`: no phrase with this id", body = ProblemDocument, content_type = PROBLEM),
    )
)]
async fn show(
    OptionalCaller(_caller): OptionalCaller,
    State(db): State<PgPool>,
    phrase_id: std::result::Result<Path<String>, PathRejection>,
) -> Result<Json<Phrase>> {
    let not_found = || Problem::not_found("phrase_not_found").with_detail("no phrase with this id");
    // An id that is not UTF-8, or holds NUL, cannot name a stored phrase.
    let phrase_id = match phrase_id {
        Ok(Path(id)) if is_storable(&id) => id,
        _ => return Err(not_found().into()),
    };
    let head = sqlx::query_as::<_, PhraseHead>(
        "SELECT id, text, language_code FROM phrases WHERE id = $1",
    )
    .bind(&phrase_id)
    .fetch_optional(&db)
    .await?
    .ok_or_else(not_found)?;
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
