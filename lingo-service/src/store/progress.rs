//! Per learner and language totals (`learner_language_totals`) and the study days behind the
//! streaks: what `GET /me/progress`, `GET /me/xp` and the analytics export read.

use chrono::{DateTime, NaiveDate, Utc};
use shared_auth::pg::push_opaque;
use sqlx::{FromRow, PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};

use crate::domain::cursor::Cursor;
use crate::domain::level::level_for_xp;
use crate::domain::progress::{Counters, LanguageProgress, LanguageXp, LearnerProgress, accuracy};
use crate::error::Result;
use crate::store;

/// One row of `learner_language_totals`.
#[derive(FromRow)]
struct TotalsRow {
    learner_id: String,
    language_code: String,
    sessions: i64,
    total_duration_seconds: i64,
    phrases_seen: i64,
    phrases_correct: i64,
    xp: i64,
    phrases_started: i64,
    phrases_due: i64,
    /// Null in a language without a session: a row made by a phrase moved to it.
    first_studied_at: Option<DateTime<Utc>>,
    last_studied_at: Option<DateTime<Utc>>,
    updated_at: DateTime<Utc>,
}

impl TotalsRow {
    fn language_progress(self) -> LanguageProgress {
        LanguageProgress {
            language_code: self.language_code,
            counters: Counters {
                sessions: self.sessions,
                total_duration_seconds: self.total_duration_seconds,
                phrases_seen: self.phrases_seen,
                phrases_correct: self.phrases_correct,
                accuracy: accuracy(self.phrases_seen, self.phrases_correct),
                xp: self.xp,
                phrases_started: self.phrases_started,
                phrases_due: self.phrases_due,
                first_studied_at: self.first_studied_at,
                last_studied_at: self.last_studied_at,
            },
        }
    }
}

/// A learner's totals per language (ordered by `language_code`) and the UTC days with a
/// session (any order).
pub struct LearnerTotals {
    pub languages: Vec<LanguageProgress>,
    pub study_days: Vec<NaiveDate>,
}

/// Reads both from one snapshot, so the totals, the phrases due at `now` and the study days agree
/// under concurrent writes.
pub async fn learner_totals(
    db: &PgPool,
    learner_id: &str,
    now: DateTime<Utc>,
) -> Result<LearnerTotals> {
    // The isolation level in the `BEGIN` itself: one round trip fewer than a `SET TRANSACTION`.
    let mut tx = shared_auth::pg::pool::begin_to_completion(
        db,
        Some("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"),
    )
    .await?;
    let mut rows = sqlx::query_as!(
        TotalsRow,
        r#"SELECT learner_id, language_code, sessions, total_duration_seconds, phrases_seen,
             phrases_correct, xp, phrases_started, 0::bigint AS "phrases_due!",
             first_studied_at, last_studied_at, updated_at
           FROM learner_language_totals WHERE learner_id = $1 ORDER BY language_code"#,
        learner_id
    )
    .fetch_all(&mut *tx)
    .await?;
    let due = store::phrase_progress::due_by_language(&mut *tx, learner_id, now).await?;
    for row in &mut rows {
        row.phrases_due = due.get(&row.language_code).copied().unwrap_or(0);
    }
    // A session counts on the UTC day it happened, which an offline app reports later.
    let study_days = sqlx::query_scalar!(
        r#"SELECT DISTINCT (studied_at AT TIME ZONE 'UTC')::date AS "day!"
           FROM study_sessions WHERE learner_id = $1"#,
        learner_id
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(LearnerTotals {
        languages: rows.into_iter().map(TotalsRow::language_progress).collect(),
        study_days,
    })
}

/// A learner's XP and level per language, ordered by `language_code`.
pub async fn xp_by_language<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
) -> Result<Vec<LanguageXp>> {
    let rows = sqlx::query!(
        "SELECT language_code, xp FROM learner_language_totals \
         WHERE learner_id = $1 ORDER BY language_code",
        learner_id
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| LanguageXp {
            level: level_for_xp(row.xp),
            language_code: row.language_code,
            xp: row.xp,
        })
        .collect())
}

/// The instant before which the analytics export is final: no write still in progress can stamp
/// a row with an earlier `updated_at`.
///
/// A write stamps `updated_at` in the middle of its transaction, so transactions can commit out of
/// stamp order. Without a horizon, a page could end on a row stamped after a write that had not
/// committed yet; that write's row would then land behind the exporter's position and never be
/// read. Every transaction stamps after its own start, so the horizon is the start of the oldest
/// transaction of this service's role in progress now (or now, when there is none). The catalogue
/// pipeline's transactions (another role's, whose start this role cannot see) stamp states and
/// totals when they move a phrase to another language or delete one learners answered: such a
/// move or delete holds an advisory lock keyed by the second it stamps in, taken before it stamps,
/// until it ends (migrations 20261129600001 and 20261129700001), and the horizon stays at or below
/// the oldest such second (`oldest_catalogue_stamp_in_progress()`, which reads `pg_locks`: that
/// holds the lock manager for a moment, fine for an export page, not for a hot path). It must be
/// read before the page's own snapshot is taken, in a statement of its own: a transaction that
/// committed in between is then visible to the page.
pub async fn export_horizon<'e>(db: impl PgExecutor<'e>) -> Result<DateTime<Utc>> {
    let horizon = sqlx::query_scalar!(
        r#"SELECT LEAST(now(),
             (SELECT min(xact_start) FROM pg_stat_activity
               WHERE datname = current_database() AND usename = current_user
                 AND pid <> pg_backend_pid()),
             oldest_catalogue_stamp_in_progress()) AS "horizon!""#
    )
    .fetch_one(db)
    .await?;
    Ok(horizon)
}

/// One page of the analytics export in keyset order `(updated_at, learner_id, language_code)`:
/// rows changed at or after `since` and before `horizon` (see [`export_horizon`]), after
/// `cursor`; `limit` rows, plus one when there are more; `phrases_due` counted at `now`.
pub async fn export_page<'e>(
    db: impl PgExecutor<'e>,
    since: Option<DateTime<Utc>>,
    horizon: DateTime<Utc>,
    cursor: Option<&Cursor>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<LearnerProgress>> {
    let mut sql = export_statement("", since, horizon, cursor, now, limit);
    let rows = sql.build_query_as::<TotalsRow>().fetch_all(db).await?;
    Ok(rows
        .into_iter()
        .map(|row| LearnerProgress {
            learner_id: row.learner_id.clone(),
            updated_at: row.updated_at,
            progress: row.language_progress(),
        })
        .collect())
}

/// The statement of a page of the export, behind `prefix` (`EXPLAIN` for the plan test). Each
/// row's `phrases_due` is counted from the due days, as `GET /me/progress` counts it
/// ([`store::phrase_progress::push_due_of_totals_row`]). Every value goes in through
/// [`push_opaque`]: with visible ones the first page and every page after a cursor were planned
/// at every request (0.21-0.23 ms of planning for 0.23-0.44 ms of execution).
fn export_statement<'a>(
    prefix: &str,
    since: Option<DateTime<Utc>>,
    horizon: DateTime<Utc>,
    cursor: Option<&Cursor>,
    now: DateTime<Utc>,
    limit: i64,
) -> QueryBuilder<'a, Postgres> {
    let mut sql = QueryBuilder::<Postgres>::new(prefix);
    sql.push(
        "SELECT learner_id, language_code, sessions, total_duration_seconds, phrases_seen, \
           phrases_correct, xp, phrases_started, ",
    );
    store::phrase_progress::push_due_of_totals_row(&mut sql, now);
    sql.push(
        " AS phrases_due, first_studied_at, last_studied_at, updated_at \
         FROM learner_language_totals t WHERE ",
    );
    let after = cursor.map(|cursor| ExportAfter {
        updated_at: cursor.updated_at(),
        learner_id: cursor.learner_id.clone(),
        key: cursor.language_code.clone(),
    });
    push_export_range(&mut sql, "language_code", horizon, since, after, limit);
    sql
}

/// The row an export page starts after: its `updated_at`, `learner_id` and the export's own key.
pub(crate) struct ExportAfter {
    pub updated_at: Option<DateTime<Utc>>,
    pub learner_id: String,
    pub key: String,
}

/// The end of an analytics export page's statement, after its `WHERE`: the rows changed before
/// `horizon` (see [`export_horizon`]) and at or after `since`, in the order `(updated_at,
/// learner_id, key)` from after the row `after`, `limit` rows. `key` names the column that makes
/// a row unique among a learner's (the language, the phrase). Every value goes in through
/// [`push_opaque`].
pub(crate) fn push_export_range(
    sql: &mut QueryBuilder<'_, Postgres>,
    key: &str,
    horizon: DateTime<Utc>,
    since: Option<DateTime<Utc>>,
    after: Option<ExportAfter>,
    limit: i64,
) {
    sql.push("updated_at < ");
    push_opaque(sql, horizon);
    if let Some(since) = since {
        sql.push(" AND updated_at >= ");
        push_opaque(sql, since);
    }
    if let Some(after) = after {
        sql.push(format!(" AND (updated_at, learner_id, {key}) > ("));
        push_opaque(sql, after.updated_at);
        sql.push(", ");
        push_opaque(sql, after.learner_id);
        sql.push(", ");
        push_opaque(sql, after.key);
        sql.push(")");
    }
    sql.push(format!(" ORDER BY updated_at, learner_id, {key} LIMIT "));
    push_opaque(sql, limit);
}

/// The plan (`EXPLAIN` text) of a first page of the export at `now`, for the test that asserts
/// its due counts read the due days rather than count the due states.
pub async fn explain_export_page(db: &mut PgConnection, now: DateTime<Utc>) -> Result<String> {
    let mut sql = export_statement("EXPLAIN ", None, now, None, now, 101);
    let lines: Vec<String> = sql.build_query_scalar().fetch_all(db).await?;
    Ok(lines.join("\n"))
}
