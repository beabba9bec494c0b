//! The learners' study sessions and the totals each one updates (`learners`,
//! `learner_language_totals`), written in one transaction.

use chrono::{DateTime, Utc};
use shared_auth::Paging;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::domain::study_session::{StudySession, StudySessionCreated, StudySessionInput};
use crate::domain::xp::session_xp;
use crate::error::Result;
use crate::store;

/// Writes the session, its answers with the phrase states they change, and the learner's totals.
/// The learner row is upserted first: its row lock serialises this learner's concurrent writes,
/// so none is lost and `total_xp` before and after this session, and every phrase state, are
/// exact. `input` must be validated, and its language known; its answers' phrases are checked
/// here (422 `unknown_phrase`, the transaction then stores nothing). `studied_at` is when the
/// session happened.
///
/// One statement writes the learner, the session, its answers (one row of the review log) and
/// the totals; a session with answers then checks its phrases and reads the states they have in
/// one more, and writes those states in another (see
/// [`store::phrase_progress::update_states`]), after the learner's lock, so they see every
/// earlier session of this learner.
pub async fn record(
    tx: &mut PgConnection,
    learner_id: &str,
    input: &StudySessionInput,
    studied_at: DateTime<Utc>,
) -> Result<StudySessionCreated> {
    let xp = session_xp(input.phrases_seen, input.phrases_correct);
    let answers = input.answers.as_deref().unwrap_or_default();
    let log = store::phrase_progress::AnswerColumns::of(answers);
    // Each step reads the row of the step before, so they run (and lock) in this order: the
    // learner, the session, then its answers and the totals. Validated input fits the integer
    // columns.
    let row = sqlx::query!(
        "WITH learner AS ( \
           INSERT INTO learners AS l (learner_id, total_xp, sessions, updated_at) \
           VALUES ($2, $7, 1, clock_timestamp()) \
           ON CONFLICT (learner_id) DO UPDATE SET \
             total_xp = l.total_xp + EXCLUDED.total_xp, \
             sessions = l.sessions + 1, \
             updated_at = EXCLUDED.updated_at \
           RETURNING total_xp), \
         arrival AS (SELECT clock_timestamp() AS at), \
         session AS ( \
           INSERT INTO study_sessions \
             (id, learner_id, language_code, duration_seconds, phrases_seen, phrases_correct, \
              xp_awarded, created_at, studied_at, answer_count) \
           SELECT $1, $2, $3, $4, $5, $6, $7, arrival.at, COALESCE($8, arrival.at), $9 \
           FROM learner, arrival \
           RETURNING id, language_code, duration_seconds, phrases_seen, phrases_correct, \
             xp_awarded, created_at, studied_at, answer_count), \
         answers AS ( \
           INSERT INTO phrase_review_sessions \
             (learner_id, studied_at, session_id, phrase_ids, grades) \
           SELECT $2, session.studied_at, session.id, $10, $11 \
           FROM session WHERE cardinality($10::text[]) > 0), \
         totals AS ( \
           INSERT INTO learner_language_totals AS t \
             (learner_id, language_code, sessions, total_duration_seconds, phrases_seen, \
              phrases_correct, xp, first_studied_at, last_studied_at, updated_at, \
              phrases_started) \
           SELECT $2, $3, 1, $4, $5, $6, $7, session.studied_at, session.studied_at, \
             session.created_at, 0 \
           FROM session \
           ON CONFLICT (learner_id, language_code) DO UPDATE SET \
             sessions = t.sessions + 1, \
             total_duration_seconds = t.total_duration_seconds + EXCLUDED.total_duration_seconds, \
             phrases_seen = t.phrases_seen + EXCLUDED.phrases_seen, \
             phrases_correct = t.phrases_correct + EXCLUDED.phrases_correct, \
             xp = t.xp + EXCLUDED.xp, \
             first_studied_at = LEAST(t.first_studied_at, EXCLUDED.first_studied_at), \
             last_studied_at = GREATEST(t.last_studied_at, EXCLUDED.last_studied_at), \
             updated_at = GREATEST(t.updated_at, EXCLUDED.updated_at)) \
         SELECT session.id, session.language_code, session.duration_seconds, \
           session.phrases_seen, session.phrases_correct, session.xp_awarded, \
           session.created_at, session.studied_at, session.answer_count, learner.total_xp \
         FROM session, learner",
        Uuid::now_v7(),
        learner_id,
        input.language_code,
        input.duration_seconds as i32,
        input.phrases_seen as i32,
        input.phrases_correct as i32,
        xp as i32,
        input.studied_at.is_some().then_some(studied_at),
        answers.len() as i32,
        &log.phrase_ids,
        &log.grades,
    )
    .fetch_one(&mut *tx)
    // A language the pipeline deleted since the request's check fails
    // `study_sessions_language_code_fkey`, which `error::on_constraint` turns into 422
    // `unknown_language`: the session's key is checked first (its row is queued first), and the
    // totals' key to `languages` names the same language.
    .await?;
    let session = StudySession {
        id: row.id,
        language_code: row.language_code,
        duration_seconds: row.duration_seconds,
        phrases_seen: row.phrases_seen,
        phrases_correct: row.phrases_correct,
        xp_awarded: row.xp_awarded,
        created_at: row.created_at,
        studied_at: row.studied_at,
        answer_count: row.answer_count,
    };
    store::phrase_progress::update_states(
        tx,
        learner_id,
        &input.language_code,
        session.studied_at,
        session.created_at,
        answers,
    )
    .await?;
    Ok(StudySessionCreated::new(session, row.total_xp))
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

/// How many sessions `learner_id` has recorded.
pub async fn count_for<'e>(db: impl PgExecutor<'e>, learner_id: &str) -> Result<i64> {
    let count = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM study_sessions WHERE learner_id = $1"#,
        learner_id
    )
    .fetch_one(db)
    .await?;
    Ok(count)
}
