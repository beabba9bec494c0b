//! Phrases of the catalogue with their translations and the pipeline's cached statistics (read
//! only: the pipeline writes them).

use shared_auth::Paging;
use sqlx::{FromRow, PgExecutor, PgPool};

use crate::domain::catalogue::{Phrase, PhraseItem, PhraseStats, Translation};
use crate::domain::cursor::SearchRank;
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
/// in `language` when given, starting after the phrase `after` when given. Each filter has its
/// own statement so that PostgreSQL plans it against its index (the primary key, or
/// `(language_code, id)`), even with a generic plan.
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
                     (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = p.id)
                       AS "translation_count!",
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
                     (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = p.id)
                       AS "translation_count!",
                     s.view_count AS "view_count?", s.learner_count AS "learner_count?",
                     s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!"
                   FROM phrases p LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
                   WHERE p.id > $1
                   ORDER BY p.id LIMIT $2 OFFSET $3"#,
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

/// The search's statement (run by [`search`]): the matches of the four tiers, each read in its
/// own rank order `(text_length, phrase_id)` and cut to the page by its own `LIMIT`, appended in
/// tier order under the page's `LIMIT`/`OFFSET`, then only the page's rows joined to the
/// catalogue. Tier 0: every word whole in the phrase's own text; 1: the same with the last word
/// as a prefix (and not 0); 2: every word whole in the text and its translations together (and
/// not 0 or 1); 3: the same with the last word as a prefix (and not 0, 1 or 2).
///
/// PostgreSQL's `Append` runs its branches one after the other and the `Limit` above it stops
/// pulling once the page is full, so a tier after the page's last row is never executed. Within
/// a tier, a frequent word is read by walking a rank index (`phrase_search_rank_idx`,
/// `phrase_search_language_rank_idx`) until the page is full, a rare one from a GIN index (few
/// matches to sort): the planner's choice, made with the search's own words, since the
/// statement is planned at each execution (see [`search`]). The cursor's bound `($3, $4, $5)`
/// = (tier, text length, id): tiers before `$3` are skipped (a false constant once planned with
/// the values), tier `$3` starts after `($4, $5)` and later ones from their start (lengths are
/// never negative, and every id is longer than ""). One statement, so one snapshot: a phrase
/// the pipeline moves between tiers meanwhile is not on the page twice.
pub const SEARCH: &str = r#"
WITH page AS (
  (SELECT ps.phrase_id, 0 AS tier, ps.text_length FROM phrase_search ps
   WHERE $3::int4 <= 0
     AND ps.own @@ search_query($1, false)
     AND ($2::text IS NULL OR ps.language_code = $2)
     AND (ps.text_length, ps.phrase_id)
         > (CASE WHEN $3 = 0 THEN $4::int4 ELSE -1 END, CASE WHEN $3 = 0 THEN $5::text ELSE '' END)
   ORDER BY ps.text_length, ps.phrase_id LIMIT $6::int8 + $7::int8)
  UNION ALL
  (SELECT ps.phrase_id, 1 AS tier, ps.text_length FROM phrase_search ps
   WHERE $3 <= 1
     AND ps.own @@ search_query($1, true) AND NOT ps.own @@ search_query($1, false)
     AND ($2 IS NULL OR ps.language_code = $2)
     AND (ps.text_length, ps.phrase_id)
         > (CASE WHEN $3 = 1 THEN $4 ELSE -1 END, CASE WHEN $3 = 1 THEN $5 ELSE '' END)
   ORDER BY ps.text_length, ps.phrase_id LIMIT $6 + $7)
  UNION ALL
  (SELECT ps.phrase_id, 2 AS tier, ps.text_length FROM phrase_search ps
   WHERE $3 <= 2
     AND ps.everything @@ search_query($1, false) AND NOT ps.own @@ search_query($1, true)
     AND ($2 IS NULL OR ps.language_code = $2)
     AND (ps.text_length, ps.phrase_id)
         > (CASE WHEN $3 = 2 THEN $4 ELSE -1 END, CASE WHEN $3 = 2 THEN $5 ELSE '' END)
   ORDER BY ps.text_length, ps.phrase_id LIMIT $6 + $7)
  UNION ALL
  (SELECT ps.phrase_id, 3 AS tier, ps.text_length FROM phrase_search ps
   WHERE $3 <= 3
     AND ps.everything @@ search_query($1, true)
     AND NOT ps.everything @@ search_query($1, false) AND NOT ps.own @@ search_query($1, true)
     AND ($2 IS NULL OR ps.language_code = $2)
     AND (ps.text_length, ps.phrase_id)
         > (CASE WHEN $3 = 3 THEN $4 ELSE -1 END, CASE WHEN $3 = 3 THEN $5 ELSE '' END)
   ORDER BY ps.text_length, ps.phrase_id LIMIT $6 + $7)
  LIMIT $6 OFFSET $7
)
SELECT p.id, p.text, p.language_code,
  (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = p.id) AS translation_count,
  s.view_count, s.learner_count, s.accuracy, (s.phrase_id IS NOT NULL) AS has_stats,
  page.tier, page.text_length
FROM page
JOIN phrases p ON p.id = page.phrase_id
LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
ORDER BY page.tier, page.text_length, page.phrase_id
"#;

/// A row of [`SEARCH`]: a match with its rank.
#[derive(FromRow)]
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
/// after `after` when given: one statement, [`SEARCH`], one round of messages.
///
/// It runs as an unnamed statement (`persistent(false)`), which PostgreSQL plans when the
/// values are bound, with this search's words: a prepared statement's generic plan, made for no
/// word in particular, could walk a whole rank index for a rare word, or sort every match of a
/// frequent one. (Hence the unchecked `query_as`: the checked macros' statements are prepared
/// and cached.)
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
    let rows = sqlx::query_as::<_, SearchRow>(SEARCH)
        .bind(text)
        .bind(language)
        .bind(rank.tier)
        .bind(rank.text_length)
        .bind(after_id)
        .bind(paging.fetch_limit())
        .bind(paging.offset)
        .persistent(false)
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
