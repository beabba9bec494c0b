//! A study session: what a learner posts (with its range rules) and what the service records and
//! answers.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::{FieldError, Problem};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::level::level_for_xp;

pub const MAX_DURATION_SECONDS: i64 = 86_400;
pub const MAX_PHRASES_SEEN: i64 = 10_000;

/// A finished study session of the caller.
// Wide integer types so that out-of-range numbers reach [`validate`] and get a precise message
// instead of a type error.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "language_code": "es"
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
}

/// The range rules of the contract, every bad field reported at once.
pub fn validate(input: &StudySessionInput) -> std::result::Result<(), Problem> {
    let mut errors = Vec::new();
    if !(1..=MAX_DURATION_SECONDS).contains(&input.duration_seconds) {
        errors.push(FieldError::new(
            "duration_seconds",
            format!("must be between 1 and {MAX_DURATION_SECONDS}"),
        ));
    }
    if !(0..=MAX_PHRASES_SEEN).contains(&input.phrases_seen) {
        errors.push(FieldError::new(
            "phrases_seen",
            format!("must be between 0 and {MAX_PHRASES_SEEN}"),
        ));
    }
    if input.phrases_correct < 0 {
        errors.push(FieldError::new("phrases_correct", "must be >= 0"));
    } else if input.phrases_correct > input.phrases_seen {
        errors.push(FieldError::new(
            "phrases_correct",
            "must be <= phrases_seen",
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Problem::validation(errors))
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "language_code": "es",
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "xp_awarded": 20,
    "created_at": "2026-11-21T09:30:00Z"
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
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub created_at: DateTime<Utc>,
}

/// The new session with the learner's totals after it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "language_code": "es",
    "duration_seconds": 600, "phrases_seen": 12, "phrases_correct": 10, "xp_awarded": 20,
    "created_at": "2026-11-21T09:30:00Z", "total_xp": 71, "level": 2, "leveled_up": true
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
