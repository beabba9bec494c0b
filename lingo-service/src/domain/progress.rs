//! A learner's counters per language and over all languages: the numbers of `GET /me/progress`,
//! `GET /me/xp` and the analytics export, with the rules that combine them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// Counters of one language, or of all languages together (`totals`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct Counters {
    #[schema(minimum = 0)]
    pub sessions: i64,
    #[schema(minimum = 0)]
    pub total_duration_seconds: i64,
    #[schema(minimum = 0)]
    pub phrases_seen: i64,
    #[schema(minimum = 0)]
    pub phrases_correct: i64,
    /// `phrases_correct / phrases_seen`; null when nothing was seen.
    #[schema(required = true, minimum = 0.0, maximum = 1.0)]
    pub accuracy: Option<f64>,
    #[schema(minimum = 0)]
    pub xp: i64,
    /// Distinct phrases answered (in the `answers` of study sessions).
    #[schema(minimum = 0)]
    pub phrases_started: i64,
    /// Phrases answered before that are due for review at the time of the request.
    #[schema(minimum = 0)]
    pub phrases_due: i64,
    /// First session (null when there is none).
    #[schema(required = true)]
    #[serde(serialize_with = "crate::domain::time::option::serialize")]
    pub first_studied_at: Option<DateTime<Utc>>,
    /// Latest session (null when there is none).
    #[schema(required = true)]
    #[serde(serialize_with = "crate::domain::time::option::serialize")]
    pub last_studied_at: Option<DateTime<Utc>>,
}

pub fn accuracy(phrases_seen: i64, phrases_correct: i64) -> Option<f64> {
    (phrases_seen > 0).then(|| phrases_correct as f64 / phrases_seen as f64)
}

impl Counters {
    /// Adds `other` in: sums, the accuracy of the sums, the earliest first and latest last day.
    pub fn add(&mut self, other: &Counters) {
        self.sessions += other.sessions;
        self.total_duration_seconds += other.total_duration_seconds;
        self.phrases_seen += other.phrases_seen;
        self.phrases_correct += other.phrases_correct;
        self.xp += other.xp;
        self.phrases_started += other.phrases_started;
        self.phrases_due += other.phrases_due;
        self.accuracy = accuracy(self.phrases_seen, self.phrases_correct);
        self.first_studied_at = match (self.first_studied_at, other.first_studied_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_studied_at = self.last_studied_at.max(other.last_studied_at);
    }
}

/// The caller's counters in one language.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LanguageProgress {
    pub language_code: String,
    #[serde(flatten)]
    pub counters: Counters,
}

/// One learner's counters in one language.
#[derive(Debug, Serialize, ToSchema)]
pub struct LearnerProgress {
    pub learner_id: String,
    #[serde(flatten)]
    pub progress: LanguageProgress,
    /// Last change of these counters.
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LanguageXp {
    pub language_code: String,
    #[schema(minimum = 0)]
    pub xp: i64,
    #[schema(minimum = 1, maximum = 25)]
    pub level: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> Option<DateTime<Utc>> {
        Some(text.parse().expect("timestamp"))
    }

    #[test]
    fn nothing_seen_has_no_accuracy() {
        assert_eq!(accuracy(0, 0), None);
        assert_eq!(accuracy(4, 3), Some(0.75));
    }

    #[test]
    fn totals_sum_counters_and_span_both_ranges() {
        let mut totals = Counters::default();
        let spanish = Counters {
            sessions: 2,
            total_duration_seconds: 600,
            phrases_seen: 10,
            phrases_correct: 5,
            accuracy: accuracy(10, 5),
            xp: 30,
            phrases_started: 7,
            phrases_due: 2,
            first_studied_at: day("2026-11-02T00:00:00Z"),
            last_studied_at: day("2026-11-05T00:00:00Z"),
        };
        let german = Counters {
            sessions: 1,
            total_duration_seconds: 60,
            phrases_seen: 10,
            phrases_correct: 10,
            accuracy: accuracy(10, 10),
            xp: 25,
            phrases_started: 3,
            phrases_due: 0,
            first_studied_at: day("2026-11-01T00:00:00Z"),
            last_studied_at: day("2026-11-03T00:00:00Z"),
        };
        totals.add(&spanish);
        totals.add(&german);
        assert_eq!(
            totals,
            Counters {
                sessions: 3,
                total_duration_seconds: 660,
                phrases_seen: 20,
                phrases_correct: 15,
                accuracy: Some(0.75),
                xp: 55,
                phrases_started: 10,
                phrases_due: 2,
                first_studied_at: day("2026-11-01T00:00:00Z"),
                last_studied_at: day("2026-11-05T00:00:00Z"),
            }
        );
    }
}
