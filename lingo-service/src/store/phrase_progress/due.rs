//! How many of a learner's phrases are due: the per-day counts of `phrase_due_days` up to
//! yesterday plus today's due phrases from `phrase_states` ([`push_due_total`]).

use std::collections::HashMap;

use chrono::{DateTime, NaiveTime, TimeDelta, Utc};
use shared_auth::pg::push_opaque;
use sqlx::{PgExecutor, Postgres, QueryBuilder};

use crate::error::Result;

/// The start (00:00 UTC) of the day of `now`: `phrase_due_days` counts the phrases due before it,
/// `phrase_states` those due from it to `now`.
pub(super) fn day_start(now: DateTime<Utc>) -> DateTime<Utc> {
    now.date_naive().and_time(NaiveTime::MIN).and_utc()
}

/// How many of the phrases of one row `d` of `phrase_due_days` are due at `now`, as an `integer`
/// expression: all of a day before today's; of today's, those due by `now`, counted in
/// `phrase_states` on one side of `now`: from the day's start to `now` (the due ones), or after
/// `now` to the next day's start (the day's count less those). A learner's due times gather at
/// the hours they study, so one side may hold most of a day's phrases: the side the time of day
/// suggests (the morning before noon, else the evening) is counted first, up to half the day's
/// phrases; when it holds that many, the other side holds fewer and is counted instead. So
/// today's part reads at most the day's phrases, as counting from the day's start always did,
/// and often far fewer.
fn push_due_of_day(sql: &mut QueryBuilder<'_, Postgres>, now: DateTime<Utc>) {
    let start = day_start(now);
    let morning = now - start < TimeDelta::hours(12);
    sql.push("CASE WHEN d.due_day < ");
    push_opaque(sql, start.date_naive());
    sql.push(" THEN d.phrases ELSE (SELECT CASE WHEN side.n < (d.phrases + 1) / 2 THEN ")
        .push(if morning {
            "side.n"
        } else {
            "d.phrases - side.n"
        })
        .push(" ELSE ");
    if !morning {
        push_today_count(sql, "count(*)::integer", true, start, now);
        sql.push(") END FROM (SELECT count(*)::integer AS n FROM ");
        push_today_count(sql, "1", false, start, now);
    } else {
        sql.push("d.phrases - ");
        push_today_count(sql, "count(*)::integer", false, start, now);
        sql.push(") END FROM (SELECT count(*)::integer AS n FROM ");
        push_today_count(sql, "1", true, start, now);
    }
    sql.push(" LIMIT (d.phrases + 1) / 2) AS first_side) AS side) END");
}

/// `(SELECT columns FROM phrase_states` of the learner and language of the row `d` due today up
/// to `now` (`due`), or after `now` (not `due`); the statement is left open for a `LIMIT`.
fn push_today_count(
    sql: &mut QueryBuilder<'_, Postgres>,
    columns: &str,
    due: bool,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
) {
    sql.push("(SELECT ").push(columns).push(
        " FROM phrase_states s \
         WHERE s.learner_id = d.learner_id AND s.language_code = d.language_code",
    );
    if due {
        sql.push(" AND s.due_at >= ");
        push_opaque(sql, start);
        sql.push(" AND s.due_at <= ");
        push_opaque(sql, now);
    } else {
        sql.push(" AND s.due_at > ");
        push_opaque(sql, now);
        sql.push(" AND s.due_at < ");
        push_opaque(sql, start + TimeDelta::days(1));
    }
}

/// `FROM phrase_due_days d WHERE` the rows of `learner_id` (in `language`, when given) for the
/// days up to today: the rows [`push_due_of_day`] adds up.
fn push_due_days(
    sql: &mut QueryBuilder<'_, Postgres>,
    learner_id: &str,
    language: Option<&str>,
    now: DateTime<Utc>,
) {
    sql.push(" FROM phrase_due_days d WHERE d.learner_id = ");
    push_opaque(sql, learner_id.to_owned());
    if let Some(language) = language {
        sql.push(" AND d.language_code = ");
        push_opaque(sql, language.to_owned());
    }
    sql.push(" AND d.due_day <= ");
    push_opaque(sql, now.date_naive());
}

/// How many of `learner_id`'s phrases (in `language`, when given) are due at `now`, as an
/// expression: the per-day counts of `phrase_due_days` (kept by triggers on `phrase_states`) up
/// to yesterday, plus today's phrases due by `now` from `phrase_states`, per language by
/// `phrase_states_language_due_idx` ([`push_due_of_day`]). Its cost follows the days with phrases
/// due and the phrases due today, not all the phrases due (one learner may have 20,000).
pub(super) fn push_due_total(
    sql: &mut QueryBuilder<'_, Postgres>,
    learner_id: &str,
    language: Option<&str>,
    now: DateTime<Utc>,
) {
    sql.push("(SELECT coalesce(sum(");
    push_due_of_day(sql, now);
    sql.push("), 0)");
    push_due_days(sql, learner_id, language, now);
    sql.push(")");
}

/// How many phrases of the learner and language of the row `t` of `learner_language_totals`
/// (the analytics export's) are due at `now`, as an expression: like [`push_due_total`], so a
/// page of the export costs the days with phrases due of its rows' learners, not their due
/// phrases (a page of 100 learners with 8,000 due each counted 800,000 states: 129 ms).
pub fn push_due_of_totals_row(sql: &mut QueryBuilder<'_, Postgres>, now: DateTime<Utc>) {
    sql.push("(SELECT coalesce(sum(");
    push_due_of_day(sql, now);
    sql.push(
        "), 0) FROM phrase_due_days d \
         WHERE d.learner_id = t.learner_id AND d.language_code = t.language_code \
           AND d.due_day <= ",
    );
    push_opaque(sql, now.date_naive());
    sql.push(")");
}

pub(super) fn due_total_statement<'a>(
    prefix: &str,
    learner_id: &str,
    language: Option<&str>,
    now: DateTime<Utc>,
) -> QueryBuilder<'a, Postgres> {
    let mut sql = QueryBuilder::<Postgres>::new(prefix);
    sql.push("SELECT ");
    push_due_total(&mut sql, learner_id, language, now);
    sql
}

/// `learner_id`'s phrases due at `now`, per language (see [`push_due_total`]).
pub(super) fn due_by_language_statement<'a>(
    prefix: &str,
    learner_id: &str,
    now: DateTime<Utc>,
) -> QueryBuilder<'a, Postgres> {
    let mut sql = QueryBuilder::<Postgres>::new(prefix);
    sql.push("SELECT d.language_code, sum(");
    push_due_of_day(&mut sql, now);
    sql.push(")::bigint AS due");
    push_due_days(&mut sql, learner_id, None, now);
    sql.push(" GROUP BY d.language_code");
    sql
}

/// `learner_id`'s phrases due at `now`, per language.
pub async fn due_by_language<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
    now: DateTime<Utc>,
) -> Result<HashMap<String, i64>> {
    let mut sql = due_by_language_statement("", learner_id, now);
    let rows: Vec<(String, i64)> = sql.build_query_as().fetch_all(db).await?;
    Ok(rows.into_iter().collect())
}
