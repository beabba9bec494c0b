//! Likes, bookmarks and follows: idempotent add and remove, exact counts, unknown targets.

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::helpers::{assert_problem, spawn_with_fixture};

/// (path, id field, flag field, count field, edge table, unknown path, 404 code)
const EDGES: [(&str, &str, &str, &str, &str, &str, &str); 4] = [
    (
        "/articles/art-1/like",
        "article_id",
        "liked",
        "like_count",
        "likes",
        "/articles/nope/like",
        "article_not_found",
    ),
    (
        "/articles/art-1/bookmark",
        "article_id",
        "bookmarked",
        "bookmark_count",
        "bookmarks",
        "/articles/nope/bookmark",
        "article_not_found",
    ),
    (
        "/journalists/jrn-1/follow",
        "journalist_id",
        "following",
        "follower_count",
        "journalist_follows",
        "/journalists/nope/follow",
        "journalist_not_found",
    ),
    (
        "/organizations/org-a/follow",
        "organization_id",
        "following",
        "follower_count",
        "organization_follows",
        "/organizations/nope/follow",
        "organization_not_found",
    ),
];

fn target_of(path: &str) -> &str {
    path.split('/').nth(2).unwrap()
}

#[tokio::test]
async fn post_and_delete_are_idempotent_with_exact_counts() {
    let app = spawn_with_fixture().await;
    for (path, id_field, flag, count, table, _, _) in EDGES {
        let on = |n: i64| json!({id_field: target_of(path), flag: true, count: n});
        let off = |n: i64| json!({id_field: target_of(path), flag: false, count: n});

        let first = app.post(path, "u1").await;
        assert_eq!(first.status(), 200, "{path}");
        assert_eq!(first.json::<Value>().await.unwrap(), on(1), "{path}");
        let repeat: Value = app.post(path, "u1").await.json().await.unwrap();
        assert_eq!(repeat, on(1), "repeating {path} changes nothing");
        let second_user: Value = app.post(path, "u2").await.json().await.unwrap();
        assert_eq!(second_user, on(2));
        assert_eq!(app.count(&format!("SELECT count(*) FROM {table}")).await, 2);

        let removed = app.delete(path, "u1").await;
        assert_eq!(removed.status(), 200);
        assert_eq!(removed.json::<Value>().await.unwrap(), off(1));
        let repeat: Value = app.delete(path, "u1").await.json().await.unwrap();
        assert_eq!(repeat, off(1), "repeating DELETE {path} changes nothing");
        assert_eq!(app.count(&format!("SELECT count(*) FROM {table}")).await, 1);
    }
    // The counts in the article answer agree with the engagement answers.
    let article = app.get_json("/articles/art-1", None).await;
    assert_eq!(
        (
            article["like_count"].clone(),
            article["bookmark_count"].clone()
        ),
        (json!(1), json!(1))
    );
}

/// The answer to a write is the caller's own (their flag, the count they just changed): no cache
/// may keep it, and a comment's 201 likewise.
#[tokio::test]
async fn answers_to_writes_are_private() {
    let app = spawn_with_fixture().await;
    let private = |response: &reqwest::Response| {
        response
            .headers()
            .get("cache-control")
            .map(|value| value.to_str().unwrap().to_owned())
    };
    for (path, ..) in EDGES {
        for response in [app.post(path, "u1").await, app.delete(path, "u1").await] {
            assert_eq!(response.status(), 200, "{path}");
            assert_eq!(
                private(&response).as_deref(),
                Some("private, no-store"),
                "{path}"
            );
        }
    }
    let body = json!({"article_id": "art-1", "text": "mine"});
    let created = app.post_comment("u1", &body, None).await;
    assert_eq!(created.status(), 201);
    assert_eq!(private(&created).as_deref(), Some("private, no-store"));
}

#[tokio::test]
async fn an_unknown_target_is_404_and_writes_nothing() {
    let app = spawn_with_fixture().await;
    for (_, _, _, _, table, unknown, code) in EDGES {
        assert_problem(app.post(unknown, "u1").await, 404, code).await;
        assert_problem(app.delete(unknown, "u1").await, 404, code).await;
        assert_eq!(
            app.count(&format!("SELECT count(*) FROM {table}")).await,
            0,
            "{table}"
        );
    }
}

#[tokio::test]
async fn engagement_needs_a_token() {
    let app = spawn_with_fixture().await;
    for (path, ..) in EDGES {
        let response = app.client.post(app.url(path)).send().await.unwrap();
        assert_problem(response, 401, "missing_token").await;
        let response = app.client.delete(app.url(path)).send().await.unwrap();
        assert_problem(response, 401, "missing_token").await;
    }
}

#[tokio::test]
async fn hundred_users_liking_at_once_count_100_and_one_user_20_times_counts_1() {
    let app = spawn_with_fixture().await;
    let users: Vec<String> = (0..100).map(|i| format!("user-{i}")).collect();
    let responses = join_all(users.iter().map(|u| app.post("/articles/art-1/like", u))).await;
    assert!(responses.iter().all(|r| r.status() == 200));
    assert_eq!(
        app.get_json("/articles/art-1", None).await["like_count"],
        100
    );

    let responses = join_all((0..20).map(|_| app.post("/articles/art-2/like", "same-user"))).await;
    assert!(responses.iter().all(|r| r.status() == 200));
    let article = app.get_json("/articles/art-2", Some("same-user")).await;
    assert_eq!(
        (
            article["like_count"].clone(),
            article["viewer"]["liked"].clone()
        ),
        (json!(1), json!(true))
    );
    assert_eq!(
        app.count("SELECT count(*) FROM likes WHERE article_id = 'art-2'")
            .await,
        1
    );
}

#[tokio::test]
async fn counts_equal_rows_after_a_concurrent_mix_of_likes_and_unlikes() {
    let app = spawn_with_fixture().await;
    let calls = (0..120).map(|i| {
        let user = format!("user-{}", i % 30);
        let app = &app;
        async move {
            if i % 3 == 0 {
                app.delete("/articles/art-3/like", &user).await
            } else {
                app.post("/articles/art-3/like", &user).await
            }
        }
    });
    let responses = join_all(calls).await;
    let refused: Vec<_> = responses
        .iter()
        .map(|r| r.status())
        .filter(|status| *status != 200)
        .collect();
    assert!(refused.is_empty(), "answers other than 200: {refused:?}");
    let rows = app
        .count("SELECT count(*) FROM likes WHERE article_id = 'art-3'")
        .await;
    assert_eq!(
        app.get_json("/articles/art-3", None).await["like_count"],
        rows
    );
    let page = app.get_json("/articles?journalist_id=jrn-3", None).await;
    assert_eq!(page["data"][1]["like_count"], rows);
}

#[tokio::test]
async fn one_callers_concurrent_adds_and_removes_answer_a_flag_their_count_agrees_with() {
    // Only this caller touches these targets: an answer saying the edge exists must count
    // exactly 1, one saying it does not must count 0. (The count used to be read after the
    // request's own write with nothing stopping the same caller's opposite request in between.)
    let app = spawn_with_fixture().await;
    for (path, _, flag, count, ..) in EDGES {
        let calls = (0..40).map(|i| {
            let app = &app;
            async move {
                if i % 2 == 0 {
                    app.post(path, "alone").await
                } else {
                    app.delete(path, "alone").await
                }
            }
        });
        for response in join_all(calls).await {
            assert_eq!(response.status(), 200);
            let body: Value = response.json().await.unwrap();
            let expected = if body[flag] == json!(true) { 1 } else { 0 };
            assert_eq!(body[count], expected, "{path}: {body}");
        }
    }
}
