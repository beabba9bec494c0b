//! The review log (`phrase_review_sessions`, one row per session with answers) and the memory
//! state per (learner, phrase) (`phrase_states`) derived from it: written with each study
//! session that carries answers, read by `GET /me/phrases`, `GET /me/reviews`,
//! `GET /me/progress` and the analytics export.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, NaiveTime, TimeDelta, Utc};
use shared_auth::pg::push_opaque;
use sqlx::{FromRow, PgConnection, PgExecutor, Postgres, QueryBuilder};

use crate::domain::catalogue::{PhraseItem, PhraseStats};
use crate::domain::fsrs::{self, Grade, PhraseState, Review};
use crate::domain::phrase_progress::{
    ExportCursor, MyPhrasesCursor, MyPhrasesFilter, PhraseProgress, PhraseProgressRow,
};
use crate::domain::study_session::{AnswerInput, MAX_STUDIED_AT_AHEAD};
use crate::domain::text::is_storable;
use crate::error::{Error, ErrorCode, Result};

/// 422 `unknown_phrase` for the first answer whose phrase is not one of `language`. A session's
/// states are read with the count of its known phrases ([`update_states`]), so this runs only
/// when that count falls short (to name the answer), or when an id cannot be sent to PostgreSQL
/// at all (it holds a NUL: no phrase has it, and the session's statement could not store it).
pub async fn check_phrases(
    tx: &mut PgConnection,
    language: &str,
    answers: &[AnswerInput],
) -> Result<()> {
    let ids: Vec<&str> = answers
        .iter()
        .map(|a| a.phrase_id.as_str())
        .filter(|id| is_storable(id))
        .collect();
    let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
    let known: HashSet<String> = sqlx::query_scalar!(
        "SELECT id FROM phrases WHERE id = ANY($1) AND language_code = $2",
        &ids,
        language,
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .collect();
    match answers.iter().position(|a| !known.contains(&a.phrase_id)) {
        None => Ok(()),
        Some(i) => {
            let problem = shared_auth::Problem::from(ErrorCode::UnknownPhrase).with_field(
                &format!("answers[{i}].phrase_id"),
                format!("is not a phrase of language {language}"),
            );
            Err(problem.into())
        }
    }
}

/// One stored state row.
#[derive(FromRow)]
struct StateRow {
    phrase_id: String,
    stability: f32,
    difficulty: f32,
    due_at: DateTime<Utc>,
    reviews: i32,
    correct: i32,
    lapses: i32,
    first_reviewed_at: DateTime<Utc>,
    last_reviewed_at: DateTime<Utc>,
    last_grade: i16,
    /// The cut of the phrase's newest checkpoint (`phrase_states.checkpoint_at`), or of this
    /// checkpoint (`phrase_checkpoints.cut`); the pages' reads leave it out.
    #[sqlx(default)]
    checkpoint_at: Option<DateTime<Utc>>,
}

impl StateRow {
    fn state(&self) -> Result<PhraseState> {
        let last_grade = Grade::from_rating(self.last_grade)
            .ok_or_else(|| anyhow::anyhow!("stored grade {} out of range", self.last_grade))?;
        Ok(PhraseState {
            stability: self.stability,
            difficulty: self.difficulty,
            due_at: self.due_at,
            reviews: self.reviews,
            correct: self.correct,
            lapses: self.lapses,
            first_reviewed_at: self.first_reviewed_at,
            last_reviewed_at: self.last_reviewed_at,
            last_grade,
        })
    }
}

fn schedule_error(error: fsrs::ScheduleError) -> Error {
    Error::Internal(anyhow::Error::new(error))
}

/// A session's answers as the arrays of its review-log row, in the order the learner gave them
/// (an answer's position is its index): written by the statement that inserts the session
/// ([`crate::store::study_sessions::record`]).
pub struct AnswerColumns {
    pub phrase_ids: Vec<String>,
    pub grades: Vec<i16>,
}

impl AnswerColumns {
    pub fn of(answers: &[AnswerInput]) -> Self {
        Self {
            phrase_ids: answers.iter().map(|a| a.phrase_id.clone()).collect(),
            grades: answers.iter().map(|a| a.grade().rating()).collect(),
        }
    }
}

/// How far back from a session's arrival the review log is settled: a new session is at most 30
/// days old (`studied_at`), so no answer can be added before this any more; the day more covers
/// replicas whose clocks differ. Checkpoints ([`Checkpoint`]) are cut there.
const SETTLED_DAYS: i64 = 31;

/// Checks that the phrases of `answers` are phrases of `language` (422 `unknown_phrase`), then
/// brings the states of the phrases that `answers` (a session at `studied_at` that arrived at
/// `arrived_at`, already in the review log) touch up to date, and counts the phrases answered for
/// the first time in `phrases_started` of the learner's totals. Runs in the session's transaction
/// after the learner's row lock, so one learner's sessions apply one at a time.
///
/// A phrase whose stored state is older than `studied_at` is advanced from that state by this
/// session's answers; one with a later (or equally timed) answer on record is recomputed from its
/// answers in time order, so the order in which sessions arrive never changes a state. The
/// recomputation starts at the phrase's newest checkpoint at or before `studied_at` (see
/// [`Checkpoint`]), else at its first answer.
pub async fn update_states(
    tx: &mut PgConnection,
    learner_id: &str,
    language: &str,
    studied_at: DateTime<Utc>,
    arrived_at: DateTime<Utc>,
    answers: &[AnswerInput],
) -> Result<()> {
    if answers.is_empty() {
        return Ok(());
    }
    let settled = arrived_at - TimeDelta::days(SETTLED_DAYS);
    // A session may be timed up to this far ahead of its arrival (and of the database's clock).
    let latest_cut = arrived_at - MAX_STUDIED_AT_AHEAD;
    // This session's answers per phrase, in the order given.
    let mut touched: BTreeMap<&str, Vec<Review>> = BTreeMap::new();
    for answer in answers {
        touched.entry(&answer.phrase_id).or_default().push(Review {
            studied_at,
            grade: answer.grade(),
        });
    }
    let distinct: Vec<String> = touched.keys().map(|id| (*id).to_owned()).collect();
    let stored = read_checked_states(tx, learner_id, language, &distinct, answers).await?;

    let late: Vec<&StateRow> = stored
        .values()
        .filter(|stored| stored.last_reviewed_at >= studied_at)
        .collect();
    let mut replayed = replay_late(tx, learner_id, &late, studied_at, settled).await?;

    let mut states = Vec::with_capacity(touched.len());
    let mut checkpoints = Vec::new();
    for (phrase_id, reviews) in touched {
        let (state, checkpoint_at) = if let Some(replay) = replayed.remove(phrase_id) {
            checkpoints.extend(replay.checkpoint);
            (Some(replay.state), replay.checkpoint_at)
        } else if let Some(stored) = stored.get(phrase_id) {
            let before = stored.state()?;
            let (checkpoint_at, checkpoint) =
                Checkpoint::before_advance(stored, &before, settled, latest_cut);
            checkpoints.extend(checkpoint);
            let state = fsrs::replay(Some(before), reviews).map_err(schedule_error)?;
            (state, checkpoint_at)
        } else {
            (fsrs::replay(None, reviews).map_err(schedule_error)?, None)
        };
        let state =
            state.ok_or_else(|| anyhow::anyhow!("phrase {phrase_id} has no answers to fold"))?;
        states.push((phrase_id.to_owned(), state, checkpoint_at));
    }
    write_states(tx, learner_id, language, &states, &stored).await?;
    write_checkpoints(tx, learner_id, &checkpoints).await
}

/// The stored states of `phrase_ids` (distinct) of `learner_id`, once every one of them is known
/// to be a phrase of `language` (else 422 `unknown_phrase` for the first such answer of
/// `answers`). One statement, one round trip: each state row carries the number of those
/// phrases that the catalogue has in `language` (an uncorrelated subquery, counted once), which
/// must be all of them. Only when no state is stored yet (a learner's first answers to these
/// phrases) does the count need a statement of its own ([`check_phrases`]).
async fn read_checked_states(
    tx: &mut PgConnection,
    learner_id: &str,
    language: &str,
    phrase_ids: &[String],
    answers: &[AnswerInput],
) -> Result<HashMap<String, StateRow>> {
    let rows = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM phrases WHERE id = ANY($2) AND language_code = $3)
             AS "known!",
           phrase_id, stability, difficulty, due_at, reviews, correct, lapses,
           first_reviewed_at, last_reviewed_at, last_grade, checkpoint_at
         FROM phrase_states WHERE learner_id = $1 AND phrase_id = ANY($2)"#,
        learner_id,
        phrase_ids,
        language,
    )
    .fetch_all(&mut *tx)
    .await?;
    let all_known = rows
        .first()
        .is_some_and(|row| row.known == phrase_ids.len() as i64);
    if !all_known {
        check_phrases(tx, language, answers).await?;
    }
    let stored = rows
        .into_iter()
        .map(|row| {
            let state = StateRow {
                phrase_id: row.phrase_id,
                stability: row.stability,
                difficulty: row.difficulty,
                due_at: row.due_at,
                reviews: row.reviews,
                correct: row.correct,
                lapses: row.lapses,
                first_reviewed_at: row.first_reviewed_at,
                last_reviewed_at: row.last_reviewed_at,
                last_grade: row.last_grade,
                checkpoint_at: row.checkpoint_at,
            };
            (state.phrase_id.clone(), state)
        })
        .collect();
    Ok(stored)
}

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
struct Checkpoint {
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
    /// No cut lies after `latest_cut`: the previous release's sessions (migration
    /// 20261128300002) drop the checkpoints they come before only when their `studied_at` is
    /// before their statement's start, so a later session of theirs must not come before a cut.
    fn before_advance(
        stored: &StateRow,
        before: &PhraseState,
        settled: DateTime<Utc>,
        latest_cut: DateTime<Utc>,
    ) -> (Option<DateTime<Utc>>, Option<Checkpoint>) {
        let needs_one = before.first_reviewed_at < settled
            && stored.checkpoint_at.is_none_or(|cut| cut <= settled);
        // Every answer so far is in `before`: any cut after the last one holds it.
        let cut = settled.max(before.last_reviewed_at + TimeDelta::microseconds(1));
        if !needs_one || cut > latest_cut {
            // (A phrase last answered within the last minute, or ahead: a later session makes it.)
            return (stored.checkpoint_at, None);
        }
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
struct Replayed {
    state: PhraseState,
    checkpoint_at: Option<DateTime<Utc>>,
    checkpoint: Option<Checkpoint>,
}

/// Recomputes each of the `late` phrases (stored states with an answer at or after
/// `studied_at`) from its newest checkpoint at or before `studied_at`, else from its first
/// answer, through its answers in the review log (this session's included), and keeps a
/// checkpoint at `settled` when the replay passes it.
async fn replay_late(
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

    let mut replayed = HashMap::with_capacity(late.len());
    for stored in late {
        let id = &stored.phrase_id;
        let (start_cut, start) = starts.remove(id).unzip();
        let log = logs.remove(id).unwrap_or_default();
        let (state, at_settled) =
            fsrs::replay_with_cut(start, log, settled).map_err(schedule_error)?;
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
        replayed.insert(
            id.clone(),
            Replayed {
                state,
                checkpoint_at,
                checkpoint,
            },
        );
    }
    Ok(replayed)
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
async fn write_checkpoints(
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

/// The columns of phrase states (one array each, for `UNNEST`).
#[derive(Default)]
struct StateColumns {
    ids: Vec<String>,
    stability: Vec<f32>,
    difficulty: Vec<f32>,
    due_at: Vec<DateTime<Utc>>,
    reviews: Vec<i32>,
    correct: Vec<i32>,
    lapses: Vec<i32>,
    first: Vec<DateTime<Utc>>,
    last: Vec<DateTime<Utc>>,
    grade: Vec<i16>,
    checkpoint_at: Vec<Option<DateTime<Utc>>>,
}

impl StateColumns {
    fn push(&mut self, phrase_id: &str, state: &PhraseState, checkpoint_at: Option<DateTime<Utc>>) {
        self.ids.push(phrase_id.to_owned());
        self.stability.push(state.stability);
        self.difficulty.push(state.difficulty);
        self.due_at.push(state.due_at);
        self.reviews.push(state.reviews);
        self.correct.push(state.correct);
        self.lapses.push(state.lapses);
        self.first.push(state.first_reviewed_at);
        self.last.push(state.last_reviewed_at);
        self.grade.push(state.last_grade.rating());
        self.checkpoint_at.push(checkpoint_at);
    }
}

/// Writes `states` with their newest checkpoint's cut (those of `stored` phrases are updated,
/// the others inserted, without checkpoints) and adds the new ones to the totals' count of
/// phrases started: one statement. Under the learner's row lock no other transaction writes this
/// learner's states, so the split is exact: a plain `UPDATE` and `INSERT` write less than an
/// upsert (no conflict probe, no row lock record per row). A part with no rows is left out of
/// the statement: an empty `INSERT` or `UPDATE` still runs its statement trigger (the due-day
/// counts), and most sessions only update (a learner's phrases answered before) or only insert.
async fn write_states(
    tx: &mut PgConnection,
    learner_id: &str,
    language: &str,
    states: &[(String, PhraseState, Option<DateTime<Utc>>)],
    stored: &HashMap<String, StateRow>,
) -> Result<()> {
    let (mut old, mut new) = (StateColumns::default(), StateColumns::default());
    for (phrase_id, state, checkpoint_at) in states {
        let columns = if stored.contains_key(phrase_id) {
            &mut old
        } else {
            &mut new
        };
        columns.push(phrase_id, state, *checkpoint_at);
    }
    match (old.ids.is_empty(), new.ids.is_empty()) {
        (false, true) => update_states_only(tx, learner_id, &old).await,
        (true, false) => insert_states_only(tx, learner_id, language, &new).await,
        _ => update_and_insert_states(tx, learner_id, language, &old, &new).await,
    }
}

/// [`write_states`] when every state was stored before.
async fn update_states_only(
    tx: &mut PgConnection,
    learner_id: &str,
    old: &StateColumns,
) -> Result<()> {
    sqlx::query!(
        "UPDATE phrase_states AS s SET \
           stability = u.stability, difficulty = u.difficulty, due_at = u.due_at, \
           reviews = u.reviews, correct = u.correct, lapses = u.lapses, \
           first_reviewed_at = u.first_reviewed_at, last_reviewed_at = u.last_reviewed_at, \
           last_grade = u.last_grade, checkpoint_at = u.checkpoint_at, \
           updated_at = clock_timestamp() \
         FROM UNNEST($2::text[], $3::real[], $4::real[], $5::timestamptz[], $6::int[], \
           $7::int[], $8::int[], $9::timestamptz[], $10::timestamptz[], $11::smallint[], \
           $12::timestamptz[]) \
           AS u (phrase_id, stability, difficulty, due_at, reviews, correct, lapses, \
                 first_reviewed_at, last_reviewed_at, last_grade, checkpoint_at) \
         WHERE s.learner_id = $1 AND s.phrase_id = u.phrase_id",
        learner_id,
        &old.ids,
        &old.stability,
        &old.difficulty,
        &old.due_at,
        &old.reviews,
        &old.correct,
        &old.lapses,
        &old.first,
        &old.last,
        &old.grade,
        &old.checkpoint_at as &[Option<DateTime<Utc>>],
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// [`write_states`] when none was stored before.
async fn insert_states_only(
    tx: &mut PgConnection,
    learner_id: &str,
    language: &str,
    new: &StateColumns,
) -> Result<()> {
    sqlx::query!(
        "WITH inserted AS ( \
           INSERT INTO phrase_states \
             (learner_id, phrase_id, language_code, stability, difficulty, due_at, reviews, \
              correct, lapses, first_reviewed_at, last_reviewed_at, last_grade, updated_at) \
           SELECT $1, phrase_id, $2, stability, difficulty, due_at, reviews, correct, lapses, \
             first_reviewed_at, last_reviewed_at, last_grade, clock_timestamp() \
           FROM UNNEST($3::text[], $4::real[], $5::real[], $6::timestamptz[], $7::int[], \
             $8::int[], $9::int[], $10::timestamptz[], $11::timestamptz[], $12::smallint[]) \
             AS u (phrase_id, stability, difficulty, due_at, reviews, correct, lapses, \
                   first_reviewed_at, last_reviewed_at, last_grade)) \
         UPDATE learner_language_totals SET phrases_started = phrases_started + $13 \
         WHERE learner_id = $1 AND language_code = $2",
        learner_id,
        language,
        &new.ids,
        &new.stability,
        &new.difficulty,
        &new.due_at,
        &new.reviews,
        &new.correct,
        &new.lapses,
        &new.first,
        &new.last,
        &new.grade,
        new.ids.len() as i64,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// [`write_states`] when some states were stored before and some are new.
async fn update_and_insert_states(
    tx: &mut PgConnection,
    learner_id: &str,
    language: &str,
    old: &StateColumns,
    new: &StateColumns,
) -> Result<()> {
    let started = new.ids.len() as i64;
    sqlx::query!(
        "WITH updated AS ( \
           UPDATE phrase_states AS s SET \
             stability = u.stability, difficulty = u.difficulty, due_at = u.due_at, \
             reviews = u.reviews, correct = u.correct, lapses = u.lapses, \
             first_reviewed_at = u.first_reviewed_at, last_reviewed_at = u.last_reviewed_at, \
             last_grade = u.last_grade, checkpoint_at = u.checkpoint_at, \
             updated_at = clock_timestamp() \
           FROM UNNEST($3::text[], $4::real[], $5::real[], $6::timestamptz[], $7::int[], \
             $8::int[], $9::int[], $10::timestamptz[], $11::timestamptz[], $12::smallint[], \
             $24::timestamptz[]) \
             AS u (phrase_id, stability, difficulty, due_at, reviews, correct, lapses, \
                   first_reviewed_at, last_reviewed_at, last_grade, checkpoint_at) \
           WHERE s.learner_id = $1 AND s.phrase_id = u.phrase_id), \
         inserted AS ( \
           INSERT INTO phrase_states \
             (learner_id, phrase_id, language_code, stability, difficulty, due_at, reviews, \
              correct, lapses, first_reviewed_at, last_reviewed_at, last_grade, updated_at) \
           SELECT $1, phrase_id, $2, stability, difficulty, due_at, reviews, correct, lapses, \
             first_reviewed_at, last_reviewed_at, last_grade, clock_timestamp() \
           FROM UNNEST($13::text[], $14::real[], $15::real[], $16::timestamptz[], $17::int[], \
             $18::int[], $19::int[], $20::timestamptz[], $21::timestamptz[], $22::smallint[]) \
             AS u (phrase_id, stability, difficulty, due_at, reviews, correct, lapses, \
                   first_reviewed_at, last_reviewed_at, last_grade)) \
         UPDATE learner_language_totals SET phrases_started = phrases_started + $23 \
         WHERE learner_id = $1 AND language_code = $2 AND $23::bigint > 0",
        learner_id,
        language,
        &old.ids,
        &old.stability,
        &old.difficulty,
        &old.due_at,
        &old.reviews,
        &old.correct,
        &old.lapses,
        &old.first,
        &old.last,
        &old.grade,
        &new.ids,
        &new.stability,
        &new.difficulty,
        &new.due_at,
        &new.reviews,
        &new.correct,
        &new.lapses,
        &new.first,
        &new.last,
        &new.grade,
        started,
        &old.checkpoint_at as &[Option<DateTime<Utc>>],
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

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
        let stats = self.has_stats.then(|| PhraseStats {
            view_count: self.view_count.unwrap_or(0),
            learner_count: self.learner_count.unwrap_or(0),
            accuracy: self.accuracy,
        });
        let phrase = PhraseItem {
            id: self.state.phrase_id,
            text: self.text,
            language_code: self.language_code,
            translation_count: self.translation_count,
            stats,
        };
        Ok(PhraseProgress::new(phrase, &state, now))
    }
}

/// The languages a page reads, as a table `l (code)`: the one of `language`, or every language
/// `learner_id` has studied (a row of `learner_language_totals` each). A learner's states are
/// only written with a session of their language, in the transaction that writes that totals row,
/// so every language with a state is there. (A skip scan of `phrase_states` for its languages,
/// as a recursive query, cost more to plan than the whole page: 0.6-0.9 ms against 0.2.)
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
/// order from `phrase_states_language_due_idx` with their phrases (a state whose phrase the
/// catalogue no longer has is left out before the limit, as a join on the whole list would),
/// then the first `limit` of those, with their phrases' stored translation counts. Only the page's
/// rows get their stats. So one index serves the pages with and without a language, and the states' writes keep one index fewer.
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

/// The start (00:00 UTC) of the day of `now`: `phrase_due_days` counts the phrases due before it,
/// `phrase_states` those due from it to `now`.
fn day_start(now: DateTime<Utc>) -> DateTime<Utc> {
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
fn push_due_total(
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

fn due_total_statement<'a>(
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

/// `learner_id`'s phrases due at `now`, per language (see [`push_due_total`]).
fn due_by_language_statement<'a>(
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

/// One page of the phrase-progress export in keyset order `(updated_at, learner_id,
/// phrase_id)`: rows changed at or after `since` and before `horizon` (see
/// [`crate::store::progress::export_horizon`]), after `cursor`; `limit` rows.
pub async fn export_page<'e>(
    db: impl PgExecutor<'e>,
    since: Option<DateTime<Utc>>,
    horizon: DateTime<Utc>,
    cursor: Option<&ExportCursor>,
    limit: i64,
) -> Result<Vec<PhraseProgressRow>> {
    #[derive(FromRow)]
    struct Row {
        learner_id: String,
        language_code: String,
        updated_at: DateTime<Utc>,
        #[sqlx(flatten)]
        state: StateRow,
    }
    let mut sql = QueryBuilder::<Postgres>::new(
        "SELECT learner_id, phrase_id, language_code, stability, difficulty, due_at, reviews, \
           correct, lapses, first_reviewed_at, last_reviewed_at, last_grade, updated_at \
         FROM phrase_states WHERE updated_at < ",
    );
    // Every value hidden: with visible ones the first page and every page after a cursor were
    // planned at every request (0.063 ms of planning for 0.044 of execution).
    push_opaque(&mut sql, horizon);
    if let Some(since) = since {
        sql.push(" AND updated_at >= ");
        push_opaque(&mut sql, since);
    }
    if let Some(cursor) = cursor {
        sql.push(" AND (updated_at, learner_id, phrase_id) > (");
        push_opaque(&mut sql, cursor.updated_at());
        sql.push(", ");
        push_opaque(&mut sql, cursor.learner_id.clone());
        sql.push(", ");
        push_opaque(&mut sql, cursor.phrase_id.clone());
        sql.push(")");
    }
    sql.push(" ORDER BY updated_at, learner_id, phrase_id LIMIT ");
    push_opaque(&mut sql, limit);
    let rows = sql.build_query_as::<Row>().fetch_all(db).await?;
    rows.into_iter()
        .map(|row| {
            let state = row.state.state()?;
            Ok(PhraseProgressRow {
                learner_id: row.learner_id,
                phrase_id: row.state.phrase_id,
                language_code: row.language_code,
                reviews: state.reviews,
                correct: state.correct,
                lapses: state.lapses,
                last_reviewed_at: state.last_reviewed_at,
                last_grade: state.last_grade,
                stability_days: f64::from(state.stability),
                difficulty: f64::from(state.difficulty),
                due_at: state.due_at,
                updated_at: row.updated_at,
            })
        })
        .collect()
}
