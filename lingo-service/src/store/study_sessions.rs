//! The learners' study sessions and the totals each one updates (`learners`,
//! `learner_language_totals`), written in one transaction.

use chrono::{DateTime, Utc};
use shared_auth::Paging;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::domain::study_session::{StudySession, StudySessionCreated, StudySessionInput};
use crate::domain::xp::session_xp;
use crate::error::{ErrorCode, Result, on_constraint};
use crate::store;

/// Writes the session, its answers with the phrase states they change, and the learner's totals.
/// The learner row is upserted first: its row lock serialises this learner's concurrent writes,
/// so none is lost and `total_xp` before and after this session, and every phrase state, are
/// exact. `input` must be validated (its phrases too); `studied_at` is when the session happened.
pub async fn record(
    tx: &mut PgConnection,
    learner_id: &str,
    input: &StudySessionInput,
    studied_at: DateTime<Utc>,
) -> Result<StudySessionCreated> {
    let xp = session_xp(input.phrases_seen, input.phrases_correct);
    let total_xp = sqlx::query_scalar!(
        "INSERT INTO learners AS l (learner_id, total_xp, sessions, updated_at) \
         VALUES ($1, $2, 1, clock_timestamp()) \
         ON CONFLICT (learner_id) DO UPDATE SET \
           total_xp = l.total_xp + EXCLUDED.total_xp, \
           sessions = l.sessions + 1, \
           updated_at = EXCLUDED.updated_at \
         RETURNING total_xp",
        learner_id,
        xp,
    )
    .fetch_one(&mut *tx)
    .await?;

    let answers = input.answers.as_deref().unwrap_or_default();
    // Validated input fits the integer columns.
    let session = sqlx::query_as!(
        StudySession,
        "WITH arrival AS (SELECT clock_timestamp() AS at) \
         INSERT INTO study_sessions \
           (id, learner_id, language_code, duration_seconds, phrases_seen, phrases_correct, \
            xp_awarded, created_at, studied_at, answer_count) \
         SELECT $1, $2, $3, $4, $5, $6, $7, arrival.at, COALESCE($8, arrival.at), $9 \
         FROM arrival \
         RETURNING id, language_code, duration_seconds, phrases_seen, phrases_correct, \
           xp_awarded, created_at, studied_at, answer_count",
        Uuid::now_v7(),
        learner_id,
        input.language_code,
        input.duration_seconds as i32,
        input.phrases_seen as i32,
        input.phrases_correct as i32,
        xp as i32,
        input.studied_at.is_some().then_some(studied_at),
        answers.len() as i32,
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(on_constraint(
        "study_sessions_language_code_fkey",
        ErrorCode::UnknownLanguage,
    ))?;

    let phrases_started = store::phrase_progress::record_answers(
        tx,
        learner_id,
        &input.language_code,
        session.id,
        session.studied_at,
        answers,
    )
    .await?;

    sqlx::query!(
        "INSERT INTO learner_language_totals AS t \
           (learner_id, language_code, sessions, total_duration_seconds, phrases_seen, \
            phrases_correct, xp, first_studied_at, last_studied_at, updated_at, phrases_started) \
         VALUES ($1, $2, 1, $3, $4, $5, $6, $7, $7, $8, $9) \
         ON CONFLICT (learner_id, language_code) DO UPDATE SET \
           sessions = t.sessions + 1, \
           total_duration_seconds = t.total_duration_seconds + EXCLUDED.total_duration_seconds, \
           phrases_seen = t.phrases_seen + EXCLUDED.phrases_seen, \
           phrases_correct = t.phrases_correct + EXCLUDED.phrases_correct, \
           xp = t.xp + EXCLUDED.xp, \
           first_studied_at = LEAST(t.first_studied_at, EXCLUDED.first_studied_at), \
           last_studied_at = GREATEST(t.last_studied_at, EXCLUDED.last_studied_at), \
           phrases_started = t.phrases_started + EXCLUDED.phrases_started, \
           updated_at = GREATEST(t.updated_at, EXCLUDED.updated_at)",
        learner_id,
        input.language_code,
        input.duration_seconds,
        input.phrases_seen,
        input.phrases_correct,
        xp,
        session.studied_at,
        session.created_at,
        phrases_started,
    )
    .execute(&mut *tx)
    .await
    .map_err(on_constraint(
        "learner_language_totals_language_code_fkey",
        ErrorCode::UnknownLanguage,
    ))?;

    Ok(StudySessionCreated::new(session, total_xp))
}

/// One page (plus one row) of `learner_id`'s sessions, newest first (`created_at`, then `id`,
/// descending), starting after the session `after` (its `created_at` and `id`) when given: a
/// range of the `(learner_id, created_at DESC, id DESC)` index.
pub async fn list_for<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
    after: Option<(DateTime<Utc>, Uuid)>,
    paging: Paging,
) -> Result<Vec<StudySession>> {
    let sessions = sqlx::query_as!(
        StudySession,
        "SELECT id, language_code, duration_seconds, phrases_seen, phrases_correct, xp_awarded, \
           created_at, studied_at, answer_count \
         FROM study_sessions WHERE learner_id = $1 \
           AND (created_at, id) < (coalesce($2::timestamptz, 'infinity'), \
             coalesce($3::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff')) \
         ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
        learner_id,
        after.map(|(created_at, _)| created_at),
        after.map(|(_, id)| id),
        paging.fetch_limit(),
        paging.offset,
    )
    .fetch_all(db)
    .await?;
    Ok(sessions)
}

/// The session `id` when it is `learner_id`'s.
pub async fn find_for<'e>(
    db: impl PgExecutor<'e>,
    learner_id: &str,
    id: Uuid,
) -> Result<Option<StudySession>> {
    let session = sqlx::query_as!(
        StudySession,
        "SELECT id, language_code, duration_seconds, phrases_seen, phrases_correct, xp_awarded, \
           created_at, studied_at, answer_count \
         FROM study_sessions WHERE id = $1 AND learner_id = $2",
        id,
        learner_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(session)
}
