//! The pages of a learner's phrase states: `GET /me/phrases` ([`list_for`]) and the due phrases
//! of `GET /me/reviews` ([`reviews_for`]), and the plans of those reads for the tests.

use chrono::{DateTime, TimeDelta, Utc};
use shared_auth::pg::push_opaque;
use sqlx::{FromRow, PgConnection, PgExecutor, Postgres, QueryBuilder};

use super::due::{day_start, due_by_language_statement, due_total_statement, push_due_total};
use super::rows::StateRow;
use crate::domain::catalogue::PhraseItem;
use crate::domain::phrase_progress::{MyPhrasesCursor, MyPhrasesFilter, PhraseProgress};
use crate::domain::text::is_storable;
use crate::error::Result;
use crate::store::phrases::PhraseItemRow;

/// A state joined with its phrase (and the phrase's stats-cache row, like the catalogue list).
#[derive(FromRow)]
struct ProgressRow {
    #[sqlx(flatten)]
    state: StateRow,
    text: String,
    language_code: String,
    translation_count: i64,
    view_count: Option<i64>,
    learner_count: Option<i64>,
    accuracy: Option<f64>,
    has_stats: bool,
    /// Only in the statement of `GET /me/reviews` (see [`reviews_for`]).
    #[sqlx(default)]
    due_total: i64,
}

impl ProgressRow {
    fn progress(self, now: DateTime<Utc>) -> Result<PhraseProgress> {
        let state = self.state.state()?;
        let phrase = PhraseItem::from(PhraseItemRow {
            id: self.state.phrase_id,
            text: self.text,
            language_code: self.language_code,
            translation_count: self.translation_count,
            view_count: self.view_count,
            learner_count: self.learner_count,
            accuracy: self.accuracy,
            has_stats: self.has_stats,
        });
        Ok(PhraseProgress::new(phrase, &state, now))
    }
}

/// The languages a page reads, as a table `l (code)`: the one of `language`, or every language
/// `learner_id` has studied (a row of `learner_language_totals` each). A learner's states are
/// only written with a session of their language, in the transaction that writes that totals row,
/// or moved to another language with their phrase, by the statement that makes that language's
/// row if missing (migration 20261129600001), so every language with a state is there. (A skip
/// scan of `phrase_states` for its languages, as a recursive query, cost more to plan than the
/// whole page: 0.6-0.9 ms against 0.2.)
fn push_languages(sql: &mut QueryBuilder<'_, Postgres>, learner_id: &str, language: Option<&str>) {
    match language {
        Some(language) => {
            sql.push("(SELECT ");
            push_opaque(sql, language.to_owned());
            sql.push("::text AS code) l");
        }
        None => {
            sql.push(
                "(SELECT language_code AS code FROM learner_language_totals WHERE learner_id = ",
            );
            push_opaque(sql, learner_id.to_owned());
            sql.push(") l");
        }
    }
}

/// The statement of a page of `learner_id`'s phrase states by `(due_at, phrase_id)` after
/// `cursor`, `limit` rows, behind `prefix` (`EXPLAIN` for the plan tests).
fn my_phrases_statement<'a>(
    prefix: &str,
    learner_id: &str,
    filter: &MyPhrasesFilter,
    cursor: Option<&MyPhrasesCursor>,
    now: DateTime<Utc>,
    limit: i64,
) -> QueryBuilder<'a, Postgres> {
    let mut sql = QueryBuilder::<Postgres>::new(prefix);
    sql.push("SELECT ");
    push_my_phrases(&mut sql, learner_id, filter, cursor, now, limit);
    sql
}

/// The columns of [`ProgressRow`] (after `SELECT ` and any extra column) and the rest of a page of
/// `learner_id`'s states by `(due_at, phrase_id)` after `cursor`.
///
/// A page is a merge: the first `limit` states of each language ([`push_languages`]), read in
/// order from `phrase_states_language_due_idx` with their phrases, then the first `limit` of
/// those, with their phrases' stored translation counts. Only the page's rows get their stats. So
/// one index serves the pages with and without a language, and the states' writes keep one index
/// fewer. A state whose phrase the catalogue no longer has is left out before the limit, as a join
/// on the whole list would: a delete of a phrase deletes its states (migration 20261129700001),
/// and its id cannot change (its search row's foreign key refuses it), but a state written without
/// the phrase's lock can still outlive it: one written by hand, or by a pod of a release before
/// migration 20261129600001 (it does not lock the phrases it answers first) during a rollout.
fn push_my_phrases(
    sql: &mut QueryBuilder<'_, Postgres>,
    learner_id: &str,
    filter: &MyPhrasesFilter,
    cursor: Option<&MyPhrasesCursor>,
    now: DateTime<Utc>,
    limit: i64,
) {
    sql.push(
        "s.phrase_id, s.stability, s.difficulty, s.due_at, s.reviews, s.correct, \
           s.lapses, s.first_reviewed_at, s.last_reviewed_at, s.last_grade, \
           s.text, s.language_code, s.translation_count, \
           st.view_count, st.learner_count, st.accuracy, (st.phrase_id IS NOT NULL) AS has_stats \
         FROM (SELECT s.* FROM ",
    );
    push_languages(sql, learner_id, filter.language.as_deref());
    sql.push(
        " CROSS JOIN LATERAL ( \
           SELECT s.phrase_id, s.stability, s.difficulty, s.due_at, s.reviews, s.correct, \
             s.lapses, s.first_reviewed_at, s.last_reviewed_at, s.last_grade, \
             p.text, p.language_code, p.translation_count \
           FROM phrase_states s JOIN phrases p ON p.id = s.phrase_id \
           WHERE s.learner_id = ",
    );
    push_opaque(sql, learner_id.to_owned());
    sql.push(" AND s.language_code = l.code");
    if filter.due_only {
        sql.push(" AND s.due_at <= ");
        push_opaque(sql, now);
    }
    if let Some(cursor) = cursor {
        sql.push(" AND (s.due_at, s.phrase_id) > (");
        push_opaque(sql, cursor.due_at());
        sql.push(", ");
        push_opaque(sql, cursor.phrase_id.clone());
        sql.push(")");
    }
    sql.push(" ORDER BY s.due_at, s.phrase_id LIMIT ");
    push_opaque(sql, limit);
    sql.push(") s ORDER BY s.due_at, s.phrase_id LIMIT ");
    push_opaque(sql, limit);
    sql.push(
        ") s \
         LEFT JOIN phrase_stats_cache st ON st.phrase_id = s.phrase_id \
         ORDER BY s.due_at, s.phrase_id",
    );
}

/// One page of `learner_id`'s phrase states by `(due_at, phrase_id)` after `cursor`; `limit`
/// rows (ask for one more to learn whether there is a next page).
pub async fn list_for<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
    filter: &MyPhrasesFilter,
    cursor: Option<&MyPhrasesCursor>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<PhraseProgress>> {
    if !filter.language.as_deref().is_none_or(is_storable) {
        return Ok(Vec::new());
    }
    let mut sql = my_phrases_statement("", learner_id, filter, cursor, now, limit);
    let rows = sql.build_query_as::<ProgressRow>().fetch_all(db).await?;
    rows.into_iter().map(|row| row.progress(now)).collect()
}

/// The statement of `GET /me/reviews`: the first `limit` due phrases and, in every row, how many
/// are due in all (an uncorrelated subquery, computed once).
fn reviews_statement<'a>(
    prefix: &str,
    learner_id: &str,
    language: Option<&str>,
    now: DateTime<Utc>,
    limit: i64,
) -> QueryBuilder<'a, Postgres> {
    let filter = MyPhrasesFilter {
        language: language.map(str::to_owned),
        due_only: true,
    };
    let mut sql = QueryBuilder::<Postgres>::new(prefix);
    sql.push("SELECT ");
    push_due_total(&mut sql, learner_id, language, now);
    sql.push(" AS due_total, ");
    push_my_phrases(&mut sql, learner_id, &filter, None, now, limit);
    sql
}

/// `learner_id`'s phrases due at `now` (in `language`, when given), longest overdue first, at
/// most `limit`, and how many are due in all. One statement: one snapshot (the total is never
/// smaller than the page) and one round trip. No row means nothing is due.
pub async fn reviews_for<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
    language: Option<&str>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<(Vec<PhraseProgress>, i64)> {
    if !language.is_none_or(is_storable) {
        return Ok((Vec::new(), 0));
    }
    let mut sql = reviews_statement("", learner_id, language, now, limit);
    let rows = sql.build_query_as::<ProgressRow>().fetch_all(db).await?;
    let due_total = rows.first().map_or(0, |row| row.due_total);
    let page = rows
        .into_iter()
        .map(|row| row.progress(now))
        .collect::<Result<_>>()?;
    Ok((page, due_total))
}

/// The plans (`EXPLAIN` text) of the statements that read one learner's phrases: a page of
/// `GET /me/phrases` without and with a language and a cursor, a page of `GET /me/reviews`, and
/// the due counts of `GET /me/reviews` in a language and per language of `GET /me/progress`,
/// each before and after noon (today's phrases are counted on either side of the time). For
/// the tests that assert they read by index, and that they plan alike for every learner and time
/// (every value goes in through [`push_opaque`], so these are the plans that run).
pub async fn explain_learner_reads(
    db: &mut PgConnection,
    learner_id: &str,
    language: &str,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let cursor = MyPhrasesCursor::after(now, "ph", &MyPhrasesFilter::default());
    let due_in = MyPhrasesFilter {
        language: Some(language.to_owned()),
        due_only: true,
    };
    let mut statements = vec![
        my_phrases_statement("EXPLAIN ", learner_id, &Default::default(), None, now, 21),
        my_phrases_statement("EXPLAIN ", learner_id, &due_in, Some(&cursor), now, 21),
    ];
    for at in [
        day_start(now) + TimeDelta::hours(6),
        day_start(now) + TimeDelta::hours(18),
    ] {
        statements.extend([
            reviews_statement("EXPLAIN ", learner_id, None, at, 20),
            due_total_statement("EXPLAIN ", learner_id, Some(language), at),
            due_by_language_statement("EXPLAIN ", learner_id, at),
        ]);
    }
    let mut plans = Vec::new();
    for statement in &mut statements {
        let lines: Vec<String> = statement.build_query_scalar().fetch_all(&mut *db).await?;
        plans.push(lines.join("\n"));
    }
    Ok(plans)
}
