//! An outside review of the edges of the news contract (docs/news.md, docs/conventions.md):
//! tokens at the service, the exact body limit, which problem wins, and lists at their edges.

use chrono::{DateTime, FixedOffset};
use reqwest::Method;
use serde_json::{Value, json};
use shared_auth::testing::{default_claims, token, token_with_claims};

use crate::helpers::{TestApp, assert_problem, ids, spawn_with_fixture};

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims_with(change: impl FnOnce(&mut Value)) -> String {
    let mut claims = default_claims("reader");
    change(&mut claims);
    token_with_claims(claims)
}

async fn get_as(app: &TestApp, path: &str, bearer: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .bearer_auth(bearer)
        .send()
        .await
        .unwrap()
}

/// The claims rules hold at the service, on an optional and on a required endpoint alike.
#[tokio::test]
async fn claims_are_checked_at_the_service() {
    let app = spawn_with_fixture().await;
    let t = now();
    let refused = [
        (
            "expired past the leeway",
            claims_with(|c| c["exp"] = json!(t - 120)),
        ),
        (
            "exp a string",
            claims_with(|c| c["exp"] = json!((t + 3600).to_string())),
        ),
        (
            "no exp",
            claims_with(|c| drop(c.as_object_mut().unwrap().remove("exp"))),
        ),
        (
            "nbf past the leeway",
            claims_with(|c| c["nbf"] = json!(t + 600)),
        ),
        (
            "iat in the future",
            claims_with(|c| c["iat"] = json!(t + 600)),
        ),
        (
            "no sub",
            claims_with(|c| drop(c.as_object_mut().unwrap().remove("sub"))),
        ),
        ("empty sub", claims_with(|c| c["sub"] = json!(""))),
        (
            "sub of 256",
            claims_with(|c| c["sub"] = json!("s".repeat(256))),
        ),
        (
            "sub with a control",
            claims_with(|c| c["sub"] = json!("a\u{1}b")),
        ),
        (
            "wrong iss",
            claims_with(|c| c["iss"] = json!("someone-else")),
        ),
        (
            "iss an array",
            claims_with(|c| c["iss"] = json!(["lingo-news-dev"])),
        ),
        (
            "no iss",
            claims_with(|c| drop(c.as_object_mut().unwrap().remove("iss"))),
        ),
        ("wrong aud", claims_with(|c| c["aud"] = json!("other"))),
        (
            "no aud",
            claims_with(|c| drop(c.as_object_mut().unwrap().remove("aud"))),
        ),
        ("alg none", unsigned(&default_claims("reader"))),
    ];
    for (case, bearer) in &refused {
        for path in ["/articles", "/me/feed"] {
            let response = get_as(&app, path, bearer).await;
            let challenge = response.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .to_owned();
            assert!(
                challenge.contains("error=\"invalid_token\"")
                    && challenge.contains("error_description="),
                "{case} at {path}: {challenge}"
            );
            assert_problem(response, 401, "invalid_token").await;
        }
    }
    let accepted = [
        (
            "expired within the leeway",
            claims_with(|c| c["exp"] = json!(t - 20)),
        ),
        (
            "nbf within the leeway",
            claims_with(|c| c["nbf"] = json!(t + 20)),
        ),
        (
            "sub of 255",
            claims_with(|c| c["sub"] = json!("s".repeat(255))),
        ),
        (
            "aud an array holding it",
            claims_with(|c| c["aud"] = json!(["x", "lingo-news"])),
        ),
        (
            "a scope",
            claims_with(|c| c["scope"] = json!("news:read other")),
        ),
    ];
    for (case, bearer) in &accepted {
        for path in ["/articles", "/me/feed"] {
            let response = get_as(&app, path, bearer).await;
            assert_eq!(response.status(), 200, "{case} at {path}");
        }
    }
}

/// `{"alg":"none"}` with the given claims and an empty signature.
fn unsigned(claims: &Value) -> String {
    format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        base64url(claims.to_string().as_bytes())
    )
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The authentication scheme is case-insensitive (RFC 9110 11.1): `bearer` is `Bearer`.
#[tokio::test]
async fn the_scheme_is_case_insensitive() {
    let app = spawn_with_fixture().await;
    for scheme in ["bearer", "BEARER"] {
        let response = app
            .client
            .get(app.url("/me/feed"))
            .header("authorization", format!("{scheme} {}", token("reader")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{scheme}");
    }
}

/// A bad credential is answered before anything about the body: 401 whatever the body is.
#[tokio::test]
async fn authentication_is_answered_before_the_body() {
    let app = spawn_with_fixture().await;
    let bodies: [(&str, String); 3] = [
        ("text/plain", "hello".into()),
        ("application/json", "{".into()),
        (
            "application/json",
            format!(r#"{{"x":"{}"}}"#, "a".repeat(200 * 1024)),
        ),
    ];
    for (content_type, body) in bodies {
        let response = app
            .client
            .post(app.url("/comments"))
            .header("content-type", content_type)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_problem(response, 401, "missing_token").await;
        let response = app
            .client
            .post(app.url("/comments"))
            .bearer_auth("not.a.token")
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_problem(response, 401, "invalid_token").await;
    }
}

/// "at most 128 KiB at the services": a body of exactly 131,072 bytes is read, one byte more is
/// 413, whether its length is declared or it comes in chunks.
#[tokio::test]
async fn the_body_limit_is_exactly_128_kib() {
    let app = spawn_with_fixture().await;
    let body_of = |size: usize| {
        let head = r#"{"article_id": "art-1", "text": "at the limit""#;
        let padding = size - head.len() - 1;
        format!("{head}{}}}", " ".repeat(padding))
    };
    let post = |body: reqwest::Body| {
        app.client
            .post(app.url("/comments"))
            .bearer_auth(token("u"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let exact = body_of(128 * 1024);
    assert_eq!(exact.len(), 131_072);
    assert_eq!(post(exact.clone().into()).await.unwrap().status(), 201);
    let over = body_of(128 * 1024 + 1);
    assert_problem(
        post(over.clone().into()).await.unwrap(),
        413,
        "payload_too_large",
    )
    .await;

    let chunked = |body: String| {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body
            .into_bytes()
            .chunks(1000)
            .map(|c| Ok(c.to_vec()))
            .collect();
        reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
    };
    assert_eq!(post(chunked(exact)).await.unwrap().status(), 201);
    assert_problem(post(chunked(over)).await.unwrap(), 413, "payload_too_large").await;
    assert_eq!(app.count("SELECT count(*) FROM comments").await, 2);
}

/// An article's comments: unknown article 404 `article_not_found` (also by method HEAD-less GET
/// of a not-UUID comment), an article without comments an empty page.
#[tokio::test]
async fn comments_of_unknown_and_quiet_articles() {
    let app = spawn_with_fixture().await;
    assert_problem(
        app.get("/articles/nope/comments", None).await,
        404,
        "article_not_found",
    )
    .await;
    assert_problem(
        app.get("/articles/nope/comments", Some("u")).await,
        404,
        "article_not_found",
    )
    .await;
    let page = app.get_json("/articles/art-5/comments", None).await;
    assert_eq!(page["data"], json!([]));
    assert_eq!(page["count"], 0);
    assert_eq!(page["next_offset"], Value::Null);
    for id in [
        "nope",
        "0193a000-0000-7000-8000-00000000000",
        "{0193a000-0000-7000-8000-000000000000}",
    ] {
        assert_problem(
            app.get(&format!("/comments/{id}"), None).await,
            404,
            "comment_not_found",
        )
        .await;
    }
}

/// Many replies to one parent at once: every one is created once, at depth 1, and read back
/// oldest first under their parent; `comment_count` is exact.
#[tokio::test]
async fn concurrent_replies_to_one_parent_are_all_kept_in_order() {
    let app = spawn_with_fixture().await;
    let parent = app
        .post_comment("u", &json!({"article_id": "art-1", "text": "parent"}), None)
        .await
        .json::<Value>()
        .await
        .unwrap();
    let replies = (0..20).map(|i| {
        let body =
            json!({"article_id": "art-1", "text": format!("reply {i}"), "parent_id": parent["id"]});
        let app = &app;
        async move {
            let response = app.post_comment(&format!("u{i}"), &body, None).await;
            assert_eq!(response.status(), 201);
            response.json::<Value>().await.unwrap()
        }
    });
    let created = futures_util::future::join_all(replies).await;
    // By time, not by text: a whole second is written without a fraction (`...:59Z`), which
    // sorts as text after `...:59.001Z`.
    let mut expected: Vec<(DateTime<FixedOffset>, String)> = created
        .iter()
        .map(|c| {
            assert_eq!(c["depth"], 1);
            let created_at = c["created_at"].as_str().unwrap();
            (
                DateTime::parse_from_rfc3339(created_at).unwrap(),
                c["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    expected.sort();
    let page = app
        .get_json("/articles/art-1/comments?limit=100", None)
        .await;
    let read = ids(&page);
    assert_eq!(read[0], parent["id"].as_str().unwrap());
    let replies: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();
    assert_eq!(read[1..], replies[..]);
    assert_eq!(
        app.get_json("/articles/art-1", None).await["comment_count"],
        21
    );
}

/// A toggle repeated at once by one caller gives the same 200 and the same count every time.
#[tokio::test]
async fn one_callers_repeated_posts_at_once_answer_alike() {
    let app = spawn_with_fixture().await;
    for (path, flag, count) in [
        ("/articles/art-2/bookmark", "bookmarked", "bookmark_count"),
        ("/organizations/org-c/follow", "following", "follower_count"),
    ] {
        let posts = (0..10).map(|_| app.request(Method::POST, path, Some("me")));
        for response in futures_util::future::join_all(posts).await {
            assert_eq!(response.status(), 200, "{path}");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body[flag], true, "{path}: {body}");
            assert_eq!(body[count], 1, "{path}: {body}");
        }
    }
}

/// "A request is judged in this order: route (404), method (405), token (401/403), then body"
/// (docs/conventions.md): a bad token does not hide an unknown route or a wrong method.
#[tokio::test]
async fn route_and_method_are_judged_before_the_token() {
    let app = spawn_with_fixture().await;
    let with_bad_token = |method: Method, path: &str| {
        app.client
            .request(method, app.url(path))
            .bearer_auth("not.a.token")
            .send()
    };
    assert_problem(
        with_bad_token(Method::GET, "/no-such-route").await.unwrap(),
        404,
        "not_found",
    )
    .await;
    assert_problem(
        with_bad_token(Method::PUT, "/articles/art-1/like")
            .await
            .unwrap(),
        405,
        "method_not_allowed",
    )
    .await;
}

/// The feed is ordered like the article list: newest first, ties by id descending, and a walk
/// by cursor one article at a time crosses the tie without repeating or skipping.
#[tokio::test]
async fn the_feed_breaks_ties_like_the_article_list() {
    let app = spawn_with_fixture().await;
    app.post("/organizations/org-a/follow", "me").await;
    app.post("/organizations/org-b/follow", "me").await;
    let expected = ["art-4", "art-3", "art-2", "art-1", "art-5"];
    assert_eq!(ids(&app.get_json("/me/feed", Some("me")).await), expected);
    let mut walked = Vec::new();
    let mut path = "/me/feed?limit=1".to_owned();
    loop {
        let page = app.get_json(&path, Some("me")).await;
        walked.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/me/feed?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(walked, expected);
}

/// `q` is 1..=200 characters after trimming, counted in code points: Unicode white space around
/// it (U+3000, U+00A0) is trimmed before counting, and white space alone is 400.
#[tokio::test]
async fn search_q_is_trimmed_of_unicode_white_space_before_it_is_counted() {
    let app = spawn_with_fixture().await;
    let encode = |s: &str| -> String { s.bytes().map(|b| format!("%{b:02X}")).collect() };
    let longest = "😀".repeat(200);
    let padded = format!("\u{3000}\u{a0}{longest}\u{3000}");
    assert_eq!(
        app.get(&format!("/search?q={}", encode(&padded)), None)
            .await
            .status(),
        200
    );
    let too_long = format!("{longest}😀");
    assert_problem(
        app.get(&format!("/search?q={}", encode(&too_long)), None)
            .await,
        400,
        "invalid_query",
    )
    .await;
    assert_problem(
        app.get(&format!("/search?q={}", encode("\u{3000}\u{a0}")), None)
            .await,
        400,
        "invalid_query",
    )
    .await;
}

/// A sane `x-request-id` of the longest accepted length comes back unchanged.
#[tokio::test]
async fn a_long_plain_request_id_is_kept() {
    let app = spawn_with_fixture().await;
    let id = format!("trace-{}", "0123456789abcdef".repeat(7));
    let response = app
        .client
        .get(app.url("/articles/art-1"))
        .header("x-request-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"].to_str().unwrap(), id);
}

/// Web-search syntax is forgiving: stray quotes, operators of PostgreSQL's own query syntax, lone
/// `OR` or `-`, punctuation and emoji are 200 with the search's shape, never a 4xx or 5xx; a
/// query of stop words or operators only matches nothing.
#[tokio::test]
async fn odd_search_queries_are_answered_not_refused() {
    let app = spawn_with_fixture().await;
    let encode = |s: &str| -> String { s.bytes().map(|b| format!("%{b:02X}")).collect() };
    let cases: [(&str, usize); 14] = [
        ("\"", 0),
        ("\"\"", 0),
        ("\"title", 5),
        ("title\"", 5),
        ("&|!():*<->", 0),
        ("title:*", 5),
        ("'", 0),
        ("\\", 0),
        ("😀", 0),
        ("OR", 0),
        ("OR title", 5),
        ("title OR", 5),
        ("title -", 5),
        ("the of and", 0),
    ];
    for (q, matches) in cases {
        let response = app.get(&format!("/search?q={}", encode(q)), None).await;
        assert_eq!(response.status(), 200, "{q:?}");
        let page: Value = response.json().await.unwrap();
        assert_eq!(page["count"], matches, "{q:?}: {page}");
        for key in ["data", "count", "next_cursor", "suggestion"] {
            assert!(page.get(key).is_some(), "{q:?}: {key} in {page}");
        }
    }
    let page = app
        .get_json(&format!("/search?q={}", encode("titel summry")), None)
        .await;
    assert_eq!(page["count"], 0);
    assert_eq!(page["suggestion"], "title summary");
}
