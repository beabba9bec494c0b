//! `GET /v1/lingo/me/progress` and `GET /v1/lingo/me/xp`: the caller's totals, read from the
//! per-language totals the study-session writes maintain.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use shared_auth::RequiredCaller;
use sqlx::{FromRow, PgPool};

use crate::domain::level::{MAX_LEVEL, level_for_xp, level_progress};
use crate::domain::streak::streaks;
use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/progress", get(progress))
        .route("/me/xp", get(xp))
}

/// Counters of one language, or of all languages together (`totals`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    pub sessions: i64,
    pub total_duration_seconds: i64,
    pub phrases_seen: i64,
    pub phrases_correct: i64,
    /// `phrases_correct / phrases_seen`; null when nothing was seen.
    pub accuracy: Option<f64>,
    pub xp: i64,
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub first_studied_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub last_studied_at: Option<DateTime<Utc>>,
}

pub fn accuracy(phrases_seen: i64, phrases_correct: i64) -> Option<f64> {
    (phrases_seen > 0).then(|| phrases_correct as f64 / phrases_seen as f64)
}

impl Counters {
    fn add(&mut self, other: &Counters) {
        self.sessions += other.sessions;
        self.total_duration_seconds += other.total_duration_seconds;
        self.phrases_seen += other.phrases_seen;
        self.phrases_correct += other.phrases_correct;
        self.xp += other.xp;
        self.accuracy = accuracy(self.phrases_seen, self.phrases_correct);
        self.first_studied_at = match (self.first_studied_at, other.first_studied_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_studied_at = self.last_studied_at.max(other.last_studied_at);
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LanguageProgress {
    pub language_code: String,
    #[serde(flatten)]
    pub counters: Counters,
}

/// One row of `learner_language_totals`.
#[derive(Debug, Clone, FromRow)]
pub struct TotalsRow {
    pub learner_id: String,
    pub language_code: String,
    pub sessions: i64,
    pub total_duration_seconds: i64,
    pub phrases_seen: i64,
    pub phrases_correct: i64,
    pub xp: i64,
    pub first_studied_at: DateTime<Utc>,
    pub last_studied_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

pub const TOTALS_COLUMNS: &str = "learner_id, language_code, sessions, total_duration_seconds, \
     phrases_seen, phrases_correct, xp, first_studied_at, last_studied_at, updated_at";

impl From<TotalsRow> for LanguageProgress {
    fn from(row: TotalsRow) -> Self {
        Self {
            language_code: row.language_code,
            counters: Counters {
                sessions: row.sessions,
                total_duration_seconds: row.total_duration_seconds,
                phrases_seen: row.phrases_seen,
                phrases_correct: row.phrases_correct,
                accuracy: accuracy(row.phrases_seen, row.phrases_correct),
                xp: row.xp,
                first_studied_at: Some(row.first_studied_at),
                last_studied_at: Some(row.last_studied_at),
            },
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Progress {
    pub learner_id: String,
    pub data: Vec<LanguageProgress>,
    pub count: usize,
    pub totals: Counters,
    pub current_streak_days: i64,
    pub longest_streak_days: i64,
}

async fn progress(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<PgPool>,
) -> Result<Json<Progress>> {
    // One snapshot for the totals and the study days, so they agree under concurrent writes.
    let mut tx = db.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query_as::<_, TotalsRow>(&format!(
        "SELECT {TOTALS_COLUMNS} FROM learner_language_totals \
         WHERE learner_id = $1 ORDER BY language_code"
    ))
    .bind(&caller.sub)
    .fetch_all(&mut *tx)
    .await?;
    let days: Vec<NaiveDate> = sqlx::query_scalar(
        "SELECT DISTINCT (created_at AT TIME ZONE 'UTC')::date FROM study_sessions \
         WHERE learner_id = $1",
    )
    .bind(&caller.sub)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;

    let data: Vec<LanguageProgress> = rows.into_iter().map(LanguageProgress::from).collect();
    let mut totals = Counters::default();
    for language in &data {
        totals.add(&language.counters);
    }
    let streaks = streaks(&days, Utc::now().date_naive());
    Ok(Json(Progress {
        learner_id: caller.sub,
        count: data.len(),
        data,
        totals,
        current_streak_days: streaks.current_days,
        longest_streak_days: streaks.longest_days,
    }))
}

#[derive(Debug, Serialize)]
pub struct Xp {
    pub learner_id: String,
    pub total_xp: i64,
    pub level: i64,
    pub level_floor_xp: i64,
    pub next_level_xp: Option<i64>,
    pub xp_to_next_level: i64,
    pub max_level: i64,
    pub by_language: Vec<LanguageXp>,
}

#[derive(Debug, Serialize, FromRow)]
pub struct LanguageXp {
    pub language_code: String,
    pub xp: i64,
    #[sqlx(skip)]
    pub level: i64,
}

async fn xp(RequiredCaller(caller): RequiredCaller, State(db): State<PgPool>) -> Result<Json<Xp>> {
    let mut by_language = sqlx::query_as::<_, LanguageXp>(
        "SELECT language_code, xp FROM learner_language_totals \
         WHERE learner_id = $1 ORDER BY language_code",
    )
    .bind(&caller.sub)
    .fetch_all(&db)
    .await?;
    for language in &mut by_language {
        language.level = level_for_xp(language.xp);
    }
    // Summed from the same rows, so the total always equals the per-language parts.
    let total_xp = by_language.iter().map(|l| l.xp).sum();
    let level = level_progress(total_xp);
    Ok(Json(Xp {
        learner_id: caller.sub,
        total_xp,
        level: level.level,
        level_floor_xp: level.level_floor_xp,
        next_level_xp: level.next_level_xp,
        xp_to_next_level: level.xp_to_next_level,
        max_level: MAX_LEVEL,
        by_language,
    }))
}
