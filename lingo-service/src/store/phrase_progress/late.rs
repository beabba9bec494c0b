//! A late session (one older than a phrase's newest answer): the phrases it touches replayed in
//! time order from their newest checkpoint and the review log, and the checkpoints kept for that.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::PgConnection;

use super::rows::{StateColumns, StateRow, schedule_error};
use crate::domain::fsrs::{self, Grade, PhraseState, Review};
use crate::error::Result;

/// How far back from a session's arrival the review log is settled: a new session is at most 30
/// days old (`studied_at`), so no answer can be added before this any more; the day more covers
/// replicas whose clocks differ. Checkpoints ([`Checkpoint`]) are cut there.
pub(super) const SETTLED_DAYS: i64 = 31;

/// What a session changes in one phrase's checkpoints (`phrase_checkpoints`).
///
/// A checkpoint is the state of a (learner, phrase) after exactly its answers before its `cut`.
/// Once the cut is settled (31 days before a session's arrival, [`SETTLED_DAYS`]), no later
/// session can add an answer before it, so a late session replays the phrase from there instead
/// of from its first answer. Only phrases with answers before the settled line get them: the
/// others replay from their first answer, which is no older.
///
/// So that a phrase always has one at most about three months old, a session that advances a
/// phrase (in time order) whose newest checkpoint is already settled (or that has none) keeps
/// the state before it, cut right after its last answer (or at the settled line, if later):
/// settled a month on, when the next one is made. At most once a month per phrase, so
/// advancing stays one update per phrase. A late session removes the checkpoints its answers
/// make wrong (cut after its `studied_at`) and keeps one at the settled line.
pub(super) struct Checkpoint {
    phrase_id: String,
    /// A checkpoint to add: its cut and state.
    add: Option<(DateTime<Utc>, PhraseState)>,
    /// Remove the phrase's checkpoints cut before this (superseded by a settled one).
    drop_before: Option<DateTime<Utc>>,
    /// Remove the phrase's checkpoints cut after this (they miss this session's answers).
    drop_after: Option<DateTime<Utc>>,
}

impl Checkpoint {
    /// The phrase's newest checkpoint cut after a session advances it from `before`, its state
    /// `stored`, and the change that makes it.
    ///
    /// A cut just after the last answer may lie in the future (an answer is timed up to a minute
    /// ahead). No later session can come between that answer and the cut (times are to the
    /// microsecond), and one before the cut is late: its replay removes the checkpoint.
    pub(super) fn before_advance(
        stored: &StateRow,
        before: &PhraseState,
        settled: DateTime<Utc>,
    ) -> (Option<DateTime<Utc>>, Option<Checkpoint>) {
        let needs_one = before.first_reviewed_at < settled
            && stored.checkpoint_at.is_none_or(|cut| cut <= settled);
        if !needs_one {
            return (stored.checkpoint_at, None);
        }
        // Every answer so far is in `before`: any cut after the last one holds it.
        let cut = settled.max(before.last_reviewed_at + TimeDelta::microseconds(1));
        let change = Checkpoint {
            phrase_id: stored.phrase_id.clone(),
            add: Some((cut, *before)),
            drop_before: stored.checkpoint_at,
            drop_after: None,
        };
        (Some(cut), Some(change))
    }
}

/// A late phrase recomputed: its state, its newest checkpoint's cut and the change that leaves it.
pub(super) struct Replayed {
    pub(super) state: PhraseState,
    pub(super) checkpoint_at: Option<DateTime<Utc>>,
    pub(super) checkpoint: Option<Checkpoint>,
}

/// Recomputes each of the `late` phrases (stored states with an answer at or after
/// `studied_at`) from its newest checkpoint at or before `studied_at`, else from its first
/// answer, through its answers in the review log (this session's included), and keeps a
/// checkpoint at `settled` when the replay passes it.
pub(super) async fn replay_late(
    tx: &mut PgConnection,
    learner_id: &str,
    late: &[&StateRow],
    studied_at: DateTime<Utc>,
    settled: DateTime<Utc>,
) -> Result<HashMap<String, Replayed>> {
    if late.is_empty() {
        return Ok(HashMap::new());
    }
    let with_checkpoints: Vec<String> = late
        .iter()
        .filter(|stored| stored.checkpoint_at.is_some())
        .map(|stored| stored.phrase_id.clone())
        .collect();
    let mut starts = checkpoints_at(tx, learner_id, &with_checkpoints, studied_at).await?;
    // Every answer of a phrase is at or after its first one, or at `studied_at` (this session
    // may be its earliest).
    let from: HashMap<String, DateTime<Utc>> = late
        .iter()
        .map(|stored| {
            let id = &stored.phrase_id;
            let first = stored.first_reviewed_at.min(studied_at);
            let from = starts.get(id).map_or(first, |(cut, _)| *cut);
            (id.clone(), from)
        })
        .collect();
    let mut logs = logs_from(tx, learner_id, &from).await?;

    late.iter()
        .map(|stored| {
            let id = &stored.phrase_id;
            let start = starts.remove(id);
            let log = logs.remove(id).unwrap_or_default();
            let replayed = replay_one(stored, start, log, studied_at, settled)?;
            Ok((id.clone(), replayed))
        })
        .collect()
}

/// Recomputes the late phrase `stored` from `start` (its newest checkpoint at or before
/// `studied_at`: its cut and state), else from nothing, through `log` (its answers from there
/// on, in time order), and gives its checkpoints' change.
fn replay_one(
    stored: &StateRow,
    start: Option<(DateTime<Utc>, PhraseState)>,
    log: Vec<Review>,
    studied_at: DateTime<Utc>,
    settled: DateTime<Utc>,
) -> Result<Replayed> {
    let id = &stored.phrase_id;
    let (start_cut, start) = start.unzip();
    let (state, at_settled) = fsrs::replay_with_cut(start, log, settled).map_err(schedule_error)?;
    let state = state.ok_or_else(|| anyhow::anyhow!("phrase {id} has no answers to fold"))?;
    // A checkpoint at the settled line, when the replay started before it and had answers
    // before it.
    let add = at_settled
        .filter(|_| start_cut.is_none_or(|cut| cut <= settled))
        .map(|state| (settled, state));
    let checkpoint_at = start_cut.max(add.map(|(cut, _)| cut));
    let checkpoint = Checkpoint {
        phrase_id: id.clone(),
        drop_before: add.map(|(cut, _)| cut),
        drop_after: Some(studied_at),
        add,
    };
    let checkpoint =
        (stored.checkpoint_at.is_some() || checkpoint.add.is_some()).then_some(checkpoint);
    Ok(Replayed {
        state,
        checkpoint_at,
        checkpoint,
    })
}

/// The newest checkpoint cut at or before `at` of each of `phrase_ids`: its cut and state.
async fn checkpoints_at(
    tx: &mut PgConnection,
    learner_id: &str,
    phrase_ids: &[String],
    at: DateTime<Utc>,
) -> Result<HashMap<String, (DateTime<Utc>, PhraseState)>> {
    if phrase_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query_as!(
        StateRow,
        r#"SELECT DISTINCT ON (phrase_id) phrase_id, stability, difficulty, due_at, reviews,
             correct, lapses, first_reviewed_at, last_reviewed_at, last_grade,
             cut AS "checkpoint_at?"
           FROM phrase_checkpoints WHERE learner_id = $1 AND phrase_id = ANY($2) AND cut <= $3
           ORDER BY phrase_id, cut DESC"#,
        learner_id,
        phrase_ids,
        at,
    )
    .fetch_all(&mut *tx)
    .await?;
    rows.into_iter()
        .filter_map(|row| Some((row.checkpoint_at?, row)))
        .map(|(cut, row)| Ok((row.phrase_id.clone(), (cut, row.state()?))))
        .collect()
}

/// The answers of each phrase of `from` at or after its time there, in time order. Only the
/// learner's sessions from the earliest of those times are read: a range of the log's primary
/// key `(learner_id, studied_at, session_id)`, in that order. Their answers are picked here
/// rather than unnested in SQL: matching each answer against the phrases is a hash lookup here,
/// and a scan of the list in PostgreSQL.
async fn logs_from(
    tx: &mut PgConnection,
    learner_id: &str,
    from: &HashMap<String, DateTime<Utc>>,
) -> Result<HashMap<String, Vec<Review>>> {
    let mut logs: HashMap<String, Vec<Review>> = HashMap::with_capacity(from.len());
    let Some(earliest) = from.values().min() else {
        return Ok(logs);
    };
    let mut sessions = sqlx::query!(
        "SELECT studied_at, phrase_ids, grades FROM phrase_review_sessions \
         WHERE learner_id = $1 AND studied_at >= $2 \
         ORDER BY studied_at, session_id",
        learner_id,
        earliest,
    )
    .fetch_all(&mut *tx)
    .await?;
    // Sessions with the very same `studied_at` go by their answers (phrase ids, then grades, as
    // bytes), not by their ids, which follow arrival: so which arrives first never matters. The
    // rows come in time order, and a stable sort of sorted runs is one pass.
    sessions.sort_by(|a, b| {
        (a.studied_at, &a.phrase_ids, &a.grades).cmp(&(b.studied_at, &b.phrase_ids, &b.grades))
    });
    for session in sessions {
        for (phrase_id, rating) in session.phrase_ids.iter().zip(&session.grades) {
            let Some(since) = from.get(phrase_id) else {
                continue;
            };
            if session.studied_at < *since {
                continue;
            }
            let grade = Grade::from_rating(*rating)
                .ok_or_else(|| anyhow::anyhow!("stored grade {rating} out of range"))?;
            logs.entry(phrase_id.clone()).or_default().push(Review {
                studied_at: session.studied_at,
                grade,
            });
        }
    }
    Ok(logs)
}

/// Applies the checkpoint changes of a session: one statement, and none when there are none
/// (most sessions: a phrase gets a checkpoint about once a month).
pub(super) async fn write_checkpoints(
    tx: &mut PgConnection,
    learner_id: &str,
    changes: &[Checkpoint],
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let mut added = StateColumns::default();
    let mut cuts = Vec::new();
    for change in changes {
        if let Some((cut, state)) = &change.add {
            added.push(&change.phrase_id, state, None);
            cuts.push(*cut);
        }
    }
    let phrase_ids: Vec<&str> = changes.iter().map(|c| c.phrase_id.as_str()).collect();
    let before: Vec<Option<DateTime<Utc>>> = changes.iter().map(|c| c.drop_before).collect();
    let after: Vec<Option<DateTime<Utc>>> = changes.iter().map(|c| c.drop_after).collect();
    // The removed and the added never share a cut (an added one is at or after its drop line,
    // and at or before its `drop_after`), and a cut already there holds the same state.
    sqlx::query!(
        "WITH dropped AS ( \
           DELETE FROM phrase_checkpoints c \
           USING UNNEST($2::text[], $3::timestamptz[], $4::timestamptz[]) \
             AS d (phrase_id, drop_before, drop_after) \
           WHERE c.learner_id = $1 AND c.phrase_id = d.phrase_id \
             AND (c.cut < d.drop_before OR c.cut > d.drop_after)) \
         INSERT INTO phrase_checkpoints \
           (learner_id, phrase_id, cut, stability, difficulty, due_at, reviews, correct, lapses, \
            first_reviewed_at, last_reviewed_at, last_grade) \
         SELECT $1, phrase_id, cut, stability, difficulty, due_at, reviews, correct, lapses, \
           first_reviewed_at, last_reviewed_at, last_grade \
         FROM UNNEST($5::text[], $6::timestamptz[], $7::real[], $8::real[], $9::timestamptz[], \
           $10::int[], $11::int[], $12::int[], $13::timestamptz[], $14::timestamptz[], \
           $15::smallint[]) \
           AS u (phrase_id, cut, stability, difficulty, due_at, reviews, correct, lapses, \
                 first_reviewed_at, last_reviewed_at, last_grade) \
         ON CONFLICT (learner_id, phrase_id, cut) DO NOTHING",
        learner_id,
        &phrase_ids as &[&str],
        &before as &[Option<DateTime<Utc>>],
        &after as &[Option<DateTime<Utc>>],
        &added.ids,
        &cuts,
        &added.stability,
        &added.difficulty,
        &added.due_at,
        &added.reviews,
        &added.correct,
        &added.lapses,
        &added.first,
        &added.last,
        &added.grade,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
