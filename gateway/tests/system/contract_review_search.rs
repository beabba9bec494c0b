//! `GET /v1/news/search` through the gateway (the contract (docs/news.md)): anonymous answers cacheable like the
//! article list, signed-in answers personal (`viewer`) and never cached, `suggestion`, cursor
//! paging that keeps `q`, filters and sort, and the bounds of `q`.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::contract_review::{Sys, answer, urlencode};

fn search(q: &str, rest: &str) -> String {
    format!("/v1/news/search?q={}{rest}", urlencode(q))
}

fn hits(page: &Value) -> &Vec<Value> {
    page["data"].as_array().unwrap_or_else(|| panic!("{page}"))
}

/// The characters `[start, end)` of `text`, counted in code points.
fn span(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[tokio::test]
async fn anonymous_and_signed_in_searches_differ_only_by_viewer_and_caching() {
    let sys = Sys::start().await;
    let url = search("housing", "&limit=10");
    let anonymous = sys.get(&url, None).await;
    assert_eq!(anonymous.status, StatusCode::OK);
    assert_eq!(
        anonymous.header("cache-control"),
        Some("public, max-age=30")
    );
    assert!(anonymous.header("etag").is_some());
    let page = anonymous.json();
    assert!(!hits(&page).is_empty(), "{page}");
    assert!(
        page["suggestion"].is_null(),
        "matches, so no suggestion: {page}"
    );
    assert!(page.get("next_cursor").is_some());
    assert_eq!(page["count"], hits(&page).len());
    for hit in hits(&page) {
        assert!(hit["viewer"].is_null(), "{hit}");
        assert!(hit["score"].is_number(), "{hit}");
        let highlights = hit["highlights"].as_array().unwrap();
        assert!(!highlights.is_empty() && highlights.len() <= 3, "{hit}");
        for highlight in highlights {
            let field = highlight["field"].as_str().unwrap();
            assert!(["title", "summary", "body"].contains(&field), "{highlight}");
            let text = highlight["text"].as_str().unwrap();
            let length = text.chars().count();
            assert!(length <= 200, "{highlight}");
            for mark in highlight["marks"].as_array().unwrap() {
                let (start, end) = (
                    mark[0].as_u64().unwrap() as usize,
                    mark[1].as_u64().unwrap() as usize,
                );
                assert!(start < end && end <= length, "{highlight}");
                let marked = span(text, start, end).to_lowercase();
                assert!(
                    marked.starts_with("hous"),
                    "marked {marked:?} in {highlight}"
                );
            }
        }
    }

    let liked_id = hits(&page)[0]["id"].as_str().unwrap().to_owned();
    let liked = answer(sys.req(
        Method::POST,
        &format!("/v1/news/articles/{liked_id}/like"),
        Some("searcher"),
    ))
    .await;
    assert_eq!(liked.status, StatusCode::OK);
    let signed_in = sys.get(&url, Some("searcher")).await;
    assert_eq!(signed_in.status, StatusCode::OK);
    assert_eq!(signed_in.header("cache-control"), Some("private, no-store"));
    assert_eq!(signed_in.header("etag"), None);
    assert_eq!(signed_in.header("age"), None);
    let mine = signed_in.json();
    let ids = |page: &Value| {
        hits(page)
            .iter()
            .map(|h| h["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&mine), ids(&page), "the same hits for both");
    for hit in hits(&mine) {
        let viewer = &hit["viewer"];
        assert!(viewer.is_object(), "{hit}");
        assert_eq!(viewer["liked"], hit["id"] == liked_id.as_str(), "{hit}");
    }
    let again = sys.get(&url, None).await;
    assert!(
        again.header("age").is_some(),
        "the anonymous answer is stored"
    );
}

#[tokio::test]
async fn a_misspelt_query_gets_a_suggestion_that_finds_articles() {
    let sys = Sys::start().await;
    let mut suggested = 0;
    for (typo, word) in [
        ("housng", "housing"),
        ("tourisn", "tourism"),
        ("electon", "election"),
    ] {
        let page = sys.get_ok(&search(typo, ""), None).await;
        if !hits(&page).is_empty() {
            continue;
        }
        let suggestion = page["suggestion"]
            .as_str()
            .unwrap_or_else(|| panic!("{typo}: {page}"));
        suggested += 1;
        assert!(suggestion.contains(word), "{typo} -> {suggestion}");
        let found = sys.get_ok(&search(suggestion, ""), None).await;
        assert!(
            !hits(&found).is_empty(),
            "the suggestion {suggestion} finds nothing"
        );
        assert!(found["suggestion"].is_null());
        // Signed in, the same suggestion.
        let mine = sys.get_ok(&search(typo, ""), Some("speller")).await;
        assert_eq!(mine["suggestion"], page["suggestion"]);
    }
    assert!(suggested > 0, "no typo was left unmatched");
}

#[tokio::test]
async fn search_refuses_bad_parameters_with_invalid_query() {
    let sys = Sys::start().await;
    let bad = [
        "/v1/news/search".to_owned(),
        "/v1/news/search?q=".into(),
        search("   ", ""),
        search(&"a".repeat(201), ""),
        search("housing", "&offset=0"),
        search("housing", "&offset=20"),
        search("housing", "&limit=0"),
        search("housing", "&limit=101"),
        search("housing", "&sort=oldest"),
        search("housing", "&published_after=yesterday"),
        search("housing", "&published_before=2026-13-01T00:00:00Z"),
    ];
    for path in bad {
        sys.get(&path, None)
            .await
            .assert_problem(400, "invalid_query", &path);
    }
    for path in [
        search(&"a".repeat(200), ""),
        search(&format!("  {}  ", "a".repeat(200)), ""),
        search("the", ""),
    ] {
        let answer = sys.get(&path, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.json());
    }
    let stop_words = sys.get_ok(&search("the of and", ""), None).await;
    assert_eq!(stop_words["count"], 0, "stop words only match nothing");
}

/// `published_after` is inclusive and `published_before` exclusive, through the cursor pages.
#[tokio::test]
async fn date_bounds_are_inclusive_then_exclusive_and_kept_by_the_cursor() {
    let sys = Sys::start().await;
    let q = "housing OR tourism OR budget";
    let all = walk(&sys, &search(q, "&sort=newest&limit=100")).await;
    assert!(all.len() > 6, "{}", all.len());
    let middle = all[all.len() / 2]["published_at"]
        .as_str()
        .unwrap()
        .to_owned();
    let after = format!(
        "&sort=newest&limit=2&published_after={}",
        urlencode(&middle)
    );
    let before = format!(
        "&sort=newest&limit=2&published_before={}",
        urlencode(&middle)
    );
    let published = |hits: Vec<Value>| -> Vec<String> {
        hits.iter()
            .map(|h| h["published_at"].as_str().unwrap().to_owned())
            .collect()
    };
    let seen_after = published(walk(&sys, &search(q, &after)).await);
    let seen_before = published(walk(&sys, &search(q, &before)).await);
    let parse = |t: &str| chrono_like(t);
    assert!(
        seen_after.iter().all(|t| parse(t) >= parse(&middle)),
        "{seen_after:?}"
    );
    assert!(seen_after.contains(&middle), "published_after is inclusive");
    assert!(
        seen_before.iter().all(|t| parse(t) < parse(&middle)),
        "{seen_before:?}"
    );
    assert_eq!(
        seen_after.len() + seen_before.len(),
        all.len(),
        "the cursor kept q, sort and bounds"
    );
}

/// Every hit of a search, page by page; the cursor alone (without `q`) continues it.
async fn walk(sys: &Sys, first: &str) -> Vec<Value> {
    let mut path = first.to_owned();
    let mut all = Vec::new();
    loop {
        let page = sys.get_ok(&path, None).await;
        all.extend(hits(&page).iter().cloned());
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/news/search?limit=2&cursor={}", urlencode(cursor)),
            None => return all,
        }
    }
}

/// RFC 3339 UTC timestamps with a `Z` compare as text once their fractions are aligned.
fn chrono_like(timestamp: &str) -> String {
    let trimmed = timestamp.trim_end_matches('Z');
    let (seconds, fraction) = trimmed.split_once('.').unwrap_or((trimmed, ""));
    format!("{seconds}.{fraction:0<9}")
}

/// Phrase search (the contract (docs/lingo.md)) through the gateway with the query percent-encoded as UTF-8:
/// case- and accent-insensitive, every word, the last one also as a prefix; `language` still
/// filters, and the anonymous answer is cacheable.
#[tokio::test]
async fn phrase_search_through_the_gateway_is_accent_and_case_insensitive() {
    let sys = Sys::start().await;
    let station = "¿Dónde está la estación de tren?";
    for q in [
        "donde esta",
        "DÓNDE ESTÁ",
        "dónde está la estac",
        "Donde   esta  ",
    ] {
        let path = format!("/v1/lingo/phrases?q={}&language=es", urlencode(q));
        let answer = sys.get(&path, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{q}");
        assert_eq!(answer.header("cache-control"), Some("public, max-age=30"));
        let page = answer.json();
        let texts: Vec<&str> = hits(&page)
            .iter()
            .map(|p| p["text"].as_str().unwrap())
            .collect();
        assert!(texts.contains(&station), "{q}: {texts:?}");
        assert!(
            hits(&page).iter().all(|p| p["language_code"] == "es"),
            "{q}"
        );
    }
    // A translation matches too: the English words find the Spanish phrase.
    let page = sys
        .get_ok(
            &format!(
                "/v1/lingo/phrases?q={}&language=es",
                urlencode("train station")
            ),
            None,
        )
        .await;
    let texts: Vec<&str> = hits(&page)
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert!(texts.contains(&station), "{texts:?}");
    let nothing = sys.get_ok("/v1/lingo/phrases?q=zzzzqqq", None).await;
    assert_eq!(nothing["count"], 0);
}
