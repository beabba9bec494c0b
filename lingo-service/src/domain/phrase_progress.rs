//! What a learner knows of each phrase (docs/lingo.md, "Phrase progress"): the
//! `PhraseProgress` resource, the analytics export's row, and the keyset cursors of their lists.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared_auth::http::cursor;
use utoipa::ToSchema;

use crate::domain::catalogue::PhraseItem;
use crate::domain::cursor::{DifferentFilter, continued_since, since_storable};
use crate::domain::fsrs::{Grade, PhraseState, retrievability};
use crate::domain::text::is_storable;

/// The caller's progress on one phrase.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "phrase": {
        "id": "ph-es-001", "text": "Buenos días", "language_code": "es", "translation_count": 5,
        "stats": {"view_count": 120, "learner_count": 14, "accuracy": 0.82}
    },
    "reviews": 4, "correct": 3, "lapses": 1,
    "first_reviewed_at": "2026-11-02T18:05:00Z", "last_reviewed_at": "2026-11-20T18:05:00Z",
    "last_grade": "good", "stability_days": 11.43, "difficulty": 6.21,
    "due_at": "2026-12-01T18:05:00Z", "retrievability": 0.93
}))]
pub struct PhraseProgress {
    pub phrase: PhraseItem,
    /// Answers given to this phrase.
    #[schema(minimum = 1)]
    pub reviews: i32,
    /// Correct answers.
    #[schema(minimum = 0)]
    pub correct: i32,
    /// Answers graded `again` after the first answer.
    #[schema(minimum = 0)]
    pub lapses: i32,
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub first_reviewed_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub last_reviewed_at: DateTime<Utc>,
    /// Grade of the latest answer.
    pub last_grade: Grade,
    /// FSRS stability: days until the probability of recall falls to 90 %.
    #[schema(minimum = 0.0)]
    pub stability_days: f64,
    /// FSRS difficulty, 1 (easiest) to 10.
    #[schema(minimum = 1.0, maximum = 10.0)]
    pub difficulty: f64,
    /// When the phrase is due for review: `last_reviewed_at` plus the FSRS interval (whole days).
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub due_at: DateTime<Utc>,
    /// Predicted probability (0..1) that the caller recalls the phrase at the time of the request
    /// (the FSRS-6 forgetting curve over the whole days since `last_reviewed_at`).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub retrievability: f64,
}

impl PhraseProgress {
    /// The resource for `phrase` in `state`, as seen at `now`.
    pub fn new(phrase: PhraseItem, state: &PhraseState, now: DateTime<Utc>) -> Self {
        Self {
            phrase,
            reviews: state.reviews,
            correct: state.correct,
            lapses: state.lapses,
            first_reviewed_at: state.first_reviewed_at,
            last_reviewed_at: state.last_reviewed_at,
            last_grade: state.last_grade,
            stability_days: f64::from(state.stability),
            difficulty: f64::from(state.difficulty),
            due_at: state.due_at,
            retrievability: retrievability(state.stability, state.last_reviewed_at, now),
        }
    }
}

/// One (learner, phrase) state for analytics tools.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "learner_id": "demo-learner", "phrase_id": "ph-es-001", "language_code": "es",
    "reviews": 4, "correct": 3, "lapses": 1, "last_reviewed_at": "2026-11-20T18:05:00Z",
    "last_grade": "good", "stability_days": 11.43, "difficulty": 6.21,
    "due_at": "2026-12-01T18:05:00Z", "updated_at": "2026-11-21T09:30:00Z"
}))]
pub struct PhraseProgressRow {
    pub learner_id: String,
    pub phrase_id: String,
    pub language_code: String,
    #[schema(minimum = 1)]
    pub reviews: i32,
    #[schema(minimum = 0)]
    pub correct: i32,
    #[schema(minimum = 0)]
    pub lapses: i32,
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub last_reviewed_at: DateTime<Utc>,
    pub last_grade: Grade,
    #[schema(minimum = 0.0)]
    pub stability_days: f64,
    #[schema(minimum = 1.0, maximum = 10.0)]
    pub difficulty: f64,
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub due_at: DateTime<Utc>,
    /// Last change of this state (a new answer, or a late session replayed into it).
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub updated_at: DateTime<Utc>,
}

/// Which list a cursor belongs to: a cursor of one list is refused by the other.
const MY_PHRASES: &str = "me-phrases";
const EXPORT: &str = "phrase-progress";

/// Position after the last row of a `GET /me/phrases` page, in its order `(due_at, phrase_id)`,
/// with the filters of its list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MyPhrasesCursor {
    #[serde(rename = "t")]
    list: String,
    /// `due_at` in microseconds since the epoch.
    #[serde(rename = "d")]
    due_at_micros: i64,
    #[serde(rename = "p")]
    pub phrase_id: String,
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(rename = "due", default)]
    pub due_only: bool,
}

/// The filters of a list page: what the request asked for, merged with its cursor's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MyPhrasesFilter {
    pub language: Option<String>,
    pub due_only: bool,
}

impl MyPhrasesCursor {
    pub fn after(due_at: DateTime<Utc>, phrase_id: &str, filter: &MyPhrasesFilter) -> Self {
        Self {
            list: MY_PHRASES.to_owned(),
            due_at_micros: due_at.timestamp_micros(),
            phrase_id: phrase_id.to_owned(),
            language: filter.language.clone(),
            due_only: filter.due_only,
        }
    }

    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    /// `None` for anything [`MyPhrasesCursor::encode`] cannot have written.
    pub fn decode(text: &str) -> Option<Self> {
        let cursor: Self = cursor::decode(text)?;
        let valid = cursor.list == MY_PHRASES
            && is_storable(&cursor.phrase_id)
            && cursor.language.as_deref().is_none_or(is_storable)
            && cursor.due_at().is_some();
        valid.then_some(cursor)
    }

    pub fn due_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.due_at_micros)
    }

    /// The filters of the list this cursor continues, given a request's: a filter the request
    /// leaves out keeps the cursor's; one it gives must be the cursor's.
    pub fn filter(
        &self,
        language: Option<&str>,
        due: Option<bool>,
    ) -> Result<MyPhrasesFilter, DifferentFilter> {
        if language.is_some_and(|asked| Some(asked) != self.language.as_deref())
            || due.is_some_and(|asked| asked != self.due_only)
        {
            return Err(DifferentFilter);
        }
        Ok(MyPhrasesFilter {
            language: self.language.clone(),
            due_only: self.due_only,
        })
    }
}

/// Position after the last row of an analytics export page, in its order
/// `(updated_at, learner_id, phrase_id)`, with the `updated_since` of its list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportCursor {
    #[serde(rename = "t")]
    list: String,
    #[serde(rename = "u")]
    updated_at_micros: i64,
    #[serde(rename = "l")]
    pub learner_id: String,
    #[serde(rename = "p")]
    pub phrase_id: String,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    since_micros: Option<i64>,
}

impl ExportCursor {
    pub fn after(
        updated_at: DateTime<Utc>,
        learner_id: &str,
        phrase_id: &str,
        since: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            list: EXPORT.to_owned(),
            updated_at_micros: updated_at.timestamp_micros(),
            learner_id: learner_id.to_owned(),
            phrase_id: phrase_id.to_owned(),
            since_micros: since.map(|since| since.timestamp_micros()),
        }
    }

    pub fn encode(&self) -> String {
        cursor::encode(self)
    }

    pub fn decode(text: &str) -> Option<Self> {
        let cursor: Self = cursor::decode(text)?;
        let valid = cursor.list == EXPORT
            && is_storable(&cursor.learner_id)
            && is_storable(&cursor.phrase_id)
            && cursor.updated_at().is_some()
            && since_storable(cursor.since_micros);
        valid.then_some(cursor)
    }

    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        cursor::timestamp(self.updated_at_micros)
    }

    /// The `updated_since` of the list this cursor continues, given a request's own (see
    /// [`MyPhrasesCursor::filter`]).
    pub fn since(
        &self,
        asked: Option<DateTime<Utc>>,
    ) -> Result<Option<DateTime<Utc>>, DifferentFilter> {
        continued_since(self.since_micros, asked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("timestamp")
    }

    #[test]
    fn my_phrases_cursor_round_trips_and_keeps_its_filters() {
        let filter = MyPhrasesFilter {
            language: Some("es".into()),
            due_only: true,
        };
        let cursor =
            MyPhrasesCursor::after(at("2026-11-20T10:00:00.123456Z"), "ph-es-001", &filter);
        let decoded = MyPhrasesCursor::decode(&cursor.encode()).expect("decodes");
        assert_eq!(decoded, cursor);
        assert_eq!(decoded.due_at(), Some(at("2026-11-20T10:00:00.123456Z")));
        assert_eq!(decoded.filter(None, None), Ok(filter.clone()));
        assert_eq!(decoded.filter(Some("es"), Some(true)), Ok(filter));
        assert_eq!(decoded.filter(Some("fr"), None), Err(DifferentFilter));
        assert_eq!(decoded.filter(None, Some(false)), Err(DifferentFilter));
    }

    #[test]
    fn cursors_of_one_list_do_not_decode_as_the_other() {
        let export = ExportCursor::after(at("2026-11-20T10:00:00Z"), "learner", "ph-es-001", None);
        let mine =
            MyPhrasesCursor::after(at("2026-11-20T10:00:00Z"), "ph-es-001", &Default::default());
        assert_eq!(MyPhrasesCursor::decode(&export.encode()), None);
        assert_eq!(ExportCursor::decode(&mine.encode()), None);
        assert_eq!(
            ExportCursor::decode(&export.encode()).as_ref(),
            Some(&export)
        );
        for text in ["", "!!", "e30", "eyJ0IjoibWUtcGhyYXNlcyJ9"] {
            assert_eq!(MyPhrasesCursor::decode(text), None, "{text}");
            assert_eq!(ExportCursor::decode(text), None, "{text}");
        }
    }

    #[test]
    fn export_cursor_keeps_its_updated_since() {
        let since = at("2026-11-01T00:00:00Z");
        let cursor = ExportCursor::after(at("2026-11-20T10:00:00Z"), "l", "p", Some(since));
        assert_eq!(cursor.since(None), Ok(Some(since)));
        assert_eq!(cursor.since(Some(since)), Ok(Some(since)));
        assert_eq!(
            cursor.since(Some(at("2026-11-02T00:00:00Z"))),
            Err(DifferentFilter)
        );
    }
}
