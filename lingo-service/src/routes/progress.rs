//! `GET /v1/lingo/me/progress` and `GET /v1/lingo/me/xp`: the caller's totals, read from the
//! per-language totals the study-session writes maintain.

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::Serialize;
use shared_auth::RequiredCaller;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::domain::level::{MAX_LEVEL, level_progress};
use crate::domain::progress::{Counters, LanguageProgress, LanguageXp};
use crate::domain::streak::streaks;
use crate::error::Result;
use crate::state::{AppState, Db};
use crate::store;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(progress))
        .routes(routes!(xp))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "learner_id": "demo-learner",
    "data": [{
        "language_code": "es", "sessions": 3, "total_duration_seconds": 1800,
        "phrases_seen": 40, "phrases_correct": 31, "accuracy": 0.775, "xp": 71,
        "phrases_started": 18, "phrases_due": 4,
        "first_studied_at": "2026-11-19T08:00:00Z", "last_studied_at": "2026-11-21T09:30:00Z"
    }],
    "count": 1,
    "totals": {
        "sessions": 3, "total_duration_seconds": 1800, "phrases_seen": 40,
        "phrases_correct": 31, "accuracy": 0.775, "xp": 71, "phrases_started": 18, "phrases_due": 4,
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
    path = "/me/progress",
    operation_id = "lingo_get_my_progress",
    tag = "lingo",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's progress; zeros and empty `data` before the first session", body = Progress),
    )
)]
async fn progress(
    RequiredCaller(caller): RequiredCaller,
    State(db): State<Db>,
) -> Result<Json<Progress>> {
    let now = Utc::now();
    let totals = store::progress::learner_totals(&db.primary, &caller.sub, now).await?;
    let mut all = Counters::default();
    for language in &totals.languages {
        all.add(&language.counters);
    }
    let streaks = streaks(&totals.study_days, now.date_naive());
    Ok(Json(Progress {
        learner_id: caller.sub,
        count: totals.languages.len(),
        data: totals.languages,
        totals: all,
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
    #[schema(required = true, minimum = 0)]
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

/// The caller's XP and level, in total and per language.
#[utoipa::path(
    get,
    path = "/me/xp",
    operation_id = "lingo_get_my_xp",
    tag = "lingo",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's XP and level", body = Xp),
    )
)]
async fn xp(RequiredCaller(caller): RequiredCaller, State(db): State<Db>) -> Result<Json<Xp>> {
    let by_language = store::progress::xp_by_language(&db.primary, &caller.sub).await?;
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
