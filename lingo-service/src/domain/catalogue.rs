//! The curated catalogue as clients see it: languages, phrases with the pipeline's cached
//! statistics, translations, and the pipeline's recommendations of phrases to study.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"code": "es", "name": "Spanish"}))]
pub struct Language {
    pub code: String,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "ph-es-001", "text": "Buenos días", "language_code": "es", "translation_count": 5,
    "stats": {"view_count": 120, "learner_count": 14, "accuracy": 0.82}
}))]
pub struct PhraseItem {
    pub id: String,
    pub text: String,
    pub language_code: String,
    /// Number of translations of this phrase.
    #[schema(minimum = 0)]
    pub translation_count: i64,
    /// From the pipeline's stats cache; null when it has none for this phrase.
    #[schema(required = true)]
    pub stats: Option<PhraseStats>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PhraseStats {
    #[schema(minimum = 0)]
    pub view_count: i64,
    #[schema(minimum = 0)]
    pub learner_count: i64,
    /// Share of correct answers, 0..=1; null when nobody answered yet.
    #[schema(required = true, minimum = 0.0, maximum = 1.0)]
    pub accuracy: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "ph-es-001", "text": "Buenos días", "language_code": "es",
    "translation": [{"language_code": "de", "text": "Guten Morgen"}, {"language_code": "en", "text": "Good morning"}]
}))]
pub struct Phrase {
    pub id: String,
    pub text: String,
    pub language_code: String,
    /// Every translation, ordered by `language_code`.
    pub translation: Vec<Translation>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Translation {
    pub language_code: String,
    pub text: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "phrase": {
        "id": "ph-es-001", "text": "Buenos días", "language_code": "es", "translation_count": 5,
        "stats": {"view_count": 120, "learner_count": 14, "accuracy": 0.82}
    },
    "score": 0.93,
    "generated_at": "2026-11-21T06:00:00Z"
}))]
pub struct Recommendation {
    pub phrase: PhraseItem,
    /// The pipeline's score; higher is better.
    pub score: f64,
    /// When the pipeline computed this recommendation.
    #[serde(serialize_with = "crate::domain::time::serialize")]
    pub generated_at: DateTime<Utc>,
}
