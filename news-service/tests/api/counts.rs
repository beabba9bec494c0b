//! Engagement counters: every count the API shows (likes, bookmarks, comments with replies,
//! journalist and organisation followers) equals `count(*)` of the rows it counts, whoever wrote
//! them (concurrent callers, bulk SQL by the owner, cascades, an UPDATE, a TRUNCATE), the
//! migration backfills them, `recount` finds no drift, and reads never touch engagement rows.

use std::collections::BTreeMap;
use std::process::Command;

use futures_util::future::join_all;
use news_service::store::articles::{ListSpec, article_query, list_query};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::helpers::{
    TestApp, database_before_migration, pool_as, spawn_seeded, spawn_with_fixture, start,
};

const BIN: &str = env!("CARGO_BIN_EXE_news-service");

/// The first migration with counters: everything before it is the schema without them.
const COUNTERS_VERSION: i64 = 20261123000001;

/// Every (counter, target) -> count, as the API shows it (anonymous list and directory reads).
async fn api_counts(app: &TestApp) -> BTreeMap<(String, String), i64> {
    let mut counts = BTreeMap::new();
    let articles = app.get_json("/articles?limit=100", None).await;
    for item in articles["data"].as_array().unwrap() {
        for field in ["like_count", "bookmark_count", "comment_count"] {
            let id = item["id"].as_str().unwrap().to_owned();
            counts.insert((field.to_owned(), id), item[field].as_i64().unwrap());
        }
    }
    for (path, counter) in [
        ("/journalists?limit=100", "journalist follower_count"),
        ("/organizations?limit=100", "organization follower_count"),
    ] {
        let page = app.get_json(path, None).await;
        for item in page["data"].as_array().unwrap() {
            let id = item["id"].as_str().unwrap().to_owned();
            counts.insert(
                (counter.to_owned(), id),
                item["follower_count"].as_i64().unwrap(),
            );
        }
    }
    counts
}

/// The same map from `count(*)` over the rows (0 for a target without rows).
async fn row_counts(pool: &PgPool) -> BTreeMap<(String, String), i64> {
    let sql = "
        SELECT c.counter, t.id, (CASE c.counter
            WHEN 'like_count' THEN (SELECT count(*) FROM likes x WHERE x.article_id = t.id)
            WHEN 'bookmark_count' THEN (SELECT count(*) FROM bookmarks x WHERE x.article_id = t.id)
            ELSE (SELECT count(*) FROM comments x WHERE x.article_id = t.id) END)
        FROM articles t, (VALUES ('like_count'), ('bookmark_count'), ('comment_count')) c (counter)
        UNION ALL
        SELECT 'journalist follower_count', t.id,
               (SELECT count(*) FROM journalist_follows x WHERE x.journalist_id = t.id)
        FROM journalists t
        UNION ALL
        SELECT 'organization follower_count', t.id,
               (SELECT count(*) FROM organization_follows x WHERE x.organization_id = t.id)
        FROM organizations t";
    let rows: Vec<(String, String, i64)> = sqlx::query_as(sql).fetch_all(pool).await.unwrap();
    rows.into_iter().map(|(c, id, n)| ((c, id), n)).collect()
}

/// Asserts that every API count equals its rows; returns the total, so callers can check that
/// the scenario really wrote something.
pub(crate) async fn assert_counts_exact(app: &TestApp, when: &str) -> i64 {
    let admin = app.admin().await;
    let rows = row_counts(&admin).await;
    admin.close().await;
    let api = api_counts(app).await;
    assert_eq!(api, rows, "API counts against count(*) {when}");
    // The single-article read and the like/bookmark answers use the same counters.
    let article = app.get_json("/articles/art-1", None).await;
    for field in ["like_count", "bookmark_count", "comment_count"] {
        assert_eq!(
            article[field],
            json!(rows[&(field.to_owned(), "art-1".to_owned())]),
            "{field} of GET /articles/art-1 {when}"
        );
    }
    rows.values().sum()
}

/// Runs `news-service recount` as `role`, returning (success, stdout + stderr).
fn run_recount(app: &TestApp, role: &str) -> (bool, String) {
    let output = Command::new(BIN)
        .arg("recount")
        .env("NEWS_PIPELINE_DATABASE_URL", app.db.url_for(role))
        .env("LOG_FORMAT", "json")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn assert_no_drift(app: &TestApp, role: &str) {
    let (ok, output) = run_recount(app, role);
    assert!(ok, "recount as {role} failed:\n{output}");
    assert!(
        output.contains("total drift fixed: 0"),
        "recount found drift:\n{output}"
    );
}

/// One caller's sequence of calls on an edge; every answer must be 200.
async fn calls(app: &TestApp, path: &str, user: String, methods: Vec<Method>) {
    for method in methods {
        let response = app.request(method.clone(), path, Some(&user)).await;
        assert_eq!(response.status(), 200, "{method} {path} as {user}");
        let body: Value = response.json().await.unwrap();
        let count = body
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.ends_with("_count"))
            .map(|(_, v)| v.as_i64().unwrap())
            .unwrap();
        // Read in the writing transaction: a caller who just liked sees at least their like.
        if method == Method::POST {
            assert!(count >= 1, "{method} {path} as {user}: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_posts_and_deletes_by_50_users_leave_counts_equal_to_rows() {
    let app = spawn_with_fixture().await;
    let edges = [
        "/articles/art-1/like",
        "/articles/art-1/bookmark",
        "/journalists/jrn-1/follow",
        "/organizations/org-a/follow",
    ];
    // One edge at a time (50 users and the repeater concurrently on it), so the calls queue on
    // the counters rather than on the test's own connection pool.
    for path in edges {
        let mut work = Vec::new();
        for n in 0..50 {
            // A third stay, a third leave, a third come back.
            let methods = match n % 3 {
                0 => vec![Method::POST],
                1 => vec![Method::POST, Method::DELETE],
                _ => vec![Method::POST, Method::DELETE, Method::POST, Method::POST],
            };
            work.push(calls(&app, path, format!("user-{n}"), methods));
        }
        // One user repeating both calls, racing with themself.
        for round in 0..20 {
            let method = if round % 2 == 0 {
                Method::POST
            } else {
                Method::DELETE
            };
            work.push(calls(&app, path, "repeater".into(), vec![method]));
        }
        join_all(work).await;
    }
    // Comments: top-level ones and replies, while an operator deletes a thread (its replies go by
    // cascade) concurrently.
    let parent: Value = app
        .post_comment(
            "user-0",
            &json!({"article_id": "art-1", "text": "root"}),
            None,
        )
        .await
        .json()
        .await
        .unwrap();
    let parent_id = parent["id"].as_str().unwrap().to_owned();
    let comments = (0..50).map(|n| {
        let body = if n % 2 == 0 {
            json!({"article_id": "art-1", "text": format!("c{n}")})
        } else {
            json!({"article_id": "art-1", "text": format!("r{n}"), "parent_id": parent_id})
        };
        let app = &app;
        async move {
            let status = app
                .post_comment(&format!("user-{n}"), &body, None)
                .await
                .status();
            // A reply may lose the race with the deletion of its parent.
            assert!(status == 201 || status == 422, "POST /comments: {status}");
        }
    });
    let owner = pool_as(&app.db, "news_owner").await;
    let delete_thread = async {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        sqlx::query("DELETE FROM comments WHERE id = $1::uuid")
            .bind(&parent_id)
            .execute(&owner)
            .await
            .unwrap();
    };
    tokio::join!(join_all(comments), delete_thread);

    let total = assert_counts_exact(&app, "after concurrent calls").await;
    // 4 edges x (17 + 17 staying/returning of 50, plus maybe the repeater) + 25 comments at least.
    assert!(
        total >= 4 * 33 + 25,
        "the scenario wrote too little: {total}"
    );
    assert_no_drift(&app, "news_pipeline");
}

/// 100,000 rows into each engagement table in one statement each, as the owner.
const BULK_INSERT: &str = "
INSERT INTO likes (article_id, user_id)
  SELECT 'art-' || (1 + i % 5), 'bulk-' || i FROM generate_series(1, 100000) i;
INSERT INTO bookmarks (article_id, user_id)
  SELECT 'art-' || (1 + i % 5), 'bulk-' || i FROM generate_series(1, 100000) i;
INSERT INTO journalist_follows (journalist_id, user_id)
  SELECT 'jrn-' || (1 + i % 3), 'bulk-' || i FROM generate_series(1, 100000) i;
INSERT INTO organization_follows (organization_id, user_id)
  SELECT 'org-' || chr(97 + i % 3), 'bulk-' || i FROM generate_series(1, 100000) i;
INSERT INTO comments (id, article_id, author_id, text, depth, path, created_at)
  SELECT id, 'art-' || (1 + i % 5), 'bulk-' || i, 'bulk', 0, replace(id::text, '-', ''), now()
  FROM (SELECT gen_random_uuid() AS id, i FROM generate_series(1, 100000) i) s;
-- Replies of the first comments of art-1, to be removed by cascade later.
INSERT INTO comments (id, article_id, parent_id, author_id, text, depth, path, created_at)
  SELECT r.id, 'art-1', p.id, 'bulk-reply', 'reply', 1,
         replace(p.id::text, '-', '') || '.' || replace(r.id::text, '-', ''), now()
  FROM (SELECT id FROM comments WHERE article_id = 'art-1' ORDER BY id LIMIT 100) p
  CROSS JOIN LATERAL (SELECT gen_random_uuid() AS id, p.id AS parent
                      FROM generate_series(1, 3)) r;
";

#[tokio::test]
async fn bulk_sql_updates_cascades_and_truncate_keep_counts_equal_to_rows() {
    let app = spawn_with_fixture().await;
    // Some engagement through the API first, so bulk changes meet existing counters.
    for user in ["u1", "u2"] {
        app.post("/articles/art-1/like", user).await;
        app.post("/journalists/jrn-1/follow", user).await;
    }
    let owner = pool_as(&app.db, "news_owner").await;
    sqlx::raw_sql(BULK_INSERT).execute(&owner).await.unwrap();
    let total = assert_counts_exact(&app, "after bulk inserts").await;
    assert!(total > 500_000, "bulk rows missing: {total}");

    // An UPDATE moving rows to another target moves their counts.
    sqlx::raw_sql(
        "UPDATE likes SET article_id = 'art-2' WHERE article_id = 'art-1' AND user_id LIKE 'bulk-%';
         UPDATE journalist_follows SET journalist_id = 'jrn-3' WHERE journalist_id = 'jrn-1';",
    )
    .execute(&owner)
    .await
    .unwrap();
    assert_counts_exact(&app, "after moving rows").await;

    // Bulk deletes: 100,000 likes in one statement; a parent comment's replies by cascade.
    sqlx::raw_sql(
        "DELETE FROM likes WHERE user_id LIKE 'bulk-%';
         DELETE FROM bookmarks WHERE user_id LIKE 'bulk-%' AND article_id <> 'art-3';
         DELETE FROM comments WHERE parent_id IS NULL AND id IN
           (SELECT parent_id FROM comments WHERE parent_id IS NOT NULL);
         DELETE FROM organization_follows WHERE organization_id = 'org-b';",
    )
    .execute(&owner)
    .await
    .unwrap();
    assert_eq!(
        app.count("SELECT count(*) FROM likes WHERE user_id LIKE 'bulk-%'")
            .await,
        0
    );
    assert_counts_exact(&app, "after bulk deletes").await;

    // Deleting curated rows cascades to their engagement and counters without failing.
    sqlx::raw_sql(
        "DELETE FROM articles WHERE id = 'art-4';
         DELETE FROM articles WHERE journalist_id = 'jrn-3';
         DELETE FROM journalists WHERE id = 'jrn-3';",
    )
    .execute(&owner)
    .await
    .unwrap();
    assert_counts_exact(&app, "after deleting articles and a journalist").await;
    assert_eq!(
        app.count(
            "SELECT count(*) FROM article_stats WHERE article_id NOT IN (SELECT id FROM articles)"
        )
        .await,
        0
    );

    sqlx::raw_sql("TRUNCATE bookmarks, organization_follows")
        .execute(&owner)
        .await
        .unwrap();
    assert_counts_exact(&app, "after TRUNCATE").await;
    // And the service keeps counting from there.
    let answer: Value = app
        .post("/articles/art-2/bookmark", "u9")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["bookmark_count"], 1);
    assert_counts_exact(&app, "after a bookmark following TRUNCATE").await;
    assert_no_drift(&app, "news_owner");
}

#[tokio::test]
async fn recount_reports_and_fixes_drift_and_only_the_pipeline_or_owner_may_run_it() {
    let app = spawn_with_fixture().await;
    for user in ["u1", "u2", "u3"] {
        app.post("/articles/art-2/like", user).await;
        app.post("/journalists/jrn-2/follow", user).await;
    }
    assert_no_drift(&app, "news_pipeline");

    // Counters damaged behind the triggers' back (only a superuser can).
    let admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO article_stats (article_id, slot, like_count) VALUES ('art-2', 7, 5)
           ON CONFLICT (article_id, slot) DO UPDATE SET like_count = article_stats.like_count + 5;
         DELETE FROM journalist_stats;",
    )
    .execute(&admin)
    .await
    .unwrap();
    let (ok, output) = run_recount(&app, "news_pipeline");
    assert!(ok, "{output}");
    assert!(
        output.contains("like_count:"),
        "one line per counter:\n{output}"
    );
    assert!(output.contains("drift 5 rows over 1 targets"), "{output}");
    assert!(output.contains("drift 3 rows over 1 targets"), "{output}");
    assert!(output.contains("total drift fixed: 8"), "{output}");
    assert_counts_exact(&app, "after recount").await;
    assert_no_drift(&app, "news_pipeline");

    // The runtime role can neither recount nor write counters.
    let (ok, output) = run_recount(&app, "news_app");
    assert!(!ok, "news_app must not recount:\n{output}");
    assert!(output.contains("permission denied"), "{output}");
    let runtime = pool_as(&app.db, "news_app").await;
    let error = sqlx::query("UPDATE article_stats SET like_count = 0")
        .execute(&runtime)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("permission denied"), "{error}");
}

#[tokio::test]
async fn the_migration_backfills_counters_from_existing_engagement() {
    let (db, owner, _pipeline) = database_before_migration(COUNTERS_VERSION).await;
    let owner_url = db.url_for("news_owner");
    sqlx::raw_sql(BULK_INSERT).execute(&owner).await.unwrap();
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'news' AND tablename = 'article_stats'",
    )
    .fetch_one(&owner)
    .await
    .unwrap();
    assert_eq!(tables, 0, "the counters must not exist yet");

    news_service::migrate(&owner_url).await.unwrap();
    let app = start(db, None).await;
    let total = assert_counts_exact(&app, "after the backfill").await;
    assert!(total > 500_000, "engagement missing: {total}");
    assert_no_drift(&app, "news_pipeline");
}

/// The plan lines that scan an engagement table.
fn engagement_scans(plan: &[String]) -> Vec<String> {
    let tables = [
        "likes",
        "bookmarks",
        "comments",
        "journalist_follows",
        "organization_follows",
    ];
    plan.iter()
        .filter(|line| {
            tables.iter().any(|t| {
                let on = format!(" on {t}");
                line.contains(&format!("{on} ")) || line.ends_with(&on)
            })
        })
        .cloned()
        .collect()
}

#[tokio::test]
async fn anonymous_list_and_article_plans_read_no_engagement_rows() {
    let app = spawn_seeded(300).await;
    let owner = pool_as(&app.db, "news_owner").await;
    let id: String =
        sqlx::query_scalar("SELECT id FROM articles ORDER BY published_at DESC, id DESC LIMIT 1")
            .fetch_one(&owner)
            .await
            .unwrap();
    sqlx::query(
        "INSERT INTO likes (article_id, user_id)
           SELECT a.id, 'u' || i FROM articles a, generate_series(1, 50) i;
         ",
    )
    .execute(&owner)
    .await
    .unwrap();
    sqlx::raw_sql("ANALYZE")
        .execute(&app.admin().await)
        .await
        .unwrap();
    let runtime = pool_as(&app.db, "news_app").await;
    let explain = |qb: sqlx::QueryBuilder<'static, sqlx::Postgres>| {
        let runtime = runtime.clone();
        async move {
            let mut qb = qb;
            let rows: Vec<String> = qb.build_query_scalar().fetch_all(&runtime).await.unwrap();
            rows
        }
    };
    let anonymous = ListSpec {
        limit: 21,
        ..ListSpec::default()
    };
    let plans = [
        (
            "anonymous list",
            explain(list_query("EXPLAIN ", &anonymous)).await,
        ),
        (
            "anonymous article",
            explain(article_query("EXPLAIN ", &id, None)).await,
        ),
    ];
    for (name, plan) in &plans {
        let text = plan.join("\n");
        assert!(
            text.contains("article_stats"),
            "{name} reads counters:\n{text}"
        );
        assert!(
            engagement_scans(plan).is_empty(),
            "{name} scans engagement rows:\n{text}"
        );
    }
    // The check itself sees scans: a signed-in reader's flags do read likes.
    let personal = explain(article_query("EXPLAIN ", &id, Some("u1"))).await;
    assert!(
        !engagement_scans(&personal).is_empty(),
        "{}",
        personal.join("\n")
    );
}

#[test]
fn recount_help_names_its_database_variable() {
    let output = Command::new(BIN)
        .args(["recount", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("NEWS_PIPELINE_DATABASE_URL"), "{help}");
    assert!(help.contains("news_owner"), "{help}");
}
