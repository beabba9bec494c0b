//! A study session: what a learner posts (with its range rules) and what the service records and
//! answers.

use chrono::{DateTime, SubsecRound, TimeDelta, Timelike, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{FieldError, FieldRules, Problem};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::fsrs::Grade;
use crate::domain::level::level_for_xp;
use crate::error::ErrorCode;

pub const MAX_DURATION_SECONDS: i64 = 86_400;
pub const MAX_PHRASES_SEEN: i64 = 10_000;
pub const MAX_ANSWERS: usize = 1_000;
/// How far in the past `studied_at` may lie (an app that studied offline sends it later).
pub const MAX_STUDIED_AT_AGE: TimeDelta = TimeDelta::days(30);
/// How far in the future `studied_at` may lie (clocks of phones drift).
pub const MAX_STUDIED_AT_AHEAD: TimeDelta = TimeDelta::seconds(60);

/// A finished study session of the caller.
// Wide integer types so that out-of-range numbers reach [`validate`] and get a precise message
// instead of a type error.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "duration_seconds": 300, "phrases_seen": 3, "phrases_correct": 2, "language_code": "es",
    "studied_at": "2026-11-20T18:05:00Z",
    "answers": [
        {"phrase_id": "ph-es-001", "correct": true},
        {"phrase_id": "ph-es-002", "correct": false},
        {"phrase_id": "ph-es-001", "correct": true, "grade": "easy"}
    ]
}))]
pub struct StudySessionInput {
    /// Length of the session in seconds.
    #[schema(minimum = 1, maximum = 86400)]
    pub duration_seconds: i64,
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_seen: i64,
    /// At most `phrases_seen` (422 `validation_failed` otherwise).
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_correct: i64,
    /// A `code` of `GET /v1/lingo/languages` (422 `unknown_language` otherwise).
    #[schema(example = "es")]
    pub language_code: String,
    /// Optional: the answers of the session in the order they were given (at most 1,000; a
    /// phrase may appear more than once). With them, `phrases_seen` must equal their number and
    /// `phrases_correct` the number of correct ones (422 `answers_mismatch`), and each `phrase_id`
    /// must be a phrase of `language_code` (422 `unknown_phrase`, `errors[].field` like
    /// `answers[3].phrase_id`). Each answer updates the phrase's FSRS memory state. `null` is
    /// the same as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 1000)]
    pub answers: Option<Vec<AnswerInput>>,
    /// Optional: when the session happened (RFC 3339), default the time the request arrives. At
    /// most 30 days in the past and 60 s in the future (422 `invalid_studied_at`); a session
    /// older than answers already recorded is put in its place in time. `null` is the same as
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime, example = "2026-11-20T18:05:00Z")]
    pub studied_at: Option<String>,
}

/// One answer of a study session.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerInput {
    /// A phrase of the session's `language_code`.
    #[schema(example = "ph-es-001")]
    pub phrase_id: String,
    pub correct: bool,
    /// Optional FSRS grade; without it `good` when `correct`, else `again`. `again` with
    /// `correct: true`, or another grade with `correct: false`, is 422 `validation_failed`.
    /// `null` is the same as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<Grade>,
}

impl AnswerInput {
    pub fn grade(&self) -> Grade {
        self.grade.unwrap_or(Grade::default_for(self.correct))
    }
}

/// The range rules of the contract, every bad field reported at once.
pub fn validate(input: &StudySessionInput) -> std::result::Result<(), Problem> {
    let errors = input.broken_rules(&|_| false);
    if !errors.is_empty() {
        return Err(Problem::validation(errors));
    }
    answers_match_counts(input)
}

impl FieldRules for StudySessionInput {
    fn broken_rules(&self, stand_in: &dyn Fn(&str) -> bool) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if !stand_in("duration_seconds")
            && !(1..=MAX_DURATION_SECONDS).contains(&self.duration_seconds)
        {
            errors.push(FieldError::new(
                "duration_seconds",
                format!("must be between 1 and {MAX_DURATION_SECONDS}"),
            ));
        }
        if !stand_in("phrases_seen") && !(0..=MAX_PHRASES_SEEN).contains(&self.phrases_seen) {
            errors.push(FieldError::new(
                "phrases_seen",
                format!("must be between 0 and {MAX_PHRASES_SEEN}"),
            ));
        }
        if !stand_in("phrases_correct") && self.phrases_correct < 0 {
            errors.push(FieldError::new("phrases_correct", "must be >= 0"));
        } else if !stand_in("phrases_correct")
            && !stand_in("phrases_seen")
            && self.phrases_correct > self.phrases_seen
        {
            errors.push(FieldError::new(
                "phrases_correct",
                "must be <= phrases_seen",
            ));
        }
        let answers = self.answers.as_deref().unwrap_or_default();
        if !stand_in("answers") && answers.len() > MAX_ANSWERS {
            errors.push(FieldError::new(
                "answers",
                format!("must hold at most {MAX_ANSWERS} answers"),
            ));
        }
        for (i, answer) in answers.iter().enumerate() {
            if answer
                .grade
                .is_none_or(|grade| grade.agrees_with(answer.correct))
            {
                continue;
            }
            let grade_field = format!("answers[{i}].grade");
            if !stand_in(&grade_field) && !stand_in(&format!("answers[{i}].correct")) {
                errors.push(FieldError::new(
                    grade_field,
                    "must be `again` exactly when `correct` is false",
                ));
            }
        }
        errors
    }
}

/// With `answers`, the counts must be theirs (422 `answers_mismatch`, naming each count that is
/// not).
fn answers_match_counts(input: &StudySessionInput) -> std::result::Result<(), Problem> {
    let Some(answers) = &input.answers else {
        return Ok(());
    };
    let correct = answers.iter().filter(|a| a.correct).count();
    let mut errors = Vec::new();
    if input.phrases_seen != answers.len() as i64 {
        errors.push(FieldError::new(
            "phrases_seen",
            format!("must equal the number of answers ({})", answers.len()),
        ));
    }
    if input.phrases_correct != correct as i64 {
        errors.push(FieldError::new(
            "phrases_correct",
            format!("must equal the number of correct answers ({correct})"),
        ));
    }
    if errors.is_empty() {
        return Ok(());
    }
    let mut problem = Problem::from(ErrorCode::AnswersMismatch);
    problem.errors = errors;
    Err(problem)
}

/// The session's `studied_at` (to the microsecond, as stored): the one sent, when it lies
/// within 30 days before `now` and 60 s after it, else `now` (422 `invalid_studied_at`).
pub fn studied_at(
    sent: Option<&str>,
    now: DateTime<Utc>,
) -> std::result::Result<DateTime<Utc>, Problem> {
    let Some(text) = sent else {
        return Ok(now.trunc_subsecs(6));
    };
    let at = DateTime::parse_from_rfc3339(text)
        .map(|at| without_leap_second(at.with_timezone(&Utc)).trunc_subsecs(6))
        .map_err(|_| {
            Problem::from(ErrorCode::InvalidStudiedAt)
                .with_field("studied_at", "must be an RFC 3339 timestamp")
        })?;
    if at < now - MAX_STUDIED_AT_AGE || at > now + MAX_STUDIED_AT_AHEAD {
        return Err(ErrorCode::InvalidStudiedAt.into());
    }
    Ok(at)
}

/// `at`, or for a leap second (`23:59:60Z`, which chrono keeps as more than 10⁹ nanoseconds of
/// the second before) the last microsecond of that second before: stored as it is, a leap
/// second would land on the next second, and at the end of a day on the next UTC day, whose
/// streak would then count it.
fn without_leap_second(at: DateTime<Utc>) -> DateTime<Utc> {
    if at.timestamp_subsec_nanos() < 1_000_000_000 {
        return at;
    }
    at.with_nanosecond(999_999_000).unwrap_or(at)
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "language_code": "es",
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "xp_awarded": 20,
    "created_at": "2026-11-21T09:30:00Z", "studied_at": "2026-11-21T09:20:00Z", "answer_count": 12
}))]
pub struct StudySession {
    /// UUIDv7 made by the service.
    pub id: Uuid,
    pub language_code: String,
    #[schema(minimum = 1, maximum = 86400)]
    pub duration_seconds: i32,
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_seen: i32,
    #[schema(minimum = 0, maximum = 10000)]
    pub phrases_correct: i32,
    /// 0 when nothing was seen, else `10 + phrases_correct` (+5 for a perfect session of 5 or more).
    #[schema(minimum = 0)]
    pub xp_awarded: i32,
    /// When the session was recorded by the service.
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub created_at: DateTime<Utc>,
    /// When the session happened: the `studied_at` sent, else `created_at`. Streaks and
    /// `first_studied_at` / `last_studied_at` count the session on this UTC day.
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub studied_at: DateTime<Utc>,
    /// Number of `answers` the session carried (0 without them).
    #[schema(minimum = 0, maximum = 1000)]
    pub answer_count: i32,
}

/// The new session with the learner's totals after it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "language_code": "es",
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "xp_awarded": 20,
    "created_at": "2026-11-21T09:30:00Z", "studied_at": "2026-11-21T09:20:00Z", "answer_count": 12,
    "total_xp": 71, "level": 2, "leveled_up": true
}))]
pub struct StudySessionCreated {
    #[serde(flatten)]
    pub session: StudySession,
    /// The learner's XP over all languages, this session included.
    #[schema(minimum = 0)]
    pub total_xp: i64,
    #[schema(minimum = 1, maximum = 25)]
    pub level: i64,
    /// Whether this session raised the learner's level.
    pub leveled_up: bool,
}

impl StudySessionCreated {
    /// The answer to a recorded `session`, given the learner's total XP with it included.
    pub fn new(session: StudySession, total_xp: i64) -> Self {
        let level = level_for_xp(total_xp);
        let before = level_for_xp(total_xp - i64::from(session.xp_awarded));
        Self {
            session,
            total_xp,
            level,
            leveled_up: level > before,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(duration: i64, seen: i64, correct: i64) -> StudySessionInput {
        StudySessionInput {
            duration_seconds: duration,
            phrases_seen: seen,
            phrases_correct: correct,
            language_code: "es".into(),
            answers: None,
            studied_at: None,
        }
    }

    fn answer(correct: bool, grade: Option<Grade>) -> AnswerInput {
        AnswerInput {
            phrase_id: "ph-es-001".into(),
            correct,
            grade,
        }
    }

    fn fields(problem: &Problem) -> Vec<&str> {
        problem.errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn grades_must_agree_with_correct() {
        let mut session = input(60, 4, 2);
        session.answers = Some(vec![
            answer(true, Some(Grade::Easy)),
            answer(true, Some(Grade::Again)),
            answer(false, Some(Grade::Hard)),
            answer(false, None),
        ]);
        let problem = validate(&session).expect_err("two bad grades");
        assert_eq!(problem.code, "validation_failed");
        assert_eq!(fields(&problem), ["answers[1].grade", "answers[2].grade"]);
    }

    #[test]
    fn counts_must_be_the_answers_own() {
        let mut session = input(60, 2, 1);
        session.answers = Some(vec![answer(true, None), answer(false, None)]);
        assert!(validate(&session).is_ok());
        session.phrases_seen = 3;
        let problem = validate(&session).expect_err("seen differs");
        assert_eq!(problem.code, "answers_mismatch");
        assert_eq!(fields(&problem), ["phrases_seen"]);
        session.phrases_correct = 0;
        let problem = validate(&session).expect_err("both differ");
        assert_eq!(fields(&problem), ["phrases_seen", "phrases_correct"]);
        session.answers = Some(Vec::new());
        let problem = validate(&session).expect_err("no answers, counts not zero");
        assert_eq!(problem.code, "answers_mismatch");
    }

    #[test]
    fn at_most_a_thousand_answers() {
        let mut session = input(60, 1001, 1001);
        session.answers = Some((0..1001).map(|_| answer(true, None)).collect());
        let problem = validate(&session).expect_err("too many");
        assert_eq!(fields(&problem), ["answers"]);
    }

    /// A leap second stays in its own second, so on its UTC day (the streaks count that day).
    #[test]
    fn a_leap_second_stays_on_its_day() {
        let now: DateTime<Utc> = "2026-11-28T06:00:00Z".parse().expect("time");
        for sent in [
            "2026-11-27T23:59:60Z",
            "2026-11-27T23:59:60.5Z",
            "2026-11-28T01:59:60+02:00",
        ] {
            let at = studied_at(Some(sent), now).expect("a leap second is a time");
            assert_eq!(
                at.to_rfc3339(),
                "2026-11-27T23:59:59.999999+00:00",
                "{sent}"
            );
            assert_eq!(at.timestamp_subsec_nanos(), 999_999_000, "{sent}");
        }
    }

    #[test]
    fn studied_at_window() {
        let precise: DateTime<Utc> = "2026-11-27T12:00:00.1234567Z".parse().expect("time");
        let stored = studied_at(None, precise).expect("now is fine");
        assert_eq!(stored.timestamp_subsec_nanos(), 123_456_000);
        let now: DateTime<Utc> = "2026-11-27T12:00:00Z".parse().expect("time");
        for (sent, ok) in [
            ("2026-10-28T12:00:00Z", true),
            ("2026-10-28T11:59:59Z", false),
            ("2026-11-27T12:01:00Z", true),
            ("2026-11-27T12:01:01Z", false),
            ("2026-11-27T13:00:00+01:00", true),
            ("2026-11-27T11:59:60Z", true),
            ("2026-11-27", false),
            ("yesterday", false),
        ] {
            match studied_at(Some(sent), now) {
                Ok(at) => assert!(ok, "{sent} accepted as {at}"),
                Err(problem) => {
                    assert!(!ok, "{sent} refused");
                    assert_eq!(problem.code, "invalid_studied_at");
                    assert_eq!(fields(&problem), ["studied_at"]);
                }
            }
        }
    }

    #[test]
    fn validation_table() {
        // (duration, seen, correct, fields in error)
        let cases: &[(i64, i64, i64, &[&str])] = &[
            (1, 0, 0, &[]),
            (86_400, 10_000, 10_000, &[]),
            (0, 0, 0, &["duration_seconds"]),
            (86_401, 0, 0, &["duration_seconds"]),
            (-1, 0, 0, &["duration_seconds"]),
            (60, -1, 0, &["phrases_seen", "phrases_correct"]),
            (60, 10_001, 0, &["phrases_seen"]),
            (60, 5, 6, &["phrases_correct"]),
            (60, 5, -1, &["phrases_correct"]),
            (
                0,
                10_001,
                10_002,
                &["duration_seconds", "phrases_seen", "phrases_correct"],
            ),
        ];
        for (duration, seen, correct, fields) in cases {
            let got: Vec<String> = match validate(&input(*duration, *seen, *correct)) {
                Ok(()) => vec![],
                Err(problem) => {
                    assert_eq!(problem.code, "validation_failed");
                    problem.errors.into_iter().map(|e| e.field).collect()
                }
            };
            assert_eq!(got, *fields, "input {duration}/{seen}/{correct}");
        }
    }
}
