//! The analytics export's page statement keeps one plan on a connection: after its first five
//! executions PostgreSQL reuses the plan made without the values (generic) instead of planning
//! each page again with them (custom). Run as the service runs it (prepared, on one connection),
//! on 8,000 rows of `learner_language_totals`, for the first page and for pages after a cursor,
//! which were planned at every request while their values were visible to the planner.

use chrono::{DateTime, Utc};
use lingo_service::domain::cursor::Cursor;
use lingo_service::store::progress::export_page;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::helpers::{TestApp, spawn_app};

/// 4,000 learners with two languages each, changed a minute apart, analysed.
async fn spawn_with_totals() -> TestApp {
    let app = spawn_app().await;
    let mut admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO learner_language_totals (learner_id, language_code, sessions, \
           total_duration_seconds, phrases_seen, phrases_correct, xp, first_studied_at, \
           last_studied_at, updated_at) \
         SELECT 'bulk-' || g, language, 5, 300, 50, 25, 50, timestamptz '2026-10-01', \
                timestamptz '2026-10-02', timestamptz '2026-11-01' + g * interval '1 minute' \
           FROM generate_series(1, 4000) g, unnest(ARRAY['es', 'fr']) language; \
         ALTER TABLE learner_language_totals SET (autovacuum_enabled = off); \
         ALTER TABLE phrase_due_days SET (autovacuum_enabled = off)",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    // Vacuumed and analysed now, and not by autovacuum during the test: a vacuum or analyse
    // mid-test changes the tables' statistics, which drops the cached plans and mixes costs of
    // two sets of statistics in the plan cache's choice (one run in about twenty planned every
    // execution before this).
    sqlx::raw_sql("VACUUM ANALYZE learner_language_totals, phrase_due_days")
        .execute(&mut admin)
        .await
        .unwrap();
    app
}

/// A pool of one connection as the service's role, so every execution meets the same cache.
async fn one_connection(app: &TestApp) -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .connect(&app.db.url_for("lingo_app"))
        .await
        .unwrap()
}

/// How many times the connection's export statement was planned with its values (custom) and
/// without them (generic), `pg_prepared_statements`.
async fn export_plans(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT custom_plans, generic_plans FROM pg_prepared_statements \
         WHERE statement LIKE '%FROM learner_language_totals t WHERE updated_at <%'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

#[tokio::test]
async fn export_pages_keep_one_plan() {
    let app = spawn_with_totals().await;
    let now = Utc::now();
    let after = Cursor::after(at("2026-11-02T00:00:00Z"), "bulk-1440", "es", None);
    for cursor in [None, Some(&after)] {
        let pool = one_connection(&app).await;
        for _ in 0..8 {
            let page = export_page(&pool, None, now, cursor, now, 101)
                .await
                .unwrap();
            assert_eq!(page.len(), 101);
        }
        // The first five executions are planned with their values, the next three reuse the
        // generic plan.
        assert_eq!(export_plans(&pool).await, (5, 3), "cursor {cursor:?}");
        pool.close().await;
    }
}
