//! Comments: create with its rules and `Idempotency-Key`, read one, threads in order.

use std::str::FromStr;
use std::time::Duration;

use news_service::{Application, ServeConfig};
use serde_json::{Value, json};
use shared_auth::testing::auth_config;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::helpers::{TestApp, assert_problem, pool_as, spawn_app, spawn_with_fixture};

async fn create(app: &TestApp, user: &str, body: Value) -> Value {
    let response = app.post_comment(user, &body, None).await;
    assert_eq!(response.status(), 201, "{body}");
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let comment: Value = response.json().await.unwrap();
    assert_eq!(
        location,
        format!("/v1/news/comments/{}", comment["id"].as_str().unwrap())
    );
    comment
}

#[tokio::test]
async fn a_comment_has_the_contract_shape() {
    let app = spawn_with_fixture().await;
    let comment = create(
        &app,
        "writer",
        json!({"article_id": "art-1", "text": "  Hello there \n"}),
    )
    .await;
    let id = comment["id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);
    let created_at = comment["created_at"].as_str().unwrap();
    assert!(created_at.ends_with('Z'), "{created_at}");
    assert_eq!(
        comment,
        json!({"id": id, "article_id": "art-1", "parent_id": null, "author_id": "writer",
               "text": "Hello there", "depth": 0, "created_at": created_at})
    );
    assert_eq!(
        app.get_json(&format!("/comments/{id}"), None).await,
        comment
    );
    assert_eq!(
        app.get_json("/articles/art-1", None).await["comment_count"],
        1
    );
    // An explicit null parent is a top-level comment too.
    let top = create(
        &app,
        "writer",
        json!({"article_id": "art-1", "text": "x", "parent_id": null}),
    )
    .await;
    assert_eq!(top["depth"], 0);
}

#[tokio::test]
async fn comment_rules_each_have_their_status_and_code_and_write_nothing() {
    let app = spawn_with_fixture().await;
    let other = create(
        &app,
        "w",
        json!({"article_id": "art-2", "text": "on another article"}),
    )
    .await;
    let other_id = other["id"].as_str().unwrap().to_owned();
    let unknown = uuid::Uuid::now_v7().to_string();
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            json!({"article_id": "art-1", "text": ""}),
            422,
            "validation_failed",
        ),
        (
            json!({"article_id": "art-1", "text": " \t\n  "}),
            422,
            "validation_failed",
        ),
        (
            json!({"article_id": "art-1", "text": "a".repeat(10_001)}),
            422,
            "validation_failed",
        ),
        (
            json!({"article_id": "nope", "text": "hi"}),
            422,
            "unknown_article",
        ),
        (
            json!({"article_id": "art-1", "text": "hi", "parent_id": unknown}),
            422,
            "unknown_parent",
        ),
        (
            json!({"article_id": "art-1", "text": "hi", "parent_id": "not-a-uuid"}),
            422,
            "unknown_parent",
        ),
        (
            // Another spelling of an existing comment's id names nothing.
            json!({"article_id": "art-2", "text": "hi", "parent_id": other_id.to_uppercase()}),
            422,
            "unknown_parent",
        ),
        (
            json!({"article_id": "art-1", "text": "hi", "parent_id": other_id}),
            422,
            "parent_article_mismatch",
        ),
        (
            json!({"article_id": "art-1", "text": "hi", "author_id": "me"}),
            422,
            "validation_failed",
        ),
        (json!({"article_id": "art-1"}), 422, "validation_failed"),
        (
            json!({"article_id": "art-1", "text": 5}),
            422,
            "validation_failed",
        ),
    ];
    for (body, status, code) in cases {
        let problem = assert_problem(app.post_comment("u1", &body, None).await, status, code).await;
        if code != "validation_failed" {
            assert!(problem["errors"][0]["field"].is_string(), "{problem}");
        }
        assert_eq!(
            app.count("SELECT count(*) FROM comments").await,
            1,
            "{body} wrote nothing"
        );
    }
    let problem = assert_problem(
        app.post_comment("u1", &json!({"article_id": "art-1", "text": ""}), None)
            .await,
        422,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "text");
}

#[tokio::test]
async fn text_length_counts_characters_not_bytes() {
    let app = spawn_with_fixture().await;
    // 10,000 characters, 15,000 bytes: accepted (well within the 128 KiB body limit).
    let text = format!("{}{}", "é".repeat(5_000), "a".repeat(5_000));
    let comment = create(&app, "u1", json!({"article_id": "art-1", "text": text})).await;
    assert_eq!(comment["text"].as_str().unwrap().chars().count(), 10_000);
    let too_long = format!("{}{}", "é".repeat(5_000), "a".repeat(5_001));
    let response = app
        .post_comment(
            "u1",
            &json!({"article_id": "art-1", "text": too_long}),
            None,
        )
        .await;
    assert_problem(response, 422, "validation_failed").await;
}

#[tokio::test]
async fn depth_11_is_refused() {
    let app = spawn_with_fixture().await;
    let mut parent = create(&app, "u", json!({"article_id": "art-1", "text": "depth 0"})).await;
    for depth in 1..=10 {
        parent = create(
            &app,
            "u",
            json!({"article_id": "art-1", "text": format!("depth {depth}"), "parent_id": parent["id"]}),
        )
        .await;
        assert_eq!(parent["depth"], depth);
    }
    let body = json!({"article_id": "art-1", "text": "depth 11", "parent_id": parent["id"]});
    assert_problem(
        app.post_comment("u", &body, None).await,
        422,
        "max_depth_exceeded",
    )
    .await;
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 11);
}

#[tokio::test]
async fn a_four_level_thread_comes_back_in_thread_order() {
    let app = spawn_with_fixture().await;
    let post = |text: &str, parent: Option<&Value>| {
        let mut body = json!({"article_id": "art-1", "text": text});
        if let Some(parent) = parent {
            body["parent_id"] = parent["id"].clone();
        }
        body
    };
    // Created interleaved, so creation order differs from thread order.
    let a = create(&app, "u1", post("A", None)).await;
    let b = create(&app, "u2", post("B", None)).await;
    let a1 = create(&app, "u2", post("A1", Some(&a))).await;
    let b1 = create(&app, "u1", post("B1", Some(&b))).await;
    let a1x = create(&app, "u3", post("A1x", Some(&a1))).await;
    let a2 = create(&app, "u3", post("A2", Some(&a))).await;
    let a1x1 = create(&app, "u1", post("A1x1", Some(&a1x))).await;
    let _a1y = create(&app, "u2", post("A1y", Some(&a1))).await;
    create(
        &app,
        "u2",
        json!({"article_id": "art-2", "text": "elsewhere"}),
    )
    .await;
    assert_eq!(a1x1["depth"], 3);
    assert_eq!(b1["parent_id"], b["id"]);
    assert_eq!(a2["parent_id"], a["id"]);

    let page = app.get_json("/articles/art-1/comments", None).await;
    let texts: Vec<&str> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["A", "A1", "A1x", "A1x1", "A1y", "A2", "B", "B1"]);
    let depths: Vec<i64> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["depth"].as_i64().unwrap())
        .collect();
    assert_eq!(depths, [0, 1, 2, 3, 2, 1, 0, 1]);
    assert_eq!(
        (page["count"].clone(), page["next_offset"].clone()),
        (json!(8), Value::Null)
    );
    // comment_count counts replies too.
    assert_eq!(
        app.get_json("/articles/art-1", None).await["comment_count"],
        8
    );

    let second = app
        .get_json("/articles/art-1/comments?limit=3&offset=3", None)
        .await;
    let texts: Vec<&str> = second["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["A1x1", "A1y", "A2"]);
    assert_eq!(second["next_offset"], 6);

    assert_problem(
        app.get("/articles/nope/comments", None).await,
        404,
        "article_not_found",
    )
    .await;
    assert_eq!(
        app.get_json("/articles/art-3/comments", None).await["count"],
        0
    );
}

#[tokio::test]
async fn unknown_comments_are_404() {
    let app = spawn_with_fixture().await;
    let unknown = uuid::Uuid::now_v7();
    assert_problem(
        app.get(&format!("/comments/{unknown}"), None).await,
        404,
        "comment_not_found",
    )
    .await;
    assert_problem(
        app.get("/comments/not-a-uuid", None).await,
        404,
        "comment_not_found",
    )
    .await;
    // An existing comment's id in another spelling names nothing.
    let created = create(&app, "w", json!({"article_id": "art-1", "text": "here"})).await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/comments/{id}"), None).await.status(),
        200
    );
    for spelling in [
        id.to_uppercase(),
        format!("urn:uuid:{id}"),
        id.replace('-', ""),
    ] {
        assert_problem(
            app.get(&format!("/comments/{spelling}"), None).await,
            404,
            "comment_not_found",
        )
        .await;
    }
    let response = app
        .client
        .post(app.url("/comments"))
        .json(&json!({"article_id": "art-1", "text": "x"}))
        .send()
        .await
        .unwrap();
    assert_problem(response, 401, "missing_token").await;
}

#[tokio::test]
async fn idempotency_key_replays_refuses_reuse_and_in_flight() {
    let app = spawn_with_fixture().await;
    let body = json!({"article_id": "art-1", "text": "once"});
    let first = app.post_comment("u1", &body, Some("key-1")).await;
    assert_eq!(first.status(), 201);
    assert!(!first.headers().contains_key("idempotency-replayed"));
    let location = first.headers()["location"].clone();
    let first_body: Value = first.json().await.unwrap();

    let replay = app.post_comment("u1", &body, Some("key-1")).await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    assert_eq!(replay.headers()["location"], location);
    assert_eq!(replay.json::<Value>().await.unwrap(), first_body);
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 1);

    let other_body = json!({"article_id": "art-1", "text": "twice"});
    assert_problem(
        app.post_comment("u1", &other_body, Some("key-1")).await,
        422,
        "idempotency_key_reused",
    )
    .await;
    // Keys are per caller: another caller's same key is a new request.
    assert_eq!(
        app.post_comment("u2", &body, Some("key-1")).await.status(),
        201
    );
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 2);

    // A request that failed validation stores nothing: the key stays free.
    let bad = json!({"article_id": "nope", "text": "x"});
    assert_problem(
        app.post_comment("u1", &bad, Some("key-2")).await,
        422,
        "unknown_article",
    )
    .await;
    assert_eq!(
        app.post_comment(
            "u1",
            &json!({"article_id": "art-2", "text": "x"}),
            Some("key-2")
        )
        .await
        .status(),
        201
    );

    // While another request holds the key (its transaction is open), a repeat is 409.
    let admin = app.admin().await;
    let mut holder = admin.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(news_service::idempotency::lock_key("u1", "key-3"))
        .execute(&mut *holder)
        .await
        .unwrap();
    assert_problem(
        app.post_comment("u1", &body, Some("key-3")).await,
        409,
        "idempotency_key_in_use",
    )
    .await;
    holder.rollback().await.unwrap();
    assert_eq!(
        app.post_comment("u1", &body, Some("key-3")).await.status(),
        201
    );

    let long_key = "k".repeat(256);
    for bad_key in ["", long_key.as_str(), "with space"] {
        assert_problem(
            app.post_comment("u1", &body, Some(bad_key)).await,
            400,
            "invalid_idempotency_key",
        )
        .await;
    }
}

#[tokio::test]
async fn concurrent_repeats_of_one_key_create_one_comment() {
    let app = spawn_with_fixture().await;
    let body = json!({"article_id": "art-1", "text": "race"});
    let responses = futures_util::future::join_all(
        (0..10).map(|_| app.post_comment("u1", &body, Some("race-key"))),
    )
    .await;
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 409),
        "{statuses:?}"
    );
    assert!(statuses.contains(&201));
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 1);
}

#[tokio::test]
async fn the_service_sweeps_expired_idempotency_keys() {
    let app = spawn_app().await;
    let pool = pool_as(&app.db, "news_app").await;
    let insert = "INSERT INTO idempotency_keys (caller_id, key, request_hash, response_status, \
                  response_body, location, created_at, expires_at) \
                  VALUES ('u1', $1, '\\x00', 201, '\\x7b7d', NULL, now() - interval '2 days', $2)";
    let expired = sqlx::query(insert)
        .bind("old")
        .bind(chrono::Utc::now() - chrono::Duration::days(1));
    expired.execute(&pool).await.unwrap();
    let live = sqlx::query(insert)
        .bind("fresh")
        .bind(chrono::Utc::now() + chrono::Duration::days(1));
    live.execute(&pool).await.unwrap();
    // A second service on the same database: its first sweep runs as it starts.
    let mut config = ServeConfig::new(app.db.url_for("news_app"), auth_config());
    config.idempotency_cleanup_secs = 1;
    let _second = Application::build(config).await.unwrap();
    let mut keys: Vec<String> = Vec::new();
    for _ in 0..50 {
        keys = sqlx::query_scalar("SELECT key FROM idempotency_keys ORDER BY key")
            .fetch_all(&pool)
            .await
            .unwrap();
        if keys == ["fresh"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(keys, ["fresh"]);
}

/// A refused create ends its transaction before it answers: the key's lock is free at once, so a
/// client correcting its request and retrying immediately is not told its key is in use. (A
/// transaction that is merely dropped is rolled back when its connection returns to the pool,
/// which this pool makes slow on purpose.)
#[tokio::test]
async fn a_refused_create_frees_its_key_before_it_answers() {
    let app = spawn_with_fixture().await;
    let options = PgConnectOptions::from_str(&app.db.url_for("news_app"))
        .unwrap()
        .options([("search_path", "news")]);
    let slow_to_return = PgPoolOptions::new()
        .max_connections(2)
        .after_release(|_, _| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok(true)
            })
        })
        .connect_with(options)
        .await
        .unwrap();
    let refused = news_service::idempotency::idempotent_create::<Value>(
        &slow_to_return,
        "u1",
        Some("retry-at-once"),
        &json!({"article_id": "nope"}),
        async |_| Err(news_service::ErrorCode::UnknownArticle.into()),
    )
    .await;
    assert!(refused.is_err());
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
         WHERE l.locktype = 'advisory' AND d.datname = current_database()",
    )
    .fetch_one(&app.admin().await)
    .await
    .unwrap();
    assert_eq!(held, 0, "the key was still locked after the answer");
}
