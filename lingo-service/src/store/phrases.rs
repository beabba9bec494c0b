//! Phrases of the catalogue with their translations and the pipeline's cached statistics (read
//! only: the pipeline writes them).

use std::collections::HashMap;

use shared_auth::Paging;
use sqlx::{PgConnection, PgExecutor, PgPool};

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

/// The last tier of a search's rank (see [`SearchRank`]): tiers are `0..=LAST_TIER`.
const LAST_TIER: i32 = 3;

/// One page (plus one row) of the phrases matching the search `text` (trimmed, 1..=100
/// characters), best first (see [`SearchRank`]), only those in `language` when given, starting
/// after `after` when given.
///
/// The matches are read one tier at a time, each in its rank order `(text_length, phrase_id)`,
/// and no further tier is read once the page (and the rows its offset skips) is full: a frequent
/// word is read by walking an index in rank order until the page is full, a rare one from the GIN
/// indexes (few matches to sort), as the planner judges from the search's own words — the
/// statements are planned for each search (`force_custom_plan`: a generic plan, made for no
/// word in particular, could walk the whole index for a rare one). The tiers are read from one snapshot,
/// so a phrase the pipeline moves between tiers meanwhile is not on the page twice, and only the
/// page's rows are joined to the catalogue.
pub async fn search(
    db: &PgPool,
    text: &str,
    language: Option<&str>,
    after: Option<(SearchRank, &str)>,
    paging: Paging,
) -> Result<Vec<(PhraseItem, SearchRank)>> {
    if !language.is_none_or(is_storable) {
        return Ok(Vec::new());
    }
    let wanted = (paging.offset + paging.fetch_limit()) as usize;
    let first_tier = after.map_or(0, |(rank, _)| rank.tier.max(0));
    // One snapshot; every statement planned with this search's words (see above).
    let mut tx = db
        .begin_with(
            "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; \
             SET LOCAL plan_cache_mode = force_custom_plan",
        )
        .await?;
    let mut ranked: Vec<(String, SearchRank)> = Vec::new();
    for tier in first_tier..=LAST_TIER {
        // After the cursor's row in its own tier; a later tier from its start (lengths are never
        // negative, and every id is longer than "").
        let (length, id) = match after {
            Some((rank, id)) if rank.tier == tier => (rank.text_length, id),
            _ => (-1, ""),
        };
        let limit = (wanted - ranked.len()) as i64;
        let matches = tier_matches(&mut tx, tier, text, language, (length, id), limit).await?;
        ranked.extend(matches.into_iter().map(|m| {
            let rank = SearchRank {
                tier,
                text_length: m.text_length,
            };
            (m.phrase_id, rank)
        }));
        if ranked.len() >= wanted {
            break;
        }
    }
    let page: Vec<(String, SearchRank)> = ranked.into_iter().skip(paging.offset as usize).collect();
    let ids: Vec<String> = page.iter().map(|(id, _)| id.clone()).collect();
    let mut items: HashMap<String, PhraseItem> = items(&mut tx, &ids)
        .await?
        .into_iter()
        .map(|item| (item.id.clone(), item))
        .collect();
    tx.commit().await?;
    // Every match is a phrase of the same snapshot (its search row is deleted with it).
    Ok(page
        .into_iter()
        .filter_map(|(id, rank)| Some((items.remove(&id)?, rank)))
        .collect())
}

/// A search match, in its tier.
struct Match {
    phrase_id: String,
    text_length: i32,
}

/// At most `limit` matches of one tier, after `(text_length, phrase_id)` = `after`, in rank
/// order: 0, every word whole in the phrase's own text; 1, the same with the last word as a
/// prefix (and not 0); 2, every word whole in the text and its translations together (and not
/// 0 or 1); 3, the same with the last word as a prefix (and not 0, 1 or 2).
async fn tier_matches(
    db: &mut PgConnection,
    tier: i32,
    text: &str,
    language: Option<&str>,
    after: (i32, &str),
    limit: i64,
) -> Result<Vec<Match>> {
    let (length, id) = after;
    let matches = match tier {
        0 => {
            sqlx::query_as!(
                Match,
                r#"SELECT ps.phrase_id, ps.text_length FROM phrase_search ps
               WHERE ps.own @@ search_query($1, false)
                 AND ($2::text IS NULL OR ps.language_code = $2)
                 AND (ps.text_length, ps.phrase_id) > ($3::int4, $4::text)
               ORDER BY ps.text_length, ps.phrase_id LIMIT $5"#,
                text,
                language,
                length,
                id,
                limit,
            )
            .fetch_all(db)
            .await?
        }
        1 => {
            sqlx::query_as!(
                Match,
                r#"SELECT ps.phrase_id, ps.text_length FROM phrase_search ps
               WHERE ps.own @@ search_query($1, true) AND NOT ps.own @@ search_query($1, false)
                 AND ($2::text IS NULL OR ps.language_code = $2)
                 AND (ps.text_length, ps.phrase_id) > ($3::int4, $4::text)
               ORDER BY ps.text_length, ps.phrase_id LIMIT $5"#,
                text,
                language,
                length,
                id,
                limit,
            )
            .fetch_all(db)
            .await?
        }
        2 => {
            sqlx::query_as!(
                Match,
                r#"SELECT ps.phrase_id, ps.text_length FROM phrase_search ps
               WHERE ps.everything @@ search_query($1, false)
                 AND NOT ps.own @@ search_query($1, true)
                 AND ($2::text IS NULL OR ps.language_code = $2)
                 AND (ps.text_length, ps.phrase_id) > ($3::int4, $4::text)
               ORDER BY ps.text_length, ps.phrase_id LIMIT $5"#,
                text,
                language,
                length,
                id,
                limit,
            )
            .fetch_all(db)
            .await?
        }
        LAST_TIER => {
            sqlx::query_as!(
                Match,
                r#"SELECT ps.phrase_id, ps.text_length FROM phrase_search ps
               WHERE ps.everything @@ search_query($1, true)
                 AND NOT ps.everything @@ search_query($1, false)
                 AND NOT ps.own @@ search_query($1, true)
                 AND ($2::text IS NULL OR ps.language_code = $2)
                 AND (ps.text_length, ps.phrase_id) > ($3::int4, $4::text)
               ORDER BY ps.text_length, ps.phrase_id LIMIT $5"#,
                text,
                language,
                length,
                id,
                limit,
            )
            .fetch_all(db)
            .await?
        }
        _ => Vec::new(),
    };
    Ok(matches)
}

/// The phrases `ids` with their stats (any order).
async fn items(db: &mut PgConnection, ids: &[String]) -> Result<Vec<PhraseItem>> {
    let rows = sqlx::query_as!(
        PhraseItemRow,
        r#"SELECT p.id, p.text, p.language_code,
             (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = p.id)
               AS "translation_count!",
             s.view_count AS "view_count?", s.learner_count AS "learner_count?",
             s.accuracy AS "accuracy?", (s.phrase_id IS NOT NULL) AS "has_stats!"
           FROM phrases p LEFT JOIN phrase_stats_cache s ON s.phrase_id = p.id
           WHERE p.id = ANY($1::text[])"#,
        ids,
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
