//! The demo seed: enough data, written by the pipeline role, idempotent and deterministic.

use lingo_service::seed_with;
use shared_auth::testing::TestDatabase;

const TABLES: [(&str, &str); 7] = [
    ("languages", "code"),
    ("phrases", "id"),
    ("phrase_translations", "phrase_id, language_code"),
    ("phrase_views", "id"),
    ("phrase_engagement", "learner_id, phrase_id"),
    ("phrase_recommendations", "learner_id, phrase_id"),
    ("phrase_stats_cache", "phrase_id"),
];

/// Row count and a digest of every row of each seeded table (system columns included via xmin,
/// so even a no-op rewrite of a row would show).
async fn snapshot(db: &TestDatabase) -> Vec<(String, i64, String)> {
    let mut admin = lingo_service::db::connect_one(&db.admin_url())
        .await
        .unwrap();
    let mut out = Vec::new();
    for (table, order) in TABLES {
        let (count, digest): (i64, Option<String>) = sqlx::query_as(&format!(
            "SELECT count(*), md5(string_agg(t::text || xmin::text, '|' ORDER BY {order})) \
             FROM lingo.{table} t"
        ))
        .fetch_one(&mut admin)
        .await
        .unwrap();
        out.push((table.to_owned(), count, digest.unwrap_or_default()));
    }
    out
}

#[tokio::test]
async fn seeding_twice_changes_nothing() {
    let db = TestDatabase::create().await;
    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    let first = seed_with(&db.url_for("lingo_pipeline"), 4).await.unwrap();
    assert!(first.languages >= 5);
    assert!(first.phrases >= 200);
    assert_eq!(first.translations, first.phrases * 5);
    assert_eq!(first.learners, 5);
    let before = snapshot(&db).await;
    for (table, count, _) in &before {
        assert!(*count > 0, "{table} is empty");
    }
    let second = seed_with(&db.url_for("lingo_pipeline"), 4).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn seeding_is_deterministic_across_databases() {
    let a = TestDatabase::create().await;
    let b = TestDatabase::create().await;
    for db in [&a, &b] {
        lingo_service::migrate(&db.url_for("lingo_owner"))
            .await
            .unwrap();
        seed_with(&db.url_for("lingo_pipeline"), 2).await.unwrap();
    }
    // Analytics tables only (catalogue rows carry their insertion time; xmin differs anyway).
    let mut digests = Vec::new();
    for db in [&a, &b] {
        let mut admin = lingo_service::db::connect_one(&db.admin_url())
            .await
            .unwrap();
        let mut tables = Vec::new();
        for (table, order) in &TABLES[3..] {
            let digest: Option<String> = sqlx::query_scalar(&format!(
                "SELECT md5(string_agg(t::text, '|' ORDER BY {order})) FROM lingo.{table} t"
            ))
            .fetch_one(&mut admin)
            .await
            .unwrap();
            tables.push(digest);
        }
        digests.push(tables);
    }
    assert_eq!(digests[0], digests[1]);
}
