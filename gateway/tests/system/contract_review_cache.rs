//! Caching where the gateway meets the services' real `ETag`s and `Cache-Control` (the contract (docs/news.md),
//! "Anonymous article reads send `Cache-Control: public, max-age=30` and a strong `ETag`...",
//! and 5, "Cached public answers").

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use shared_auth::testing::token;

use crate::contract_review::{Answer, Sys, answer};

const PUBLIC: &str = "public, max-age=30";
const PRIVATE: &str = "private, no-store";

/// Every anonymous read the contract calls cacheable, with real ids.
async fn cacheable_urls(sys: &Sys) -> Vec<String> {
    let article = sys.article_ids(1).await.remove(0);
    let comment = sys
        .post_json(
            "/v1/news/comments",
            "cache-commenter",
            &json!({"article_id": article, "text": "cached?"}),
        )
        .await;
    assert_eq!(comment.status, StatusCode::CREATED);
    let comment = comment.json()["id"].as_str().unwrap().to_owned();
    vec![
        "/v1/news/articles".into(),
        // Over 64 KiB: handed out of the cache in pieces.
        "/v1/news/articles?limit=100".into(),
        "/v1/lingo/phrases?limit=100".into(),
        "/v1/news/articles?limit=5&organization_id=org-002".into(),
        format!("/v1/news/articles/{article}"),
        format!("/v1/news/articles/{article}/comments"),
        format!("/v1/news/comments/{comment}"),
        "/v1/news/organizations".into(),
        "/v1/news/journalists?organization_id=org-001".into(),
        "/v1/news/search?q=housing".into(),
        "/v1/news/search?q=electon".into(),
        "/v1/lingo/languages".into(),
        "/v1/lingo/phrases".into(),
        "/v1/lingo/phrases?language=es&limit=3".into(),
        "/v1/lingo/phrases?q=donde%20esta".into(),
        "/v1/lingo/phrases/ph-es-001".into(),
    ]
}

fn age(answer: &Answer) -> Option<u64> {
    answer.header("age").map(|age| age.parse().unwrap())
}

async fn anonymous(sys: &Sys, url: &str, id: &str, if_none_match: Option<&str>) -> Answer {
    let mut request = sys.req(Method::GET, url, None).header("x-request-id", id);
    if let Some(tag) = if_none_match {
        request = request.header("if-none-match", tag);
    }
    answer(request).await
}

#[tokio::test]
async fn anonymous_reads_are_public_strongly_tagged_and_answered_304_from_the_cache() {
    let sys = Sys::start().await;
    for (n, url) in cacheable_urls(&sys).await.iter().enumerate() {
        let fresh = anonymous(&sys, url, &format!("fresh-{n}"), None).await;
        assert_eq!(fresh.status, StatusCode::OK, "{url}");
        assert_eq!(fresh.header("cache-control"), Some(PUBLIC), "{url}");
        let etag = fresh
            .header("etag")
            .unwrap_or_else(|| panic!("{url}: no ETag"));
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
            "{url}: not a strong ETag: {etag}"
        );
        assert!(
            fresh
                .header("vary")
                .is_some_and(|v| v.to_ascii_lowercase().contains("authorization")),
            "{url}: Vary"
        );
        assert_eq!(age(&fresh), None, "{url}: a fresh answer carries no Age");
        assert_eq!(
            fresh.header("x-request-id"),
            Some(format!("fresh-{n}").as_str())
        );

        // The stored answer: same bytes and tag, with Age, and this request's own id.
        let stored = anonymous(&sys, url, &format!("stored-{n}"), None).await;
        assert_eq!(stored.status, StatusCode::OK, "{url}");
        assert!(
            age(&stored).is_some_and(|a| a <= 30),
            "{url}: Age {:?}",
            age(&stored)
        );
        assert_eq!(stored.bytes, fresh.bytes, "{url}");
        assert_eq!(stored.header("etag"), Some(etag), "{url}");
        assert_eq!(stored.header("cache-control"), Some(PUBLIC), "{url}");
        assert_eq!(
            stored.header("x-request-id"),
            Some(format!("stored-{n}").as_str()),
            "{url}: a cached answer carries the id of the request it answers"
        );

        // If-None-Match, answered by the cache: exact tag, weak form, in a list, `*`.
        let weak = format!("W/{etag}");
        let listed = format!("\"nope\", {etag}");
        for tag in [etag, weak.as_str(), listed.as_str(), "*"] {
            let not_modified = anonymous(&sys, url, &format!("inm-{n}"), Some(tag)).await;
            assert_eq!(not_modified.status, StatusCode::NOT_MODIFIED, "{url} {tag}");
            assert!(not_modified.bytes.is_empty(), "{url}: a 304 has no body");
            assert_eq!(not_modified.header("etag"), Some(etag), "{url}");
            assert_eq!(not_modified.header("cache-control"), Some(PUBLIC), "{url}");
            assert!(
                age(&not_modified).is_some(),
                "{url}: Age on a 304 from the cache"
            );
            assert_eq!(
                not_modified.header("x-request-id"),
                Some(format!("inm-{n}").as_str())
            );
        }
        let other = anonymous(&sys, url, "other", Some("\"another-tag\"")).await;
        assert_eq!(other.status, StatusCode::OK, "{url}");
        assert_eq!(other.bytes, fresh.bytes, "{url}");

        // The service's own 304: a request with a cookie is never answered from the cache.
        let from_service = answer(
            sys.req(Method::GET, url, None)
                .header("cookie", "session=1")
                .header("if-none-match", etag),
        )
        .await;
        assert_eq!(from_service.status, StatusCode::NOT_MODIFIED, "{url}");
        assert_eq!(from_service.header("etag"), Some(etag), "{url}");
        assert_eq!(
            age(&from_service),
            None,
            "{url}: the service's 304 has no Age"
        );
        assert!(from_service.bytes.is_empty());

        // The gateway does not rewrite the service's validator.
        let direct = answer(sys.direct(Method::GET, url)).await;
        assert_eq!(direct.header("etag"), Some(etag), "{url}");
    }
}

/// With the gateway's cache off, `If-None-Match` reaches the service and its 304 comes back.
#[tokio::test]
async fn with_the_cache_off_the_services_own_304_passes_through() {
    let sys = Sys::start_with(|config| config.cache_max_bytes = 0).await;
    for url in cacheable_urls(&sys).await {
        let fresh = anonymous(&sys, &url, "a", None).await;
        let etag = fresh.header("etag").unwrap().to_owned();
        let again = anonymous(&sys, &url, "b", Some(&etag)).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{url}");
        assert_eq!(again.header("etag"), Some(etag.as_str()), "{url}");
        assert_eq!(again.header("cache-control"), Some(PUBLIC), "{url}");
        assert_eq!(age(&again), None, "{url}");
        assert!(again.bytes.is_empty());
    }
}

/// A reader with a token gets the service's own answer, `private, no-store`, without `ETag`,
/// never from the cache, not even a 304 for the anonymous copy's tag.
#[tokio::test]
async fn signed_in_reads_are_private_and_never_answered_from_the_cache() {
    let sys = Sys::start().await;
    for url in cacheable_urls(&sys).await {
        let fresh = anonymous(&sys, &url, "anon", None).await;
        let etag = fresh.header("etag").unwrap().to_owned();
        assert!(
            age(&anonymous(&sys, &url, "anon", None).await).is_some(),
            "{url}"
        );

        for tag in [None, Some(etag.as_str()), Some("*")] {
            let mut request = sys.req(Method::GET, &url, Some("cache-reader"));
            if let Some(tag) = tag {
                request = request.header("if-none-match", tag);
            }
            let mine = answer(request).await;
            assert_eq!(mine.status, StatusCode::OK, "{url} {tag:?}");
            assert_eq!(mine.header("cache-control"), Some(PRIVATE), "{url}");
            assert_eq!(
                mine.header("etag"),
                None,
                "{url}: a personal answer has no ETag"
            );
            assert_eq!(age(&mine), None, "{url}: from the cache");
            if url.starts_with("/v1/news/") && !url.contains("comment") {
                let body = mine.json();
                let viewer = if body["data"].is_array() {
                    body["data"][0]["viewer"].clone()
                } else {
                    body["viewer"].clone()
                };
                assert!(
                    viewer.is_object() || body["data"] == json!([]),
                    "{url}: no viewer for a signed-in reader: {body}"
                );
            }
        }
    }
}

/// An Optional endpoint with an invalid credential answers 401 (fail closed), even when the
/// gateway holds a public copy of the URL.
#[tokio::test]
async fn an_invalid_credential_is_401_even_when_a_public_copy_is_stored() {
    let sys = Sys::start().await;
    for url in cacheable_urls(&sys).await {
        anonymous(&sys, &url, "a", None).await;
        assert!(
            age(&anonymous(&sys, &url, "b", None).await).is_some(),
            "{url}"
        );
        let cases = [
            ("Bearer not-a-jwt", "invalid_token"),
            ("Basic dXNlcjpwYXNz", "invalid_authorization_header"),
            ("", "invalid_authorization_header"),
        ];
        for (value, code) in cases {
            let refused = answer(
                sys.req(Method::GET, &url, None)
                    .header("authorization", value)
                    .header("if-none-match", "*"),
            )
            .await;
            refused.assert_problem(401, code, &format!("{url} {value:?}"));
            assert_eq!(age(&refused), None);
            assert_eq!(refused.header("cache-control"), Some(PRIVATE), "{url}");
        }
    }
}

/// Every lingo and news `/me/*` answer is `private, no-store`, problems included, and every
/// problem of a cacheable read too (a 404 of an unknown article is never stored).
#[tokio::test]
async fn me_answers_and_problems_are_private_no_store() {
    let sys = Sys::start().await;
    let created = sys.study("cache-learner", "es").await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(created.header("cache-control"), Some(PRIVATE));
    let session = created.json()["id"].as_str().unwrap().to_owned();
    let me = [
        "/v1/lingo/me/progress".to_owned(),
        "/v1/lingo/me/xp".into(),
        "/v1/lingo/me/study-sessions".into(),
        format!("/v1/lingo/me/study-sessions/{session}"),
        "/v1/lingo/me/recommendations".into(),
        "/v1/lingo/me/phrases".into(),
        "/v1/lingo/me/reviews".into(),
        "/v1/news/me/bookmarks".into(),
        "/v1/news/me/feed".into(),
        "/v1/news/me/following".into(),
    ];
    for url in &me {
        let mine = sys.get(url, Some("cache-learner")).await;
        assert_eq!(mine.status, StatusCode::OK, "{url}");
        assert_eq!(mine.header("cache-control"), Some(PRIVATE), "{url}");
        assert_eq!(mine.header("etag"), None, "{url}");
        // The gateway's own 401 and the service's 400.
        let refused = sys.get(url, None).await;
        refused.assert_problem(401, "missing_token", url);
        assert_eq!(refused.header("cache-control"), Some(PRIVATE), "{url}");
    }
    let bad_query = sys
        .get("/v1/lingo/me/study-sessions?limit=0", Some("x"))
        .await;
    bad_query.assert_problem(400, "invalid_query", "limit=0");
    assert_eq!(bad_query.header("cache-control"), Some(PRIVATE));
    let other = sys
        .get(
            &format!("/v1/lingo/me/study-sessions/{session}"),
            Some("someone-else"),
        )
        .await;
    other.assert_problem(404, "study_session_not_found", "another learner's session");
    assert_eq!(other.header("cache-control"), Some(PRIVATE));

    for url in [
        "/v1/news/articles/art-999999",
        "/v1/news/articles/art-999999/comments",
        "/v1/news/comments/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
        "/v1/lingo/phrases/ph-xx-999",
        "/v1/news/articles?limit=0",
    ] {
        for _ in 0..2 {
            let missing = sys.get(url, None).await;
            assert!(missing.status.is_client_error(), "{url}");
            assert_eq!(missing.header("cache-control"), Some(PRIVATE), "{url}");
            assert_eq!(
                age(&missing),
                None,
                "{url}: a problem served from the cache"
            );
            assert_eq!(missing.header("etag"), None, "{url}");
        }
    }
    let unknown = sys.get("/v1/news/articles/art-999999", None).await;
    unknown.assert_problem(404, "article_not_found", "unknown article");
}

/// A like shows in the liker's next read of the list, the article and a search at once, while
/// anonymous readers may see the stored count, never older than its max-age. The service's
/// `ETag` follows the count.
#[tokio::test]
async fn a_like_shows_at_once_to_its_reader_and_anonymous_copies_lag_at_most_max_age() {
    let sys = Sys::start().await;
    let page = sys.get_ok("/v1/news/articles?limit=3", None).await;
    let first = page["data"][0].clone();
    let id = first["id"].as_str().unwrap().to_owned();
    let title_word = first["title"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .max_by_key(|w| w.len())
        .unwrap()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_owned();
    let article_url = format!("/v1/news/articles/{id}");
    let search_url = format!("/v1/news/search?q={title_word}&sort=newest&limit=100");
    let urls = [
        "/v1/news/articles?limit=3".to_owned(),
        article_url.clone(),
        search_url,
    ];
    let mut before = Vec::new();
    for url in &urls {
        let fresh = sys.get(url, None).await;
        before.push((fresh.header("etag").unwrap().to_owned(), fresh.json()));
    }

    let liked = answer(sys.req(Method::POST, &format!("{article_url}/like"), Some("liker"))).await;
    assert_eq!(liked.status, StatusCode::OK);
    let likes = liked.json()["like_count"].as_u64().unwrap();
    assert_eq!(likes, first["like_count"].as_u64().unwrap() + 1);

    for (url, (etag, old)) in urls.iter().zip(&before) {
        let mine = sys.get_ok(url, Some("liker")).await;
        let item = find_article(&mine, &id).unwrap_or_else(|| panic!("{url}: {mine}"));
        assert_eq!(item["viewer"]["liked"], true, "{url}");
        assert_eq!(item["like_count"], likes, "{url}: the reader's own like");

        let anonymous = sys.get(url, None).await;
        let shown = find_article(&anonymous.json(), &id).unwrap()["like_count"].clone();
        let stale = find_article(old, &id).unwrap()["like_count"].clone();
        assert!(
            shown == likes || (shown == stale && age(&anonymous).is_some_and(|a| a <= 30)),
            "{url}: anonymous count {shown} with Age {:?}",
            age(&anonymous)
        );
        // Past the cache (a cookie), the service's tag has changed with the count.
        let current = answer(
            sys.req(Method::GET, url, None)
                .header("cookie", "c=1")
                .header("if-none-match", etag.as_str()),
        )
        .await;
        assert_eq!(
            current.status,
            StatusCode::OK,
            "{url}: the old tag still matches"
        );
        assert_ne!(current.header("etag"), Some(etag.as_str()), "{url}");
    }
}

/// The article `id` in a list or the article itself.
fn find_article(body: &Value, id: &str) -> Option<Value> {
    if body["id"] == id {
        return Some(body.clone());
    }
    body["data"]
        .as_array()?
        .iter()
        .find(|item| item["id"] == id)
        .cloned()
}

/// The token of one reader never reaches another reader's answer: two readers of one URL with
/// tokens get their own `viewer`.
#[tokio::test]
async fn two_signed_in_readers_of_one_url_get_their_own_viewer() {
    let sys = Sys::start().await;
    let id = sys.article_ids(1).await.remove(0);
    let url = format!("/v1/news/articles/{id}");
    let liked = answer(sys.req(Method::POST, &format!("{url}/like"), Some("fan"))).await;
    assert_eq!(liked.status, StatusCode::OK);
    for _ in 0..3 {
        let fan = sys.get_ok(&url, Some("fan")).await;
        let other = answer(
            sys.client
                .get(format!("{}{url}", sys.stack.gateway_url))
                .bearer_auth(token("not-a-fan")),
        )
        .await;
        assert_eq!(fan["viewer"]["liked"], true);
        assert_eq!(other.json()["viewer"]["liked"], false);
        assert_eq!(age(&other), None);
    }
}

/// Concurrent misses for one URL share one call to the service, but each answer is its own
/// request's: its own `x-request-id`, and a problem's `request_id` is that id, whether the
/// shared call brought a stored answer, a service's problem, or no answer at all.
#[tokio::test]
async fn coalesced_requests_each_carry_their_own_request_id() {
    let mut sys = Sys::start().await;
    for (id, got) in burst(&sys, "/v1/news/articles?limit=7".into(), "ok").await {
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.header("x-request-id"), Some(id.as_str()));
    }
    for (id, got) in burst(&sys, "/v1/news/articles/art-404404".into(), "missing").await {
        assert_eq!(got.assert_problem(404, "article_not_found", &id), id);
    }
    for (id, got) in burst(&sys, "/v1/lingo/phrases?limit=9".into(), "ok-lingo").await {
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.header("x-request-id"), Some(id.as_str()));
    }
    sys.stack.stop_lingo().await;
    for (id, got) in burst(&sys, "/v1/lingo/phrases?limit=11".into(), "down").await {
        let code = got.json()["code"].as_str().unwrap_or_default().to_owned();
        assert_eq!(code, "upstream_unavailable", "{id}: {}", got.status);
        if got.status == StatusCode::SERVICE_UNAVAILABLE {
            assert!(
                got.header("retry-after").is_some(),
                "{id}: a 503 without Retry-After"
            );
        }
        assert_eq!(got.assert_problem(got.status.as_u16(), &code, &id), id);
    }
}

/// 30 concurrent anonymous reads of `url`, each with its own id `{tag}-{n}`.
async fn burst(sys: &Sys, url: String, tag: &str) -> Vec<(String, Answer)> {
    futures_util::future::join_all((0..30).map(|n| {
        let url = url.clone();
        let id = format!("{tag}-{n}");
        async move {
            let got = answer(sys.req(Method::GET, &url, None).header("x-request-id", &id)).await;
            (id, got)
        }
    }))
    .await
}
