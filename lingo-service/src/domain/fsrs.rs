//! Spaced-repetition scheduling with FSRS-6 (docs/lingo.md, "Phrase progress"): the memory
//! state of one (learner, phrase) pair as the fold of its answers in time order.
//!
//! The memory arithmetic is the `fsrs` crate's (the scheduler Anki uses, in f32) with its 21
//! default parameters; what the crate leaves to its caller follows the Python reference
//! (`fsrs` 6.x, `Scheduler(learning_steps=(), relearning_steps=(), enable_fuzzing=False)`):
//! elapsed time in whole days rounded down, the interval rounded to the nearest day (ties to
//! even, as Python's `round`) and clamped to 1..=36,500 days, `due_at = studied_at + interval`,
//! kept to the whole second as it is shown (see [`due_at`]).
//! `tests/fsrs/vectors.json` holds the reference's own numbers; the tests below compare.

use std::sync::LazyLock;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use fsrs::{DEFAULT_PARAMETERS, FSRS, MemoryState};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Desired probability of recall when a phrase falls due.
pub const DESIRED_RETENTION: f32 = 0.9;
/// The longest interval, in days.
pub const MAX_INTERVAL_DAYS: i64 = 36_500;
/// The `fsrs` crate keeps stability at most 36,500 days (the Python reference does not cap it;
/// past 100 years both schedule [`MAX_INTERVAL_DAYS`], so only `stability_days` differs).
pub const MAX_STABILITY_DAYS: f64 = 36_500.0;

static SCHEDULER: LazyLock<FSRS> = LazyLock::new(FSRS::default);

/// How well the learner recalled a phrase (FSRS's four ratings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Grade {
    Again,
    Hard,
    Good,
    Easy,
}

impl Grade {
    /// The grade an answer gets without one: `good` when correct, `again` when wrong.
    pub fn default_for(correct: bool) -> Self {
        if correct { Self::Good } else { Self::Again }
    }

    /// Whether `correct` agrees with this grade: only `again` is a wrong answer.
    pub fn agrees_with(self, correct: bool) -> bool {
        (self == Self::Again) != correct
    }

    /// FSRS's rating number, 1 (again) to 4 (easy), as stored.
    pub fn rating(self) -> i16 {
        match self {
            Self::Again => 1,
            Self::Hard => 2,
            Self::Good => 3,
            Self::Easy => 4,
        }
    }

    pub fn from_rating(rating: i16) -> Option<Self> {
        match rating {
            1 => Some(Self::Again),
            2 => Some(Self::Hard),
            3 => Some(Self::Good),
            4 => Some(Self::Easy),
            _ => None,
        }
    }
}

/// One recorded answer, as the review log keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Review {
    pub studied_at: DateTime<Utc>,
    pub grade: Grade,
}

/// The state of one (learner, phrase) pair after its answers so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhraseState {
    pub stability: f32,
    pub difficulty: f32,
    pub due_at: DateTime<Utc>,
    pub reviews: i32,
    pub correct: i32,
    /// Answers graded `again` after the first answer.
    pub lapses: i32,
    pub first_reviewed_at: DateTime<Utc>,
    pub last_reviewed_at: DateTime<Utc>,
    pub last_grade: Grade,
}

/// The FSRS computation failed (it only does on non-finite numbers, which valid states never
/// produce).
#[derive(Debug, thiserror::Error)]
#[error("FSRS could not schedule this answer: {0}")]
pub struct ScheduleError(String);

/// The state after `review`, given the state before it (`None` for a phrase never answered).
/// Reviews must come in time order: one older than `state.last_reviewed_at` counts as 0 days.
pub fn apply(state: Option<&PhraseState>, review: Review) -> Result<PhraseState, ScheduleError> {
    let (memory, elapsed) = match state {
        Some(state) => (
            Some(MemoryState {
                stability: state.stability,
                difficulty: state.difficulty,
            }),
            elapsed_days(state.last_reviewed_at, review.studied_at),
        ),
        None => (None, 0),
    };
    let next = SCHEDULER
        .next_states(memory, DESIRED_RETENTION, elapsed)
        .map_err(|error| ScheduleError(error.to_string()))?;
    let next = match review.grade {
        Grade::Again => next.again,
        Grade::Hard => next.hard,
        Grade::Good => next.good,
        Grade::Easy => next.easy,
    };
    let stability = next.memory.stability;
    let correct = review.grade != Grade::Again;
    Ok(PhraseState {
        stability,
        difficulty: next.memory.difficulty,
        due_at: due_at(review.studied_at, stability),
        reviews: state.map_or(0, |s| s.reviews) + 1,
        correct: state.map_or(0, |s| s.correct) + i32::from(correct),
        lapses: state.map_or(0, |s| s.lapses) + i32::from(state.is_some() && !correct),
        first_reviewed_at: state.map_or(review.studied_at, |s| s.first_reviewed_at),
        last_reviewed_at: review.studied_at,
        last_grade: review.grade,
    })
}

/// The state after `reviews` in order, starting from `state`; `None` when there are none at all.
pub fn replay(
    mut state: Option<PhraseState>,
    reviews: impl IntoIterator<Item = Review>,
) -> Result<Option<PhraseState>, ScheduleError> {
    for review in reviews {
        state = Some(apply(state.as_ref(), review)?);
    }
    Ok(state)
}

/// [`replay`], and the state after only the answers before `cut` (`None` when there are none):
/// what a checkpoint at `cut` keeps. `state` must hold only answers before `cut`.
pub fn replay_with_cut(
    mut state: Option<PhraseState>,
    reviews: impl IntoIterator<Item = Review>,
    cut: DateTime<Utc>,
) -> Result<(Option<PhraseState>, Option<PhraseState>), ScheduleError> {
    let mut before_cut = None;
    for review in reviews {
        if review.studied_at >= cut && before_cut.is_none() {
            before_cut = Some(state);
        }
        state = Some(apply(state.as_ref(), review)?);
    }
    Ok((state, before_cut.unwrap_or(state)))
}

/// Whole days from `from` to `to`, rounded down (Python's `timedelta.days`); never negative.
pub fn elapsed_days(from: DateTime<Utc>, to: DateTime<Utc>) -> u32 {
    let seconds = (to - from).num_seconds().max(0);
    u32::try_from(seconds / 86_400).unwrap_or(u32::MAX)
}

/// When a phrase answered at `studied_at` with `stability` falls due: `studied_at` plus the
/// interval, to the whole second below. Timestamps are shown to the second, and the lists are
/// ordered by `due_at`, then phrase id, as a client sees them: a `studied_at` sent to the
/// microsecond must not order two phrases due in the same shown second against their ids. (The
/// reference keeps the microseconds; the contract compares `due_at` to the second.)
pub fn due_at(studied_at: DateTime<Utc>, stability: f32) -> DateTime<Utc> {
    (studied_at + TimeDelta::days(interval_days(stability))).trunc_subsecs(0)
}

/// The interval in whole days for `stability`: the reference's `_next_interval` (in f64 as it
/// computes, from the f32 stability), rounded half to even, clamped to 1..=36,500.
pub fn interval_days(stability: f32) -> i64 {
    let decay = -f64::from(DEFAULT_PARAMETERS[20]);
    let factor = 0.9f64.powf(1.0 / decay) - 1.0;
    let interval =
        f64::from(stability) / factor * (f64::from(DESIRED_RETENTION).powf(1.0 / decay) - 1.0);
    let rounded = interval.round_ties_even();
    // Finite, since stability is: the cast saturates for anything out of range.
    (rounded as i64).clamp(1, MAX_INTERVAL_DAYS)
}

/// The FSRS-6 forgetting curve: the probability of recall `now` of a phrase last answered at
/// `last_reviewed_at` with `stability`, counting whole days as the reference does.
pub fn retrievability(stability: f32, last_reviewed_at: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    let decay = f64::from(DEFAULT_PARAMETERS[20]);
    let factor = 0.9f64.powf(-1.0 / decay) - 1.0;
    let days = f64::from(elapsed_days(last_reviewed_at, now));
    (1.0 + factor * days / f64::from(stability).max(f64::MIN_POSITIVE)).powf(-decay)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Vectors {
        cases: Vec<Case>,
        learners: Vec<LearnerHistory>,
    }

    #[derive(Deserialize)]
    struct LearnerHistory {
        name: String,
        sessions: Vec<HistorySession>,
        states: Vec<FinalState>,
    }

    #[derive(Deserialize)]
    struct HistorySession {
        at: DateTime<Utc>,
        answers: Vec<HistoryAnswer>,
    }

    #[derive(Deserialize)]
    struct HistoryAnswer {
        phrase: String,
        grade: i16,
    }

    #[derive(Deserialize)]
    struct FinalState {
        phrase: String,
        #[serde(flatten)]
        reference: Reference,
        reviews: i32,
        lapses: i32,
    }

    #[derive(Deserialize)]
    struct Case {
        name: String,
        answers: Vec<Answer>,
    }

    #[derive(Deserialize)]
    struct Answer {
        grade: i16,
        at: DateTime<Utc>,
        #[serde(flatten)]
        reference: Reference,
    }

    /// The reference's state after an answer.
    #[derive(Deserialize)]
    struct Reference {
        stability: f64,
        difficulty: f64,
        due: DateTime<Utc>,
        interval_unrounded: f64,
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("timestamp")
    }

    fn relative_error(got: f32, expected: f64) -> f64 {
        (f64::from(got) - expected).abs() / expected.abs().max(f64::MIN_POSITIVE)
    }

    /// The contract's exception: `due_at` may be a day off where the reference's unrounded
    /// interval lies within 0.01 days of a rounding boundary.
    fn near_rounding_boundary(interval: f64) -> bool {
        (interval.fract() - 0.5).abs() < 0.01
    }

    /// Asserts that `got` agrees with the reference as the contract asks: stability and
    /// difficulty within 1e-4 relative, `due_at` to the second (or a day off near a rounding
    /// boundary).
    fn assert_agrees(what: &str, got: &PhraseState, expected: &Reference) {
        // The crate caps stability at 100 years, where the reference goes on; both schedule
        // the maximum interval there.
        let expected_stability = expected.stability.min(MAX_STABILITY_DAYS);
        assert!(
            relative_error(got.stability, expected_stability) <= 1e-4,
            "{what}: stability {} vs {}",
            got.stability,
            expected.stability
        );
        assert!(
            relative_error(got.difficulty, expected.difficulty) <= 1e-4,
            "{what}: difficulty {} vs {}",
            got.difficulty,
            expected.difficulty
        );
        let off = (got.due_at - expected.due).num_seconds().abs();
        let boundary = near_rounding_boundary(expected.interval_unrounded);
        assert!(
            off == 0 || (boundary && off == 86_400),
            "{what}: due {} vs {}",
            got.due_at,
            expected.due
        );
    }

    #[test]
    fn matches_the_python_reference_vectors() {
        let vectors: Vectors =
            serde_json::from_str(include_str!("../../tests/fsrs/vectors.json")).expect("vectors");
        assert!(vectors.cases.len() >= 40);
        let mut answers = 0;
        for case in &vectors.cases {
            let mut state = None;
            for (i, answer) in case.answers.iter().enumerate() {
                let grade = Grade::from_rating(answer.grade).expect("grade");
                let review = Review {
                    studied_at: answer.at,
                    grade,
                };
                let next = apply(state.as_ref(), review).expect("schedules");
                assert_agrees(
                    &format!("{} answer {i}", case.name),
                    &next,
                    &answer.reference,
                );
                state = Some(next);
                answers += 1;
            }
        }
        assert!(answers > 400, "{answers} answers compared");
    }

    /// Whole learner histories: each phrase's answers picked out of sessions in time order
    /// (sessions across UTC midnight count 0 days) end in the reference's state.
    #[test]
    fn learner_histories_match_the_python_reference() {
        let vectors: Vectors =
            serde_json::from_str(include_str!("../../tests/fsrs/vectors.json")).expect("vectors");
        assert!(!vectors.learners.is_empty());
        for history in &vectors.learners {
            let mut sessions: Vec<&HistorySession> = history.sessions.iter().collect();
            sessions.sort_by_key(|session| session.at);
            for expected in &history.states {
                let what = format!("{} {}", history.name, expected.phrase);
                let reviews = sessions.iter().flat_map(|session| {
                    session
                        .answers
                        .iter()
                        .filter(|answer| answer.phrase == expected.phrase)
                        .map(|answer| Review {
                            studied_at: session.at,
                            grade: Grade::from_rating(answer.grade).expect("grade"),
                        })
                });
                let state = replay(None, reviews).expect("schedules").expect("a state");
                assert_agrees(&what, &state, &expected.reference);
                assert_eq!(
                    (state.reviews, state.lapses),
                    (expected.reviews, expected.lapses),
                    "{what}"
                );
            }
        }
    }

    #[test]
    fn first_answers_follow_the_default_parameters() {
        let studied_at = at("2026-11-01T10:00:00Z");
        for (grade, stability, due) in [
            (Grade::Again, 0.212, "2026-11-02T10:00:00Z"),
            (Grade::Hard, 1.2931, "2026-11-02T10:00:00Z"),
            (Grade::Good, 2.3065, "2026-11-03T10:00:00Z"),
            (Grade::Easy, 8.2956, "2026-11-09T10:00:00Z"),
        ] {
            let state = apply(None, Review { studied_at, grade }).expect("schedules");
            assert!((state.stability - stability).abs() < 1e-6, "{grade:?}");
            assert_eq!(state.due_at, at(due), "{grade:?}");
            assert_eq!((state.reviews, state.lapses), (1, 0));
            assert_eq!(state.correct, i32::from(grade != Grade::Again));
        }
    }

    #[test]
    fn counters_count_answers_correct_ones_and_lapses_after_the_first() {
        let day = |n: i64| at("2026-11-01T10:00:00Z") + TimeDelta::days(n);
        let grades = [Grade::Again, Grade::Good, Grade::Again, Grade::Easy];
        let reviews = grades.iter().enumerate().map(|(i, &grade)| Review {
            studied_at: day(i as i64 * 3),
            grade,
        });
        let state = replay(None, reviews).expect("schedules").expect("a state");
        assert_eq!((state.reviews, state.correct, state.lapses), (4, 2, 1));
        assert_eq!(state.first_reviewed_at, day(0));
        assert_eq!(state.last_reviewed_at, day(9));
        assert_eq!(state.last_grade, Grade::Easy);
        assert_eq!(replay(None, []).expect("nothing to do"), None);
    }

    #[test]
    fn a_replay_continued_from_its_state_at_a_cut_ends_where_the_whole_replay_ends() {
        let day = |n: i64| at("2026-11-01T10:00:00Z") + TimeDelta::days(n);
        let grades = [
            Grade::Good,
            Grade::Again,
            Grade::Hard,
            Grade::Easy,
            Grade::Good,
        ];
        let reviews: Vec<Review> = grades
            .iter()
            .enumerate()
            .map(|(i, &grade)| Review {
                studied_at: day(i as i64 * 4),
                grade,
            })
            .collect();
        let whole = replay(None, reviews.clone()).unwrap();
        for cut_day in [-1, 0, 1, 4, 9, 16, 17, 30] {
            let cut = day(cut_day);
            let (end, at_cut) = replay_with_cut(None, reviews.clone(), cut).unwrap();
            assert_eq!(end, whole);
            let before: Vec<Review> = reviews
                .iter()
                .copied()
                .filter(|r| r.studied_at < cut)
                .collect();
            assert_eq!(
                at_cut,
                replay(None, before).unwrap(),
                "cut on day {cut_day}"
            );
            let after = reviews.iter().copied().filter(|r| r.studied_at >= cut);
            assert_eq!(
                replay(at_cut, after).unwrap(),
                whole,
                "cut on day {cut_day}"
            );
        }
    }

    #[test]
    fn elapsed_days_round_down_and_never_go_negative() {
        let from = at("2026-11-01T10:00:00Z");
        assert_eq!(elapsed_days(from, at("2026-11-02T09:59:59Z")), 0);
        assert_eq!(elapsed_days(from, at("2026-11-02T10:00:00Z")), 1);
        assert_eq!(elapsed_days(from, at("2026-11-11T10:00:00Z")), 10);
        assert_eq!(elapsed_days(from, at("2026-10-01T10:00:00Z")), 0);
    }

    #[test]
    fn intervals_round_half_to_even_and_stay_in_range() {
        assert_eq!(interval_days(0.01), 1);
        assert_eq!(interval_days(2.3065), 2);
        assert_eq!(interval_days(2.6), 3);
        assert_eq!(interval_days(1e9), MAX_INTERVAL_DAYS);
    }

    #[test]
    fn due_at_is_to_the_whole_second() {
        let at = at("2026-11-01T10:00:00.999999Z");
        assert_eq!(due_at(at, 2.3065), self::at("2026-11-03T10:00:00Z"));
        let state = apply(
            None,
            Review {
                studied_at: at,
                grade: Grade::Good,
            },
        )
        .expect("schedules");
        assert_eq!(state.due_at, self::at("2026-11-03T10:00:00Z"));
        assert_eq!(state.last_reviewed_at, at);
    }

    #[test]
    fn retrievability_is_the_target_retention_when_due() {
        let last = at("2026-11-01T00:00:00Z");
        assert_eq!(retrievability(10.0, last, last), 1.0);
        let when_due = retrievability(10.0, last, last + TimeDelta::days(10));
        assert!((when_due - 0.9).abs() < 1e-9, "{when_due}");
        let later = retrievability(10.0, last, last + TimeDelta::days(100));
        assert!(later < when_due && later > 0.0);
    }

    #[test]
    fn grades_and_correctness_agree_only_one_way() {
        assert!(Grade::Again.agrees_with(false));
        assert!(!Grade::Again.agrees_with(true));
        for grade in [Grade::Hard, Grade::Good, Grade::Easy] {
            assert!(grade.agrees_with(true) && !grade.agrees_with(false));
            assert_eq!(Grade::from_rating(grade.rating()), Some(grade));
        }
        assert_eq!(Grade::default_for(true), Grade::Good);
        assert_eq!(Grade::default_for(false), Grade::Again);
    }
}
