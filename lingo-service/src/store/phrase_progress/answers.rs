//! The write path of a session's answers: the phrases checked against the language, the states
//! they touch brought up to date ([`update_states`]) and written in one statement.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{DateTime, TimeDelta, Utc};
use shared_auth::{FieldError, Problem};
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use sqlx::{PgConnection, Postgres};

use super::late::{Checkpoint, SETTLED_DAYS, replay_late, write_checkpoints};
use super::rows::{StateColumns, StateRow, schedule_error};
use crate::domain::fsrs::{self, PhraseState, Review};
use crate::domain::study_session::AnswerInput;
use crate::domain::text::is_storable;
use crate::error::{ErrorCode, Result};

/// 422 `unknown_phrase` naming every answer whose phrase is not one of `language`. A session's
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
    // Every unknown answer is named, as every bad field of a 422 is (an app that sends a
    // session of several phrases the catalogue dropped learns them all at once).
    let errors: Vec<FieldError> = answers
        .iter()
        .enumerate()
        .filter(|(_, answer)| !known.contains(&answer.phrase_id))
        .map(|(i, _)| {
            FieldError::new(
                format!("answers[{i}].phrase_id"),
                format!("is not a phrase of language {language}"),
            )
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    Err(Problem::from(ErrorCode::UnknownPhrase)
        .with_fields(errors)
        .into())
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
            let (checkpoint_at, checkpoint) = Checkpoint::before_advance(stored, &before, settled);
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
/// to be a phrase of `language` (else 422 `unknown_phrase` naming each such answer of
/// `answers`). One statement reads them: each state row carries the number of those
/// phrases that the catalogue has in `language` (an uncorrelated subquery, counted once), which
/// must be all of them. The phrases without a stored state are counted again in a statement of
/// their own that locks them ([`lock_new_phrases`]); only when a count falls short does
/// [`check_phrases`] run, to name the answer.
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
    // Without a stored state the count came with no row: the lock below counts those phrases.
    let all_known = rows
        .first()
        .is_none_or(|row| row.known == phrase_ids.len() as i64);
    let with_state: HashSet<&str> = rows.iter().map(|row| row.phrase_id.as_str()).collect();
    let new: Vec<String> = phrase_ids
        .iter()
        .filter(|id| !with_state.contains(id.as_str()))
        .cloned()
        .collect();
    if !all_known || !lock_new_phrases(tx, language, &new).await? {
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

/// Locks the phrases `new_ids` (distinct, with no state of the learner yet) `FOR KEY SHARE`, if
/// they are phrases of `language`; false when some is not. A session inserts their states with
/// `language`: the lock holds off a move of their phrase to another language, or its delete,
/// until this transaction ends, and a move or delete that came first makes this wait for it and
/// then not find the phrase in `language` (the move and the delete take the learners' row locks
/// to move or delete the states they find, so a phrase the learner has a state of needs no lock;
/// migrations 20261129600001 and 20261129700001, docs/lingo.md, "When the catalogue moves a
/// phrase" and "When the catalogue deletes a phrase"). Through a function of the schema's owner: a row lock
/// needs a write privilege this role has not on the catalogue.
async fn lock_new_phrases(
    tx: &mut PgConnection,
    language: &str,
    new_ids: &[String],
) -> Result<bool> {
    if new_ids.is_empty() {
        return Ok(true);
    }
    let locked = sqlx::query_scalar!(
        r#"SELECT lock_phrases_of_language($1, $2) AS "locked!""#,
        new_ids,
        language,
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok(locked == new_ids.len() as i64)
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
    let started = new.ids.len() as i64;
    // Each statement's parameters, bound in the order it numbers them.
    let statement = match (old.ids.is_empty(), new.ids.is_empty()) {
        (true, true) => return Ok(()),
        (false, true) => sqlx::query(&UPDATE_ONLY)
            .bind(learner_id)
            .bind_states(&old)
            .bind(&old.checkpoint_at),
        (true, false) => sqlx::query(&INSERT_ONLY)
            .bind(learner_id)
            .bind(language)
            .bind_states(&new)
            .bind(started),
        (false, false) => sqlx::query(&UPDATE_AND_INSERT)
            .bind(learner_id)
            .bind(language)
            .bind_states(&old)
            .bind_states(&new)
            .bind(started)
            .bind(&old.checkpoint_at),
    };
    statement.execute(&mut *tx).await?;
    Ok(())
}

// The three statements of `write_states`, built once from the same parts: `sqlx::query!` takes
// literal text only, which would be three copies of each part. The learner is `$1` in all of
// them, the language `$2` in the two that insert.

/// Every state was stored before: `$2..=$11` the states, `$12` their checkpoints' cuts.
static UPDATE_ONLY: LazyLock<String> = LazyLock::new(|| update_stored(2, 12));

/// None was stored before: `$3..=$12` the states, `$13` how many.
static INSERT_ONLY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH inserted AS ( {}) {}",
        insert_new(3),
        count_started(13)
    )
});

/// Some were stored before and some are new: `$3..=$12` the stored states, `$13..=$22` the new
/// ones, `$23` how many new, `$24` the stored states' checkpoints' cuts. (`$23 > 0` always holds
/// here, as no states at all send no statement; it is kept so that the statement stays the one
/// tested and measured.)
static UPDATE_AND_INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH updated AS ( {}), inserted AS ( {}) {} AND $23::bigint > 0",
        update_stored(3, 24),
        insert_new(13),
        count_started(23),
    )
});

/// The `UPDATE` of stored states from the state arrays numbered from `$first` and the
/// checkpoints' cuts at `$cuts`.
fn update_stored(first: usize, cuts: usize) -> String {
    format!(
        "UPDATE phrase_states AS s SET \
           stability = u.stability, difficulty = u.difficulty, due_at = u.due_at, \
           reviews = u.reviews, correct = u.correct, lapses = u.lapses, \
           first_reviewed_at = u.first_reviewed_at, last_reviewed_at = u.last_reviewed_at, \
           last_grade = u.last_grade, checkpoint_at = u.checkpoint_at, \
           updated_at = clock_timestamp() \
         FROM {} \
         WHERE s.learner_id = $1 AND s.phrase_id = u.phrase_id",
        unnest_states(first, Some(cuts)),
    )
}

/// The `INSERT` of new states from the state arrays numbered from `$first`.
fn insert_new(first: usize) -> String {
    format!(
        "INSERT INTO phrase_states \
           (learner_id, phrase_id, language_code, stability, difficulty, due_at, reviews, \
            correct, lapses, first_reviewed_at, last_reviewed_at, last_grade, updated_at) \
         SELECT $1, phrase_id, $2, stability, difficulty, due_at, reviews, correct, lapses, \
           first_reviewed_at, last_reviewed_at, last_grade, clock_timestamp() \
         FROM {}",
        unnest_states(first, None),
    )
}

/// Adds `$started` to the phrases started of the learner's totals in the language.
fn count_started(started: usize) -> String {
    format!(
        "UPDATE learner_language_totals SET phrases_started = phrases_started + ${started} \
         WHERE learner_id = $1 AND language_code = $2"
    )
}

/// The table `u` of the state arrays numbered from `$first`, and of the checkpoints' cuts at
/// `$cuts` when given.
fn unnest_states(first: usize, cuts: Option<usize>) -> String {
    let mut arrays: Vec<String> = (first..)
        .zip(STATE_ARRAYS)
        .map(|(number, (_, array_type))| format!("${number}::{array_type}"))
        .collect();
    let mut columns: Vec<&str> = STATE_ARRAYS.map(|(column, _)| column).to_vec();
    if let Some(number) = cuts {
        arrays.push(format!("${number}::timestamptz[]"));
        columns.push("checkpoint_at");
    }
    format!(
        "UNNEST({}) AS u ({})",
        arrays.join(", "),
        columns.join(", ")
    )
}

/// The columns of a state as `UNNEST` reads them, one array each: its name and the array's type,
/// in the order [`BindStates::bind_states`] binds them.
const STATE_ARRAYS: [(&str, &str); 10] = [
    ("phrase_id", "text[]"),
    ("stability", "real[]"),
    ("difficulty", "real[]"),
    ("due_at", "timestamptz[]"),
    ("reviews", "int[]"),
    ("correct", "int[]"),
    ("lapses", "int[]"),
    ("first_reviewed_at", "timestamptz[]"),
    ("last_reviewed_at", "timestamptz[]"),
    ("last_grade", "smallint[]"),
];

trait BindStates<'q> {
    /// Binds the arrays of `states` in the order of [`STATE_ARRAYS`] (not the checkpoints'
    /// cuts, which the statements number apart).
    fn bind_states(self, states: &'q StateColumns) -> Self;
}

impl<'q> BindStates<'q> for Query<'q, Postgres, PgArguments> {
    fn bind_states(self, states: &'q StateColumns) -> Self {
        self.bind(&states.ids)
            .bind(&states.stability)
            .bind(&states.difficulty)
            .bind(&states.due_at)
            .bind(&states.reviews)
            .bind(&states.correct)
            .bind(&states.lapses)
            .bind(&states.first)
            .bind(&states.last)
            .bind(&states.grade)
    }
}
