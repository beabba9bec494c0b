//! A phrase's memory state as `phrase_states` and `phrase_checkpoints` store it: the row read
//! ([`StateRow`]) and the columns written, one array each ([`StateColumns`]).

use chrono::{DateTime, Utc};
use sqlx::FromRow;

use crate::domain::fsrs::{self, Grade, PhraseState};
use crate::error::{Error, Result};

/// One stored state row.
#[derive(FromRow)]
pub(super) struct StateRow {
    pub(super) phrase_id: String,
    pub(super) stability: f32,
    pub(super) difficulty: f32,
    pub(super) due_at: DateTime<Utc>,
    pub(super) reviews: i32,
    pub(super) correct: i32,
    pub(super) lapses: i32,
    pub(super) first_reviewed_at: DateTime<Utc>,
    pub(super) last_reviewed_at: DateTime<Utc>,
    pub(super) last_grade: i16,
    /// The cut of the phrase's newest checkpoint (`phrase_states.checkpoint_at`), or of this
    /// checkpoint (`phrase_checkpoints.cut`); the pages' reads leave it out.
    #[sqlx(default)]
    pub(super) checkpoint_at: Option<DateTime<Utc>>,
}

impl StateRow {
    pub(super) fn state(&self) -> Result<PhraseState> {
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

pub(super) fn schedule_error(error: fsrs::ScheduleError) -> Error {
    Error::Internal(anyhow::Error::new(error))
}

/// The columns of phrase states (one array each, for `UNNEST`).
#[derive(Default)]
pub(super) struct StateColumns {
    pub(super) ids: Vec<String>,
    pub(super) stability: Vec<f32>,
    pub(super) difficulty: Vec<f32>,
    pub(super) due_at: Vec<DateTime<Utc>>,
    pub(super) reviews: Vec<i32>,
    pub(super) correct: Vec<i32>,
    pub(super) lapses: Vec<i32>,
    pub(super) first: Vec<DateTime<Utc>>,
    pub(super) last: Vec<DateTime<Utc>>,
    pub(super) grade: Vec<i16>,
    pub(super) checkpoint_at: Vec<Option<DateTime<Utc>>>,
}

impl StateColumns {
    pub(super) fn push(
        &mut self,
        phrase_id: &str,
        state: &PhraseState,
        checkpoint_at: Option<DateTime<Utc>>,
    ) {
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
