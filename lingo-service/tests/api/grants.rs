//! The runtime role's privileges, checked against the database itself.

use lingo_service::db::connect_one;
use sqlx::PgConnection;

use crate::helpers::spawn_app;

const READ_ONLY_TABLES: [&str; 8] = [
    "languages",
    "phrases",
    "phrase_translations",
    "phrase_views",
    "phrase_engagement",
    "phrase_recommendations",
    "phrase_stats_cache",
    "phrase_search",
];

async fn sqlstate(connection: &mut PgConnection, sql: &str) -> Option<String> {
    match sqlx::raw_sql(sql).execute(connection).await {
        Ok(_) => None,
        Err(error) => Some(
            error
                .as_database_error()
                .and_then(|e| e.code())
                .map(|c| c.into_owned())
                .unwrap_or_else(|| format!("not a database error: {error}")),
        ),
    }
}

#[tokio::test]
async fn the_runtime_role_only_reads_the_catalogue_and_analytics_tables() {
    let app = spawn_app().await;
    let mut runtime = connect_one(&app.db.url_for("lingo_app")).await.unwrap();
    const PERMISSION_DENIED: &str = "42501";
    for table in READ_ONLY_TABLES {
        assert_eq!(
            sqlstate(&mut runtime, &format!("SELECT * FROM {table} LIMIT 1")).await,
            None,
            "SELECT {table}"
        );
        let count: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&mut runtime)
            .await
            .unwrap();
        assert!(
            count > 0,
            "{table} is seeded, so a denied write would have had rows to touch"
        );
        for statement in [
            format!("INSERT INTO {table} SELECT * FROM {table} LIMIT 1"),
            format!(
                "UPDATE {table} SET {col} = {col}",
                col = first_column(table)
            ),
            format!("DELETE FROM {table}"),
            format!("TRUNCATE {table}"),
        ] {
            assert_eq!(
                sqlstate(&mut runtime, &statement).await.as_deref(),
                Some(PERMISSION_DENIED),
                "{statement}"
            );
        }
    }
    // Sessions and the answers they carry are written only by inserting; never rewritten or
    // deleted. Phrase states are derived from the answers: upserted, never deleted. The per-day
    // due counts are kept by the states' triggers (SECURITY DEFINER) and only read by the role.
    for statement in [
        "UPDATE study_sessions SET xp_awarded = 0",
        "DELETE FROM study_sessions",
        "UPDATE phrase_review_sessions SET grades = '{1}'",
        "DELETE FROM phrase_review_sessions",
        "DELETE FROM phrase_states",
        "TRUNCATE phrase_states",
        "INSERT INTO phrase_due_days VALUES ('someone', 'es', '2026-11-27', 1)",
        "UPDATE phrase_due_days SET phrases = 0",
        "DELETE FROM phrase_due_days",
        "TRUNCATE phrase_due_days",
    ] {
        assert_eq!(
            sqlstate(&mut runtime, statement).await.as_deref(),
            Some(PERMISSION_DENIED),
            "{statement}"
        );
    }
    assert_eq!(
        sqlstate(&mut runtime, "SELECT * FROM phrase_due_days LIMIT 1").await,
        None,
        "the role reads the per-day due counts"
    );
    // The role cannot create objects in its schema either.
    assert_eq!(
        sqlstate(&mut runtime, "CREATE TABLE sneaky (id int)")
            .await
            .as_deref(),
        Some(PERMISSION_DENIED)
    );
}

fn first_column(table: &str) -> &'static str {
    match table {
        "languages" => "name",
        "phrases" | "phrase_translations" => "text",
        "phrase_views" => "viewed_at",
        "phrase_engagement" => "attempts",
        "phrase_recommendations" => "score",
        "phrase_search" => "own",
        _ => "view_count",
    }
}

#[tokio::test]
async fn the_migration_history_lives_in_the_lingo_schema() {
    let app = spawn_app().await;
    let mut admin = app.admin().await;
    let (lingo, public): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT to_regclass('lingo._sqlx_migrations')::text, to_regclass('public._sqlx_migrations')::text",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert!(lingo.is_some());
    assert_eq!(public, None);
    let owner: String = sqlx::query_scalar(
        "SELECT tableowner::text FROM pg_tables WHERE schemaname = 'lingo' AND tablename = 'phrases'",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(owner, "lingo_owner");
    // Migrating again is a no-op.
    lingo_service::migrate(&app.db.url_for("lingo_owner"))
        .await
        .unwrap();
}
