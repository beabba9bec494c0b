//! The analytics tables' writes, as the upstream analytics pipeline makes them: phrase views,
//! the engagement and stats cache derived from all views, and recommendations. The service's
//! runtime role only reads these tables; the demo `seed` runs these as `lingo_pipeline`. Rows go
//! by key and are left untouched when nothing changed, so a second seed changes nothing.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::error::Result;

/// Phrase views by `id`: the columns of the views, one entry per view.
pub struct PhraseViews<'a> {
    pub ids: &'a [String],
    pub phrase_ids: &'a [String],
    pub learner_ids: &'a [String],
    pub viewed_at: &'a [DateTime<Utc>],
    pub correct: &'a [bool],
}

pub async fn upsert_views(db: impl PgExecutor<'_>, views: &PhraseViews<'_>) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO phrase_views (id, phrase_id, learner_id, viewed_at, correct)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bool[])
         ON CONFLICT (id) DO UPDATE SET phrase_id = EXCLUDED.phrase_id,
           learner_id = EXCLUDED.learner_id, viewed_at = EXCLUDED.viewed_at,
           correct = EXCLUDED.correct
         WHERE (phrase_views.phrase_id, phrase_views.learner_id, phrase_views.viewed_at,
                phrase_views.correct) IS DISTINCT FROM
               (EXCLUDED.phrase_id, EXCLUDED.learner_id, EXCLUDED.viewed_at, EXCLUDED.correct)"#,
        views.ids,
        views.phrase_ids,
        views.learner_ids,
        views.viewed_at,
        views.correct,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Each (learner, phrase)'s engagement, derived from all views.
pub async fn derive_engagement(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO phrase_engagement (learner_id, phrase_id, attempts, correct, last_seen_at)
         SELECT learner_id, phrase_id, count(*), count(*) FILTER (WHERE correct), max(viewed_at)
         FROM phrase_views GROUP BY learner_id, phrase_id
         ON CONFLICT (learner_id, phrase_id) DO UPDATE SET attempts = EXCLUDED.attempts,
           correct = EXCLUDED.correct, last_seen_at = EXCLUDED.last_seen_at
         WHERE (phrase_engagement.attempts, phrase_engagement.correct,
                phrase_engagement.last_seen_at) IS DISTINCT FROM
               (EXCLUDED.attempts, EXCLUDED.correct, EXCLUDED.last_seen_at)"#,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Each phrase's stats cache, derived from all views.
pub async fn derive_stats_cache(db: impl PgExecutor<'_>) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO phrase_stats_cache (phrase_id, view_count, learner_count, accuracy, refreshed_at)
         SELECT phrase_id, count(*), count(DISTINCT learner_id),
                round(avg(CASE WHEN correct THEN 1 ELSE 0 END)
                      FILTER (WHERE correct IS NOT NULL), 4)::double precision,
                max(viewed_at)
         FROM phrase_views GROUP BY phrase_id
         ON CONFLICT (phrase_id) DO UPDATE SET view_count = EXCLUDED.view_count,
           learner_count = EXCLUDED.learner_count, accuracy = EXCLUDED.accuracy,
           refreshed_at = EXCLUDED.refreshed_at
         WHERE (phrase_stats_cache.view_count, phrase_stats_cache.learner_count,
                phrase_stats_cache.accuracy, phrase_stats_cache.refreshed_at) IS DISTINCT FROM
               (EXCLUDED.view_count, EXCLUDED.learner_count, EXCLUDED.accuracy,
                EXCLUDED.refreshed_at)"#,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Recommendations by (learner, phrase), with their scores, all made at `generated_at`.
pub async fn upsert_recommendations(
    db: impl PgExecutor<'_>,
    learner_ids: &[String],
    phrase_ids: &[String],
    scores: &[f64],
    generated_at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query!(
        r#"INSERT INTO phrase_recommendations (learner_id, phrase_id, score, generated_at)
         SELECT l, p, s, $4 FROM UNNEST($1::text[], $2::text[], $3::float8[]) AS u(l, p, s)
         ON CONFLICT (learner_id, phrase_id) DO UPDATE SET score = EXCLUDED.score,
           generated_at = EXCLUDED.generated_at
         WHERE (phrase_recommendations.score, phrase_recommendations.generated_at)
               IS DISTINCT FROM (EXCLUDED.score, EXCLUDED.generated_at)"#,
        learner_ids,
        phrase_ids,
        scores,
        generated_at,
    )
    .execute(db)
    .await?;
    Ok(())
}
