//! The database side: the runtime role's grants, migrations, seeding, and which pool a read uses.

use shared_auth::testing::TestDatabase;

use crate::helpers::{pool_as, spawn_app, spawn_seeded, spawn_with_fixture, start};

#[tokio::test]
async fn the_runtime_role_cannot_write_curated_tables() {
    let app = spawn_with_fixture().await;
    let runtime = pool_as(&app.db, "news_app").await;
    let statements = [
        "INSERT INTO organizations (id, name, url) VALUES ('org-x', 'X', 'u')",
        "UPDATE organizations SET name = 'X' WHERE id = 'org-a'",
        "DELETE FROM organizations WHERE id = 'org-c'",
        "INSERT INTO journalists (id, name, organization_id) VALUES ('jrn-x', 'X', 'org-a')",
        "UPDATE journalists SET name = 'X' WHERE id = 'jrn-1'",
        "DELETE FROM journalists WHERE id = 'jrn-1'",
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id) \
         VALUES ('art-x', 't', 's', 'b', 'u', now(), 'org-a', 'jrn-1')",
        "UPDATE articles SET title = 'X' WHERE id = 'art-1'",
        "DELETE FROM articles WHERE id = 'art-1'",
        "TRUNCATE articles",
    ];
    for sql in statements {
        let error = sqlx::query(sql).execute(&runtime).await.expect_err(sql);
        let db_error = error.as_database_error().expect("a database error");
        assert_eq!(
            db_error.code().as_deref(),
            Some("42501"),
            "{sql}: {db_error}"
        );
        assert!(
            db_error.message().contains("permission denied"),
            "{sql}: {db_error}"
        );
    }
    // ...but it can read them and write engagement.
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM articles")
        .fetch_one(&runtime)
        .await
        .unwrap();
    assert_eq!(n, 5);
    sqlx::query("INSERT INTO likes (article_id, user_id) VALUES ('art-1', 'u')")
        .execute(&runtime)
        .await
        .unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM articles WHERE title LIKE 'Title %'")
            .await,
        5
    );
}

#[tokio::test]
async fn migration_history_lives_in_schema_news_and_migrate_is_repeatable() {
    let app = spawn_app().await;
    let in_news = app
        .count("SELECT count(*) FROM pg_tables WHERE schemaname = 'news' AND tablename = '_sqlx_migrations'")
        .await;
    assert_eq!(in_news, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM pg_tables WHERE tablename = '_sqlx_migrations'")
            .await,
        1
    );
    news_service::migrate(&app.db.url_for("news_owner"))
        .await
        .expect("second migrate is a no-op");
}

#[tokio::test]
async fn seed_is_deterministic_and_a_second_run_changes_nothing() {
    let app = spawn_seeded(1200).await;
    assert_eq!(app.count("SELECT count(*) FROM organizations").await, 20);
    assert_eq!(app.count("SELECT count(*) FROM journalists").await, 100);
    assert_eq!(app.count("SELECT count(*) FROM articles").await, 1200);
    assert_eq!(
        app.count("SELECT count(DISTINCT language) FROM articles")
            .await,
        2,
        "English and Spanish"
    );
    // The trigger computes the vector inline (migration search_vector_trigger); it is the
    // reference function's.
    assert_eq!(
        app.count(
            "SELECT count(*) FROM articles WHERE search_vector IS DISTINCT FROM \
             article_search_vector(language, title, summary, body)"
        )
        .await,
        0
    );
    let span_days = app
        .count("SELECT (extract(epoch FROM max(published_at) - min(published_at)) / 86400)::bigint FROM articles")
        .await;
    assert!(
        (600..=731).contains(&span_days),
        "spread over two years: {span_days} days"
    );
    let admin = app.admin().await;
    let fingerprint = "SELECT md5(string_agg(id || title || published_at::text || journalist_id || xmin::text, ',' ORDER BY id)) FROM articles";
    let before: String = sqlx::query_scalar(fingerprint)
        .fetch_one(&admin)
        .await
        .unwrap();

    let summary = news_service::seed(&app.db.url_for("news_pipeline"), 1200)
        .await
        .unwrap();
    assert_eq!(
        (
            summary.articles.inserted,
            summary.articles.updated,
            summary.articles.unchanged
        ),
        (0, 0, 1200)
    );
    assert_eq!(
        (summary.journalists.inserted, summary.journalists.updated),
        (0, 0)
    );
    let after: String = sqlx::query_scalar(fingerprint)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(before, after, "no row was rewritten (xmin unchanged)");

    // Another database seeded alike holds the same rows.
    let other = TestDatabase::create().await;
    news_service::migrate(&other.url_for("news_owner"))
        .await
        .unwrap();
    news_service::seed(&other.url_for("news_pipeline"), 1200)
        .await
        .unwrap();
    let other_admin = pool_as(&other, "admin").await;
    let content = "SELECT md5(string_agg(id || title || published_at::text || journalist_id, ',' ORDER BY id)) FROM articles";
    let a: String = sqlx::query_scalar(content).fetch_one(&admin).await.unwrap();
    let b: String = sqlx::query_scalar(content)
        .fetch_one(&other_admin)
        .await
        .unwrap();
    assert_eq!(a, b);
}

#[tokio::test]
async fn anonymous_reads_use_the_read_pool_and_personal_reads_the_primary() {
    let db = TestDatabase::create().await;
    news_service::migrate(&db.url_for("news_owner"))
        .await
        .unwrap();
    let pipeline = pool_as(&db, "news_pipeline").await;
    sqlx::raw_sql(crate::helpers::FIXTURE)
        .execute(&pipeline)
        .await
        .unwrap();
    // A read pool that cannot connect: anonymous reads try it and fall back to the primary
    // (counted), signed-in reads and writes use the primary anyway.
    let app = start(db, Some("postgres://news_app@127.0.0.1:1/none".into())).await;
    assert_eq!(app.get("/articles", None).await.status(), 200);
    let metrics = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let fallbacks: f64 = metrics
        .lines()
        .filter(|line| line.starts_with("news_db_read_fallback_total"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(fallbacks, 1.0, "{metrics}");
    assert_eq!(app.get("/articles", Some("u1")).await.status(), 200);
    assert_eq!(app.post("/articles/art-1/like", "u1").await.status(), 200);
}

#[tokio::test]
async fn serve_can_migrate_on_start() {
    let db = TestDatabase::create().await;
    let mut config =
        news_service::ServeConfig::new(db.url_for("news_app"), shared_auth::testing::auth_config());
    config.migrate_on_start = true;
    config.owner_database_url = Some(db.url_for("news_owner"));
    let app = news_service::Application::build(config).await.unwrap();
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    let page: serde_json::Value = reqwest::get(format!("{address}/v1/news/articles"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["count"], 0);
}
