//! Phrases of the catalogue with their translations and the pipeline's cached statistics (read
//! only: the pipeline writes them).

use shared_auth::Paging;
use sqlx::{PgExecutor, PgPool};

use crate::domain::catalogue::{Phrase, PhraseItem, PhraseStats, Translation};
use crate::domain::cursor::SearchRank;
use crate::domain::text::is_storable;
use crate::error::Result;

/// A phrase with the stats-cache columns of a `LEFT JOIN`; `has_stats` tells a missing cache
/// row from one whose `accuracy` is null. The rows of the search, the recommendations and a
/// learner's phrase pages hold the same columns (`query_as!` fills flat rows only) and are
/// turned into a [`PhraseItem`] through this one.
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
/// in `language` when given, starting after the phrase `after` when given. Each filter has its
/// own statement, planned against its index (the primary key, or `(language_code, id)`).
///
/// Without a language every value is hidden from the planner ([`shared_auth::pg::push_opaque`]
/// explains why): with visible values it was planned at every request (0.15-0.17 ms of planning
/// for 0.10-0.11 ms of execution); now each connection keeps one plan. With a language the
/// values stay visible, and it is planned for each: a plan made without the language takes it
/// for as common as the average one and walks the primary key, filtering, which for a rare
/// language reads most of the catalogue; with the language in view a rare one is read from
/// `(language_code, id)`.
pub async fn list<'e>(
    db: impl PgExecutor<'e>,
    language: Option<&str>,
    after: Option<&str>,
    paging: Paging,
) -> Result<Vec<PhraseItem>> {
    if !language.is_none_or(is_storable) {
        // No language code can contain NUL: like any unknown language, it has no phrases.
        return Ok(Vec::new());
    }
    // Every id is longer than "" (a CHECK of the table), so "" starts before the first.
    let after = after.unwrap_or("");
    let rows = match language {
        Some(language) => {
            sqlx::query_as!(
                PhraseItemRow,
                r#"SELECT p.id, p.text, p.language_code,
                     p.translation_count AS "translation_count!",
                     s.view_count AS "view_count?", s.learner_count AS "learner_count?",
                     s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!"
                   FROM phrases p LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
                   WHERE p.language_code = $1 AND p.id > $2
                   ORDER BY p.id LIMIT $3 OFFSET $4"#,
                language,
                after,
                paging.fetch_limit(),
                paging.offset,
            )
            .fetch_all(db)
            .await?
        }
        None => {
            sqlx::query_as!(
                PhraseItemRow,
                r#"SELECT p.id, p.text, p.language_code,
                     p.translation_count AS "translation_count!",
                     s.view_count AS "view_count?", s.learner_count AS "learner_count?",
                     s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!"
                   FROM phrases p LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
                   WHERE p.id > (SELECT $1::text)
                   ORDER BY p.id LIMIT (SELECT $2::int8) OFFSET (SELECT $3::int8)"#,
                after,
                paging.fetch_limit(),
                paging.offset,
            )
            .fetch_all(db)
            .await?
        }
    };
    Ok(rows.into_iter().map(PhraseItem::from).collect())
}

/// A row of the search: a match with its rank.
struct SearchRow {
    id: String,
    text: String,
    language_code: String,
    translation_count: i64,
    view_count: Option<i64>,
    learner_count: Option<i64>,
    accuracy: Option<f64>,
    has_stats: bool,
    tier: i32,
    text_length: i32,
}

impl From<SearchRow> for (PhraseItem, SearchRank) {
    fn from(row: SearchRow) -> Self {
        let rank = SearchRank {
            tier: row.tier,
            text_length: row.text_length,
        };
        let item = PhraseItem::from(PhraseItemRow {
            id: row.id,
            text: row.text,
            language_code: row.language_code,
            translation_count: row.translation_count,
            view_count: row.view_count,
            learner_count: row.learner_count,
            accuracy: row.accuracy,
            has_stats: row.has_stats,
        });
        (item, rank)
    }
}

/// One page (plus one row) of the phrases matching the search `text` (trimmed, 1..=100
/// characters), best first (see [`SearchRank`]), only those in `language` when given, starting
/// after `after` when given.
///
/// The matches are ranked by `phrase_search_ranks` (migration
/// `20261127500001_phrase_search_page.sql`): it folds the words once, then reads the four tiers
/// in rank order, each planned with this search's words, and stops as soon as it has the page's
/// rows (the `OFFSET`'s included); only the page's rows are then joined to the catalogue. One
/// prepared statement, so one round of messages and a plan kept by the connection. One
/// statement, so one snapshot: a phrase the pipeline moves between tiers meanwhile is not on
/// the page twice.
pub async fn search<'e>(
    db: impl PgExecutor<'e>,
    text: &str,
    language: Option<&str>,
    after: Option<(SearchRank, &str)>,
    paging: Paging,
) -> Result<Vec<(PhraseItem, SearchRank)>> {
    if !language.is_none_or(is_storable) {
        return Ok(Vec::new());
    }
    // Before every rank: the first tier from its start.
    let (rank, after_id) = after.unwrap_or((
        SearchRank {
            tier: 0,
            text_length: -1,
        },
        "",
    ));
    let rows = sqlx::query_as!(
        SearchRow,
        r#"SELECT p.id, p.text, p.language_code,
             p.translation_count AS "translation_count!",
             s.view_count AS "view_count?", s.learner_count AS "learner_count?",
             s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!",
             page.tier AS "tier!", page.text_length AS "text_length!"
           FROM (SELECT r.phrase_id, r.tier, r.text_length, r.n
                   FROM phrase_search_ranks($1, $2, $3, $4, $5, $6::int8 + $7::int8)
                          WITH ORDINALITY AS r (phrase_id, tier, text_length, n)
                  ORDER BY r.n LIMIT $6 OFFSET $7) page
           JOIN phrases p ON p.id = page.phrase_id
           LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
           ORDER BY page.n"#,
        text,
        language,
        rank.tier,
        rank.text_length,
        after_id,
        paging.fetch_limit(),
        paging.offset,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
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
