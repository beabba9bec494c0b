//! Article reads: the list with its filters and paging, one article, caching and viewer columns.

use std::collections::HashSet;

use news_service::store::articles::{ListSpec, list_query};
use serde_json::{Value, json};

use crate::helpers::{assert_problem, ids, pool_as, spawn_seeded, spawn_with_fixture};

fn expected_item(id: &str, org: (&str, &str), jrn: (&str, &str), published_at: &str) -> Value {
    let n = id.trim_start_matches("art-");
    let host = if org.0 == "org-a" { "alpha" } else { "beta" };
    json!({
        "id": id,
        "title": format!("Title {n}"),
        "summary": format!("Summary {n}"),
        "url": format!("https://{host}.example/{n}"),
        "published_at": published_at,
        "organization": {"id": org.0, "name": org.1},
        "journalist": {"id": jrn.0, "name": jrn.1},
        "organization_id": org.0,
        "journalist_id": jrn.0,
        "like_count": 0,
        "bookmark_count": 0,
        "comment_count": 0,
        "viewer": null,
    })
}

#[tokio::test]
async fn anonymous_list_has_the_contract_shape_newest_first_ties_by_id() {
    let app = spawn_with_fixture().await;
    let page = app.get_json("/articles", None).await;
    assert_eq!(ids(&page), ["art-4", "art-3", "art-2", "art-1", "art-5"]);
    assert_eq!(
        page["data"][0],
        expected_item(
            "art-4",
            ("org-b", "Beta Times"),
            ("jrn-3", "Bob Columnist"),
            "2026-01-03T08:00:00Z"
        )
    );
    assert_eq!(
        page["data"][2],
        expected_item(
            "art-2",
            ("org-a", "Alpha News"),
            ("jrn-2", "Amy Reporter"),
            "2026-01-02T10:00:00Z"
        )
    );
    assert_eq!(page["count"], 5);
    assert_eq!(page["limit"], 20);
    assert_eq!(page["offset"], 0);
    assert_eq!(page["next_offset"], Value::Null);
    assert_eq!(page["next_cursor"], Value::Null);
    let keys: HashSet<&str> = page
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        HashSet::from([
            "data",
            "count",
            "limit",
            "offset",
            "next_offset",
            "next_cursor"
        ])
    );
}

#[tokio::test]
async fn filters_and_offset_paging() {
    let app = spawn_with_fixture().await;
    let page = app.get_json("/articles?organization_id=org-a", None).await;
    assert_eq!(ids(&page), ["art-2", "art-1", "art-5"]);
    let page = app.get_json("/articles?journalist_id=jrn-3", None).await;
    assert_eq!(ids(&page), ["art-4", "art-3"]);
    let page = app
        .get_json("/articles?organization_id=org-a&journalist_id=jrn-1", None)
        .await;
    assert_eq!(ids(&page), ["art-1", "art-5"]);
    let page = app
        .get_json("/articles?organization_id=org-unknown", None)
        .await;
    assert_eq!(
        (page["count"].clone(), page["next_offset"].clone()),
        (json!(0), Value::Null)
    );

    let page = app.get_json("/articles?limit=2&offset=1", None).await;
    assert_eq!(ids(&page), ["art-3", "art-2"]);
    assert_eq!(
        (
            page["limit"].clone(),
            page["offset"].clone(),
            page["next_offset"].clone()
        ),
        (json!(2), json!(1), json!(3))
    );
    assert!(page["next_cursor"].is_string());
    // The cursor of an offset page continues right after it.
    let cursor = page["next_cursor"].as_str().unwrap();
    let next = app
        .get_json(&format!("/articles?limit=2&cursor={cursor}"), None)
        .await;
    assert_eq!(ids(&next), ["art-1", "art-5"]);
    assert_eq!(next["next_cursor"], Value::Null);
    assert_eq!(next["next_offset"], Value::Null);

    // An empty cursor is the same as none, with or without an offset.
    let first = app.get_json("/articles?limit=2", None).await;
    assert_eq!(app.get_json("/articles?limit=2&cursor=", None).await, first);
    let offset_page = app
        .get_json("/articles?limit=2&offset=1&cursor=", None)
        .await;
    assert_eq!(ids(&offset_page), ["art-3", "art-2"]);
}

#[tokio::test]
async fn paging_errors() {
    let app = spawn_with_fixture().await;
    let page = app.get_json("/articles?limit=1", None).await;
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let cases = [
        (
            format!("/articles?offset=0&cursor={cursor}"),
            400,
            "invalid_query",
        ),
        (
            "/articles?cursor=%21%21%21".to_owned(),
            400,
            "invalid_cursor",
        ),
        ("/articles?cursor=e30".to_owned(), 400, "invalid_cursor"),
        (
            format!("/articles?organization_id=org-b&cursor={cursor}"),
            400,
            "invalid_cursor",
        ),
        ("/articles?limit=0".to_owned(), 400, "invalid_query"),
        ("/articles?limit=101".to_owned(), 400, "invalid_query"),
        ("/articles?limit=abc".to_owned(), 400, "invalid_query"),
        ("/articles?offset=10001".to_owned(), 400, "invalid_query"),
        // Plain digits only: no sign, even on zero.
        ("/articles?offset=%2B0".to_owned(), 400, "invalid_query"),
        ("/articles?offset=-0".to_owned(), 400, "invalid_query"),
    ];
    for (path, status, code) in cases {
        assert_problem(app.get(&path, None).await, status, code).await;
    }
    // A feed cursor is not an article-list cursor.
    app.post("/organizations/org-a/follow", "u1").await;
    let feed = app.get_json("/me/feed?limit=1", Some("u1")).await;
    let feed_cursor = feed["next_cursor"].as_str().unwrap();
    assert_problem(
        app.get(&format!("/articles?cursor={feed_cursor}"), None)
            .await,
        400,
        "invalid_cursor",
    )
    .await;
}

#[tokio::test]
async fn one_article_has_its_body_and_404s_when_unknown() {
    let app = spawn_with_fixture().await;
    let article = app.get_json("/articles/art-3", None).await;
    let mut expected = expected_item(
        "art-3",
        ("org-b", "Beta Times"),
        ("jrn-3", "Bob Columnist"),
        "2026-01-02T10:00:00Z",
    );
    expected["body"] = json!("Body 3");
    assert_eq!(article, expected);
    let missing = app.get("/articles/art-999", None).await;
    // Not kept by a shared cache: the article may be published a minute later.
    assert_eq!(missing.headers()["cache-control"], "private, no-store");
    assert_problem(missing, 404, "article_not_found").await;
}

#[tokio::test]
async fn viewer_flags_for_a_caller_who_liked_one_of_two() {
    let app = spawn_with_fixture().await;
    assert_eq!(
        app.post("/articles/art-2/like", "reader").await.status(),
        200
    );
    assert_eq!(
        app.post("/journalists/jrn-2/follow", "reader")
            .await
            .status(),
        200
    );
    let page = app
        .get_json("/articles?organization_id=org-a&limit=2", Some("reader"))
        .await;
    assert_eq!(ids(&page), ["art-2", "art-1"]);
    assert_eq!(
        page["data"][0]["viewer"],
        json!({"liked": true, "bookmarked": false, "following_journalist": true, "following_organization": false})
    );
    assert_eq!(
        page["data"][1]["viewer"],
        json!({"liked": false, "bookmarked": false, "following_journalist": false, "following_organization": false})
    );
    assert_eq!(page["data"][0]["like_count"], 1);
    let article = app.get_json("/articles/art-1", Some("reader")).await;
    assert_eq!(article["viewer"]["liked"], false);
    let article = app.get_json("/articles/art-2", Some("reader")).await;
    assert_eq!(article["viewer"]["liked"], true);
    // Someone else sees the count but not the flag; anonymous readers get null.
    let other = app.get_json("/articles/art-2", Some("someone-else")).await;
    assert_eq!(
        (
            other["like_count"].clone(),
            other["viewer"]["liked"].clone()
        ),
        (json!(1), json!(false))
    );
    assert_eq!(
        app.get_json("/articles/art-2", None).await["viewer"],
        Value::Null
    );
}

#[tokio::test]
async fn anonymous_reads_are_cacheable_and_personal_ones_are_not() {
    let app = spawn_with_fixture().await;
    for path in ["/articles", "/articles/art-1"] {
        let response = app.get(path, None).await;
        assert_eq!(response.headers()["cache-control"], "public, max-age=30");
        let etag = response.headers()["etag"].to_str().unwrap().to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "strong ETag: {etag}"
        );
        let again = app.get(path, None).await;
        assert_eq!(
            again.headers()["etag"].to_str().unwrap(),
            etag,
            "same body, same ETag"
        );

        let response = app
            .client
            .get(app.url(path))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 304);
        assert_eq!(response.headers()["etag"].to_str().unwrap(), etag);
        assert!(response.bytes().await.unwrap().is_empty());
        let response = app
            .client
            .get(app.url(path))
            .header("if-none-match", "\"other\"")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);

        let personal = app.get(path, Some("reader")).await;
        assert_eq!(personal.status(), 200);
        assert_eq!(personal.headers()["cache-control"], "private, no-store");
        assert!(!personal.headers().contains_key("etag"));
    }
    // A change to the answer changes the ETag.
    let before = app.get("/articles/art-1", None).await.headers()["etag"].clone();
    app.post("/articles/art-1/like", "someone").await;
    let after = app.get("/articles/art-1", None).await.headers()["etag"].clone();
    assert_ne!(before, after);
}

/// Walks a list by cursor and checks it visits exactly the rows of the database's own ordering.
async fn walk(app: &crate::helpers::TestApp, filter: &str, limit: usize) -> Vec<String> {
    let mut seen = Vec::new();
    let mut path = format!("/articles?limit={limit}{filter}");
    loop {
        let page = app.get_json(&path, None).await;
        seen.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/articles?limit={limit}&cursor={cursor}"),
            None => break,
        }
    }
    seen
}

#[tokio::test]
async fn cursor_paging_visits_every_article_once_even_with_ties() {
    let app = spawn_seeded(300).await;
    // Forty more articles sharing one published_at, by two organisations: ties across pages.
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id) \
         SELECT 'tie-' || lpad(n::text, 3, '0'), 'Tie ' || n, 's', 'b', 'https://x.example/' || n, \
                '2026-03-01T12:00:00Z', CASE WHEN n % 2 = 0 THEN 'org-001' ELSE 'org-002' END, \
                CASE WHEN n % 2 = 0 THEN 'jrn-0001' ELSE 'jrn-0002' END \
         FROM generate_series(1, 40) AS n",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let admin = app.admin().await;
    let expected: Vec<String> =
        sqlx::query_scalar("SELECT id FROM articles ORDER BY published_at DESC, id DESC")
            .fetch_all(&admin)
            .await
            .unwrap();
    assert_eq!(expected.len(), 340);
    assert_eq!(walk(&app, "", 7).await, expected);

    let expected_org: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM articles WHERE organization_id = 'org-001' ORDER BY published_at DESC, id DESC",
    )
    .fetch_all(&admin)
    .await
    .unwrap();
    // The cursor carries the filter: pages after the first need not repeat it.
    assert_eq!(
        walk(&app, "&organization_id=org-001", 3).await,
        expected_org
    );
}

fn plan_text(rows: &[String]) -> String {
    rows.join("\n")
}

#[tokio::test]
async fn a_deep_cursor_page_is_an_index_range_scan_without_sort() {
    let app = spawn_seeded(5000).await;
    let admin = app.admin().await;
    sqlx::raw_sql("ANALYZE articles; ANALYZE organizations; ANALYZE journalists")
        .execute(&admin)
        .await
        .unwrap();
    let (published_at, id): (chrono::DateTime<chrono::Utc>, String) = sqlx::query_as(
        "SELECT published_at, id FROM articles ORDER BY published_at DESC, id DESC OFFSET 4000 LIMIT 1",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    let app_pool = pool_as(&app.db, "news_app").await;
    // (spec, index, strictly no Sort). A filtered list whose remainder after the cursor is a
    // handful of rows may be sorted by the planner after the index range scan: a sort of those
    // few rows, never of the table.
    let cases = [
        (ListSpec::default(), "articles_published_idx", true),
        (
            ListSpec {
                viewer: Some("reader".into()),
                ..ListSpec::default()
            },
            "articles_published_idx",
            true,
        ),
        (
            ListSpec {
                organization_id: Some("org-003".into()),
                ..ListSpec::default()
            },
            "articles_organization_published_idx",
            false,
        ),
        (
            ListSpec {
                journalist_id: Some("jrn-0007".into()),
                ..ListSpec::default()
            },
            "articles_journalist_published_idx",
            false,
        ),
    ];
    for (mut spec, index, no_sort) in cases {
        spec.after = Some((published_at, id.clone()));
        spec.limit = 21;
        let rows: Vec<String> = list_query("EXPLAIN ", &spec)
            .build_query_scalar()
            .fetch_all(&app_pool)
            .await
            .unwrap();
        let plan = plan_text(&rows);
        assert!(plan.contains(index), "expected {index}:\n{plan}");
        // The cursor is a range condition of the index scan, not a filter over scanned rows.
        let range = rows
            .iter()
            .any(|l| l.contains("Index Cond") && l.contains("ROW(published_at, id) < ROW("));
        assert!(range, "cursor not used as an index range:\n{plan}");
        assert!(
            !plan.contains("Seq Scan on articles"),
            "no full scan expected:\n{plan}"
        );
        if no_sort {
            assert!(!plan.contains("Sort"), "no sort expected:\n{plan}");
        }
    }
}

/// Ids are opaque strings: a path segment that is not UTF-8 once decoded names nothing (the
/// resource's 404, not axum's 400).
#[tokio::test]
async fn non_utf8_ids_are_not_found() {
    let app = spawn_with_fixture().await;
    for user in [None, Some("u1")] {
        let response = app.get("/articles/%FF", user).await;
        assert_problem(response, 404, "article_not_found").await;
        let response = app.get("/articles/%FF/comments", user).await;
        assert_problem(response, 404, "article_not_found").await;
        let response = app.get("/comments/%FF", user).await;
        assert_problem(response, 404, "comment_not_found").await;
    }
    for (path, code) in [
        ("/articles/%FF/like", "article_not_found"),
        ("/articles/a%FFb/bookmark", "article_not_found"),
        ("/journalists/%FF/follow", "journalist_not_found"),
        ("/organizations/%FF/follow", "organization_not_found"),
    ] {
        assert_problem(app.post(path, "u1").await, 404, code).await;
        assert_problem(app.delete(path, "u1").await, 404, code).await;
    }
}

/// Postgres text cannot hold U+0000: an id or filter with it names nothing (404 / empty page),
/// a comment text with it is 422, never a 500 (found by fuzzing the OpenAPI document).
#[tokio::test]
async fn nul_characters_are_unknown_ids_or_invalid_text_not_server_errors() {
    let app = spawn_with_fixture().await;
    for user in [None, Some("u1")] {
        let response = app.get("/articles/art%00", user).await;
        assert_problem(response, 404, "article_not_found").await;
        let response = app.get("/articles/%00/comments", user).await;
        assert_problem(response, 404, "article_not_found").await;
        for list in [
            "/articles?organization_id=%00",
            "/articles?journalist_id=jrn-1%00",
            "/journalists?organization_id=org-a%00",
        ] {
            let page = app.get_json(list, user).await;
            assert_eq!(page["count"], 0, "{list}");
        }
    }
    for path in [
        "/articles/art-1%00/like",
        "/articles/%00/bookmark",
        "/journalists/%00/follow",
        "/organizations/org-a%00/follow",
    ] {
        let response = app.post(path, "u1").await;
        assert_eq!(response.status(), 404, "{path}");
        let response = app.delete(path, "u1").await;
        assert_eq!(response.status(), 404, "{path}");
    }
    let response = app
        .post_comment(
            "u1",
            &json!({"article_id": "art-1", "text": "a\u{0}b"}),
            None,
        )
        .await;
    let body = assert_problem(response, 422, "validation_failed").await;
    assert_eq!(body["errors"][0]["field"], "text");
    let response = app
        .post_comment(
            "u1",
            &json!({"article_id": "art-1\u{0}", "text": "ab"}),
            None,
        )
        .await;
    assert_problem(response, 422, "unknown_article").await;
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM likes").await, 0);
}
