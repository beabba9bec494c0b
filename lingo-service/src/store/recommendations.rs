//! The pipeline's recommendations of phrases to study (read only: the pipeline writes them).

use chrono::{DateTime, Utc};
use shared_auth::Paging;
use sqlx::PgExecutor;

use crate::domain::catalogue::{PhraseItem, Recommendation};
use crate::error::Result;
use crate::store::phrases::PhraseItemRow;

struct RecommendationRow {
    id: String,
    text: String,
    language_code: String,
    translation_count: i64,
    view_count: Option<i64>,
    learner_count: Option<i64>,
    accuracy: Option<f64>,
    has_stats: bool,
    score: f64,
    generated_at: DateTime<Utc>,
}

impl From<RecommendationRow> for Recommendation {
    fn from(row: RecommendationRow) -> Self {
        let phrase = PhraseItemRow {
            id: row.id,
            text: row.text,
            language_code: row.language_code,
            translation_count: row.translation_count,
            view_count: row.view_count,
            learner_count: row.learner_count,
            accuracy: row.accuracy,
            has_stats: row.has_stats,
        };
        Self {
            phrase: PhraseItem::from(phrase),
            score: row.score,
            generated_at: row.generated_at,
        }
    }
}

/// One page (plus one row) of `learner_id`'s recommendations, best first (`score` descending,
/// then `phrase_id`), starting after `after` (a score and a phrase id) when given. The index
/// `(learner_id, score DESC, phrase_id)` is read from that score on: only rows of exactly that
/// score and an earlier phrase id are read and skipped. Without `after` the bound is NaN, which
/// PostgreSQL orders above every other score.
pub async fn list_for<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
    after: Option<(f64, &str)>,
    paging: Paging,
) -> Result<Vec<Recommendation>> {
    let (score, after_id) = after.unwrap_or((f64::NAN, ""));
    let rows = sqlx::query_as!(
        RecommendationRow,
        r#"SELECT p.id, p.text, p.language_code,
             p.translation_count AS "translation_count!",
             s.view_count AS "view_count?", s.learner_count AS "learner_count?",
             s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!",
             r.score, r.generated_at
           FROM phrase_recommendations r
           JOIN phrases p ON p.id = r.phrase_id
           LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
           WHERE r.learner_id = $1 AND r.score <= $2
             AND (r.score < $2 OR r.phrase_id > $3)
           ORDER BY r.score DESC, r.phrase_id LIMIT $4 OFFSET $5"#,
        learner_id,
        score,
        after_id,
        paging.fetch_limit(),
        paging.offset,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Recommendation::from).collect())
}
