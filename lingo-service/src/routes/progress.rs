//! `GET /v1/lingo/me/progress` and `GET /v1/lingo/me/xp`: the caller's totals, read from the
//! per-language totals the study-session writes maintain.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use shared_auth::RequiredCaller;
use sqlx::{FromRow, PgPool};
use utoipa::ToSchema;

use crate::domain::level::{MAX_LEVEL, level_for_xp, level_progress};
use crate::domain::streak::streaks;
use crate::{AppState, Result};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/me/progress", get(progress))
        .route("/me/xp", get(xp))
}

/// Counters of one language, or of all languages together (`totals`).
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
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
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub accuracy: Option<f64>,
    #[schema(minimum = 0)]
    pub xp: i64,
    /// First session (null when there is none).
    #[serde(serialize_with = "crate::time::option::serialize")]
    pub first_studied_at: Option<DateTime<Utc>>,
    /// Latest session (null when there is none).
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

/// The caller's counters in one language.
#[derive(Debug, Clone, Serialize, ToSchema)]
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

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "learner_id": "demo-learner",
    "data": [{
        "language_code": "es", "sessions": 3, "total_duration_seconds": 1800,
        "phrases_seen": 40, "phrases_correct": 31, "accuracy": 0.775, "xp": 71,
        "first_studied_at": "2026-11-19T08:00:00Z", "last_studied_at": "2026-11-21T09:30:00Z"
    }],
    "count": 1,
    "totals": {
        "sessions": 3, "total_duration_seconds": 1800, "phrases_seen": 40,
        "phrases_correct": 31, "accuracy": 0.775, "xp": 71,
        "first_studied_at": "2026-11-19T08:00:00Z", "last_studied_at": "2026-11-21T09:30:00Z"
    },
    "current_streak_days": 3,
    "longest_streak_days": 3
}))]
pub struct Progress {
    pub learner_id: String,
    /// One entry per language studied, ordered by `language_code`.
    pub data: Vec<LanguageProgress>,
    /// Number of items in `data`.
    #[schema(minimum = 0)]
    pub count: usize,
    /// The same counters over all languages.
    pub totals: Counters,
    /// Consecutive UTC days with a session, ending today or yesterday.
    #[schema(minimum = 0)]
    pub current_streak_days: i64,
    #[schema(minimum = 0)]
    pub longest_streak_days: i64,
}

/// The caller's study progress per language and in total.
#[utoipa::path(
    get,
    path = "/v1/lingo/me/progress",
    operation_id = "lingo_get_my_progress",
    tag = "lingo",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's progress; zeros and empty `data` before the first session", body = Progress),
    )
)]
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

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "learner_id": "demo-learner", "total_xp": 71, "level": 2, "level_floor_xp": 60,
    "next_level_xp": 120, "xp_to_next_level": 49, "max_level": 25,
    "by_language": [{"language_code": "es", "xp": 71, "level": 2}]
}))]
pub struct Xp {
    pub learner_id: String,
    #[schema(minimum = 0)]
    pub total_xp: i64,
    #[schema(minimum = 1, maximum = 25)]
    pub level: i64,
    /// XP at which the current level starts.
    #[schema(minimum = 0)]
    pub level_floor_xp: i64,
    /// XP at which the next level starts; null at the maximum level.
    #[schema(minimum = 0)]
    pub next_level_xp: Option<i64>,
    /// 0 at the maximum level.
    #[schema(minimum = 0)]
    pub xp_to_next_level: i64,
    /// Always 25.
    #[schema(minimum = 25, maximum = 25)]
    pub max_level: i64,
    /// Ordered by `language_code`.
    pub by_language: Vec<LanguageXp>,
}

#[derive(Debug, Serialize, FromRow, ToSchema)]
pub struct LanguageXp {
    pub language_code: String,
    #[schema(minimum = 0)]
    pub xp: i64,
    #[sqlx(skip)]
    #[schema(minimum = 1, maximum = 25)]
    pub level: i64,
}

/// The caller's XP and level, in total and per language.
#[utoipa::path(
    get,
    path = "/v1/lingo/me/xp",
    operation_id = "lingo_get_my_xp",
    tag = "lingo",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's XP and level", body = Xp),
    )
)]
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
