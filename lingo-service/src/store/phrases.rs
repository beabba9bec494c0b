//! Phrases of the catalogue with their translations and the pipeline's cached statistics (read
//! only: the pipeline writes them).

use shared_auth::Paging;
use sqlx::{PgExecutor, PgPool};

use crate::domain::catalogue::{Phrase, PhraseItem, PhraseStats, Translation};
use crate::domain::text::is_storable;
use crate::error::Result;

/// A phrase with the stats-cache columns of a `LEFT JOIN`; `has_stats` tells a missing cache
/// row from one whose `accuracy` is null. The recommendations share it.
pub(crate) struct PhraseItemRow {
    pub id: String,
    pub text: String,
    pub language_code: String,
    pub translation_count: i64,
    pub view_count: Option<i64>,
    pub learner_count: Option<i64>,
    pub accuracy: Option<f64>,
    pub has_stats: bool,
}

impl From<PhraseItemRow> for PhraseItem {
    fn from(row: PhraseItemRow) -> Self {
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

/// One page (plus one row, see [`Paging::fetch_limit`]) of phrases ordered by `id`, only those
/// in `language` when given.
pub async fn list<'e>(
    db: impl PgExecutor<'e>,
    language: Option<&str>,
    paging: Paging,
) -> Result<Vec<PhraseItem>> {
    if !language.is_none_or(is_storable) {
        // No language code can contain NUL: like any unknown language, it has no phrases.
        return Ok(Vec::new());
    }
    let rows = sqlx::query_as!(
        PhraseItemRow,
        r#"SELECT p.id, p.text, p.language_code,
             (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = p.id)
               AS "translation_count!",
             s.view_count AS "view_count?", s.learner_count AS "learner_count?",
             s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!"
           FROM phrases p LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
           WHERE ($1::text IS NULL OR p.language_code = $1)
           ORDER BY p.id LIMIT $2 OFFSET $3"#,
        language,
        paging.fetch_limit(),
        paging.offset,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(PhraseItem::from).collect())
}

/// The phrase `id` with every translation, ordered by `language_code`; `None` when there is no
/// such phrase.
pub async fn find(db: &PgPool, id: &str) -> Result<Option<Phrase>> {
    if !is_storable(id) {
        return Ok(None);
    }
    let Some(head) = sqlx::query!(
        "SELECT id, text, language_code FROM phrases WHERE id = $1",
        id
    )
    .fetch_optional(db)
    .await?
    else {
        return Ok(None);
    };
    let translation = sqlx::query_as!(
        Translation,
        "SELECT language_code, text FROM phrase_translations \
         WHERE phrase_id = $1 ORDER BY language_code",
        id
    )
    .fetch_all(db)
    .await?;
    Ok(Some(Phrase {
        id: head.id,
        text: head.text,
        language_code: head.language_code,
        translation,
    }))
}
