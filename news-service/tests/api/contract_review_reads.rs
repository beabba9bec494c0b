//! An outside review of the news reads against the contract (docs/news.md, docs/conventions.md):
//! `viewer` on every endpoint that has one, tokens at optional endpoints, caching on every
//! anonymous read, 405 on every route, request ids.

use reqwest::Method;
use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::helpers::{TestApp, assert_problem, spawn_with_fixture};

/// Every optional read, with a path that answers 200 for the fixture (and a comment).
async fn optional_reads(app: &TestApp) -> Vec<String> {
    let comment = app
        .post_comment("w", &json!({"article_id": "art-1", "text": "hello"}), None)
        .await;
    assert_eq!(comment.status(), 201);
    let id = comment.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    vec![
        "/articles".into(),
        "/articles?organization_id=org-a".into(),
        "/articles/art-1".into(),
        "/articles/art-1/comments".into(),
        format!("/comments/{id}"),
        "/organizations".into(),
        "/journalists".into(),
        "/journalists?organization_id=org-a".into(),
        "/search?q=title".into(),
    ]
}

async fn get_with_authorization(
    app: &TestApp,
    path: &str,
    authorization: &str,
) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .header("authorization", authorization)
        .send()
        .await
        .unwrap()
}

/// An optional endpoint with an invalid token fails closed: 401 `invalid_token` with the
/// challenge; a header that is not `Bearer <token>` is 401 `invalid_authorization_header`.
#[tokio::test]
async fn every_optional_read_refuses_a_bad_credential() {
    let app = spawn_with_fixture().await;
    for path in optional_reads(&app).await {
        let response = get_with_authorization(&app, &path, "Bearer not.a.jwt").await;
        let challenge = response.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with("Bearer realm=\"lingo-news\", error=\"invalid_token\""),
            "{path}: {challenge}"
        );
        assert_problem(response, 401, "invalid_token").await;

        for header in ["Basic dTpw", "Bearer", "Bearer a b", ""] {
            let response = get_with_authorization(&app, &path, header).await;
            assert_eq!(
                response.headers()["www-authenticate"],
                "Bearer realm=\"lingo-news\", error=\"invalid_request\"",
                "{path} with {header:?}"
            );
            assert_problem(response, 401, "invalid_authorization_header").await;
        }
    }
}

/// Required endpoints without a header: 401 `missing_token` and the bare challenge.
#[tokio::test]
async fn every_required_endpoint_wants_a_token() {
    let app = spawn_with_fixture().await;
    let cases = [
        (Method::GET, "/me/bookmarks"),
        (Method::GET, "/me/following"),
        (Method::GET, "/me/feed"),
        (Method::POST, "/articles/art-1/like"),
        (Method::DELETE, "/articles/art-1/like"),
        (Method::POST, "/articles/art-1/bookmark"),
        (Method::DELETE, "/articles/art-1/bookmark"),
        (Method::POST, "/journalists/jrn-1/follow"),
        (Method::DELETE, "/journalists/jrn-1/follow"),
        (Method::POST, "/organizations/org-a/follow"),
        (Method::DELETE, "/organizations/org-a/follow"),
        (Method::POST, "/comments"),
    ];
    for (method, path) in cases {
        let response = app.request(method.clone(), path, None).await;
        assert_eq!(
            response.headers()["www-authenticate"],
            "Bearer realm=\"lingo-news\"",
            "{method} {path}"
        );
        assert_problem(response, 401, "missing_token").await;
    }
    assert_eq!(
        app.count("SELECT (SELECT count(*) FROM likes) + (SELECT count(*) FROM comments)")
            .await,
        0
    );
}

fn article_viewer(liked: bool, bookmarked: bool, journalist: bool, organization: bool) -> Value {
    json!({"liked": liked, "bookmarked": bookmarked,
           "following_journalist": journalist, "following_organization": organization})
}

/// `viewer` is null without a token and the four flags with one, on the list, the article, search
/// hits, bookmarks and the feed; `{following}` or null on organisations and journalists.
#[tokio::test]
async fn viewer_is_null_anonymously_and_exact_with_a_token_on_every_endpoint() {
    let app = spawn_with_fixture().await;
    for path in [
        "/articles/art-4/like",
        "/articles/art-4/bookmark",
        "/journalists/jrn-3/follow",
        "/organizations/org-b/follow",
    ] {
        assert_eq!(app.post(path, "me").await.status(), 200, "{path}");
    }
    // Somebody else's engagement must not show in my viewer.
    app.post("/articles/art-1/like", "other").await;
    app.post("/organizations/org-a/follow", "other").await;

    let all = article_viewer(true, true, true, true);
    let none = article_viewer(false, false, false, false);
    let find = |page: &Value, id: &str| -> Value {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {page}"))
            .clone()
    };

    for path in ["/articles", "/search?q=title&sort=newest"] {
        let anonymous = app.get_json(path, None).await;
        for item in anonymous["data"].as_array().unwrap() {
            assert_eq!(item["viewer"], Value::Null, "{path}: {item}");
        }
        let mine = app.get_json(path, Some("me")).await;
        assert_eq!(find(&mine, "art-4")["viewer"], all, "{path}");
        assert_eq!(find(&mine, "art-1")["viewer"], none, "{path}");
        // Same journalist and organisation as art-4, neither liked nor bookmarked.
        assert_eq!(
            find(&mine, "art-3")["viewer"],
            article_viewer(false, false, true, true),
            "{path}"
        );
    }
    assert_eq!(
        app.get_json("/articles/art-4", None).await["viewer"],
        Value::Null
    );
    assert_eq!(
        app.get_json("/articles/art-4", Some("me")).await["viewer"],
        all
    );
    assert_eq!(
        app.get_json("/articles/art-1", Some("me")).await["viewer"],
        none
    );

    let bookmarks = app.get_json("/me/bookmarks", Some("me")).await;
    assert_eq!(find(&bookmarks, "art-4")["viewer"], all);
    let feed = app.get_json("/me/feed", Some("me")).await;
    assert_eq!(find(&feed, "art-4")["viewer"], all);

    let organizations = app.get_json("/organizations", None).await;
    for item in organizations["data"].as_array().unwrap() {
        assert_eq!(item["viewer"], Value::Null, "{item}");
    }
    let organizations = app.get_json("/organizations", Some("me")).await;
    assert_eq!(
        find(&organizations, "org-b")["viewer"],
        json!({"following": true})
    );
    assert_eq!(
        find(&organizations, "org-a")["viewer"],
        json!({"following": false})
    );
    assert_eq!(find(&organizations, "org-a")["follower_count"], 1);

    let journalists = app.get_json("/journalists", None).await;
    for item in journalists["data"].as_array().unwrap() {
        assert_eq!(item["viewer"], Value::Null, "{item}");
    }
    let journalists = app.get_json("/journalists", Some("me")).await;
    assert_eq!(
        find(&journalists, "jrn-3")["viewer"],
        json!({"following": true})
    );
    assert_eq!(
        find(&journalists, "jrn-1")["viewer"],
        json!({"following": false})
    );
}

/// Every anonymous read is cacheable with a strong ETag and revalidates to 304; with a token it
/// is `private, no-store` without an ETag.
#[tokio::test]
async fn every_anonymous_read_is_cacheable_and_every_personal_one_is_not() {
    let app = spawn_with_fixture().await;
    for path in optional_reads(&app).await {
        let response = app.get(&path, None).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["cache-control"],
            "public, max-age=30",
            "{path}"
        );
        let etag = response.headers()["etag"].to_str().unwrap().to_owned();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "{path}: strong ETag {etag}"
        );

        let revalidated = app
            .client
            .get(app.url(&path))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(revalidated.status(), 304, "{path}");
        assert_eq!(
            revalidated.headers()["cache-control"],
            "public, max-age=30",
            "{path}"
        );
        assert!(revalidated.headers().contains_key("x-request-id"), "{path}");
        assert_eq!(
            revalidated.headers()["etag"].to_str().unwrap(),
            etag,
            "{path}"
        );

        let personal = app.get(&path, Some("reader")).await;
        assert_eq!(personal.status(), 200, "{path}");
        assert_eq!(
            personal.headers()["cache-control"],
            "private, no-store",
            "{path}"
        );
        assert!(!personal.headers().contains_key("etag"), "{path}");
    }
    for path in ["/me/bookmarks", "/me/following", "/me/feed"] {
        let personal = app.get(path, Some("reader")).await;
        assert_eq!(personal.status(), 200, "{path}");
        assert_eq!(
            personal.headers()["cache-control"],
            "private, no-store",
            "{path}"
        );
        assert!(!personal.headers().contains_key("etag"), "{path}");
    }
}

/// `If-None-Match` as RFC 9110 reads it: a list matches when any member does, `*` matches any
/// current representation, and the comparison is weak (`W/"x"` matches `"x"`).
#[tokio::test]
async fn if_none_match_lists_star_and_weak_tags() {
    let app = spawn_with_fixture().await;
    let path = "/articles/art-2";
    let etag = app.get(path, None).await.headers()["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    let status_with = |value: String| {
        let request = app.client.get(app.url(path)).header("if-none-match", value);
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(
        status_with(format!("\"a\", {etag}, \"b\"")).await,
        304,
        "list"
    );
    assert_eq!(
        status_with(format!("\"a\",{etag}")).await,
        304,
        "list without spaces"
    );
    assert_eq!(status_with("*".into()).await, 304, "star");
    assert_eq!(
        status_with(format!("W/{etag}")).await,
        304,
        "weak comparison"
    );
    assert_eq!(
        status_with("\"a\", \"b\"".into()).await,
        200,
        "no member matches"
    );
    // A personal read never answers 304: it has no validator.
    let personal = app
        .client
        .get(app.url(path))
        .bearer_auth(token("reader"))
        .header("if-none-match", "*")
        .send()
        .await
        .unwrap();
    assert_eq!(personal.status(), 200);
}

/// Every route answers a method it does not have with 405, an `Allow` header listing exactly its
/// methods, and a problem whose `detail` names each of them.
#[tokio::test]
async fn every_route_answers_405_with_allow_and_a_detail_naming_the_methods() {
    let app = spawn_with_fixture().await;
    let routes: [(&str, &[&str]); 14] = [
        ("/articles", &["GET"]),
        ("/articles/art-1", &["GET"]),
        ("/articles/art-1/comments", &["GET"]),
        ("/articles/art-1/like", &["POST", "DELETE"]),
        ("/articles/art-1/bookmark", &["POST", "DELETE"]),
        ("/journalists/jrn-1/follow", &["POST", "DELETE"]),
        ("/organizations/org-a/follow", &["POST", "DELETE"]),
        ("/organizations", &["GET"]),
        ("/journalists", &["GET"]),
        ("/comments", &["POST"]),
        ("/comments/0193a000-0000-7000-8000-000000000000", &["GET"]),
        ("/me/bookmarks", &["GET"]),
        ("/me/following", &["GET"]),
        ("/me/feed", &["GET"]),
    ];
    for (path, allowed) in routes {
        let refused = if allowed.contains(&"GET") {
            Method::PUT
        } else {
            Method::PATCH
        };
        let response = app.request(refused.clone(), path, Some("u")).await;
        let allow = response
            .headers()
            .get("allow")
            .unwrap_or_else(|| panic!("{refused} {path}: no Allow"))
            .to_str()
            .unwrap()
            .to_owned();
        let body = assert_problem(response, 405, "method_not_allowed").await;
        let detail = body["detail"].as_str().unwrap_or_default().to_owned();
        let listed: Vec<&str> = allow.split(',').map(str::trim).collect();
        for method in allowed {
            assert!(listed.contains(method), "{path}: Allow {allow}");
            assert!(detail.contains(method), "{path}: detail {detail}");
        }
        assert!(!listed.contains(&refused.as_str()), "{path}: Allow {allow}");
    }
    // The search route too.
    let response = app.request(Method::POST, "/search?q=x", None).await;
    assert!(
        response.headers()["allow"]
            .to_str()
            .unwrap()
            .contains("GET")
    );
    assert_problem(response, 405, "method_not_allowed").await;
}

/// An unknown route is 404 `not_found` as a problem; a sane `x-request-id` comes back as sent, an
/// insane one is replaced, and every answer (problems included) carries one.
#[tokio::test]
async fn unknown_routes_and_request_ids() {
    let app = spawn_with_fixture().await;
    let response = app.get("/no-such-thing", None).await;
    assert!(response.headers().contains_key("x-request-id"));
    assert_problem(response, 404, "not_found").await;

    let sane = "0193a5b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    for path in ["/articles", "/articles/unknown", "/no-such-thing"] {
        let response = app
            .client
            .get(app.url(path))
            .header("x-request-id", sane)
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["x-request-id"], sane, "{path}");
        if response.status() != 200 {
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["request_id"], sane, "{path}: {body}");
        }
    }
    let insane = "x".repeat(2_000);
    let response = app
        .client
        .get(app.url("/articles"))
        .header("x-request-id", &insane)
        .send()
        .await
        .unwrap();
    let id = response.headers()["x-request-id"].to_str().unwrap();
    assert!(!id.is_empty() && id != insane, "replaced: {id}");
}

/// Every problem is `application/problem+json` with `type`, `title`, `status`, `code` and the
/// `request_id` that the `x-request-id` header carries, whichever layer refused the request.
#[tokio::test]
async fn every_problem_carries_its_request_id() {
    let app = spawn_with_fixture().await;
    let bearer = token("u");
    let requests = [
        app.client.get(format!("{}/nowhere", app.address)),
        app.client.get(app.url("/articles/nope")),
        app.client.get(app.url("/articles?limit=0")),
        app.client.delete(app.url("/articles")),
        app.client.get(app.url("/me/feed")),
        app.client
            .post(app.url("/comments"))
            .bearer_auth(&bearer)
            .header("content-type", "text/plain")
            .body("x"),
        app.client
            .post(app.url("/comments"))
            .bearer_auth(&bearer)
            .header("content-type", "application/json")
            .body("{"),
        app.client
            .post(app.url("/comments"))
            .bearer_auth(&bearer)
            .json(&json!({"text": 1})),
        app.client
            .post(app.url("/comments"))
            .bearer_auth(&bearer)
            .header("content-type", "application/json")
            .body(format!(r#"{{"text":"{}"}}"#, "a".repeat(200 * 1024))),
    ];
    for request in requests {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        assert!(status >= 400, "{status}");
        let header = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            content_type.starts_with("application/problem+json"),
            "{status}: {content_type}"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["request_id"], header.as_str(), "{body}");
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(body["type"], "about:blank", "{body}");
        assert!(
            body["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{body}"
        );
        assert!(
            body["code"].as_str().is_some_and(|c| !c.is_empty()),
            "{body}"
        );
    }
}
