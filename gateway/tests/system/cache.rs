//! The cache of public answers on the whole system: the gateway in front of the real
//! news-service, which says `Cache-Control: public, max-age=30` to anonymous readers and
//! `private, no-store` to readers with a token.

use futures_util::future::join_all;
use reqwest::{Client, StatusCode};
use serde_json::Value;
use shared_auth::testing::token;

use crate::stack;

/// How many `GET`s of `route` news-service has answered, from its own metrics.
async fn news_reads(client: &Client, news_url: &str, route: &str) -> u64 {
    let text = client
        .get(format!("{news_url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let route = format!("route=\"{route}\"");
    text.lines()
        .filter(|line| line.starts_with("news_http_requests_total{"))
        .filter(|line| line.contains(&route) && line.contains("method=\"GET\""))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn age(response: &reqwest::Response) -> Option<u64> {
    let age = response.headers().get("age")?;
    Some(age.to_str().unwrap().parse().unwrap())
}

#[tokio::test]
async fn a_burst_of_anonymous_front_page_reads_reaches_news_service_once() {
    let stack = stack::start(Some(30)).await;
    let client = Client::new();
    let front_page = format!("{}/v1/news/articles?limit=20", stack.gateway_url);

    let burst = (0..200).map(|_| async {
        let response = client.get(&front_page).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.text().await.unwrap()
    });
    let pages = join_all(burst).await;
    assert!(
        pages.iter().all(|page| page == &pages[0]),
        "one answer for all"
    );
    let page: Value = serde_json::from_str(&pages[0]).unwrap();
    assert_eq!(page["count"], 20);
    assert_eq!(
        news_reads(&client, &stack.news_url, "/v1/news/articles").await,
        1,
        "news-service answered the burst once"
    );

    // The stored answer keeps its ETag and answers If-None-Match with 304 itself.
    let stored = client.get(&front_page).send().await.unwrap();
    assert!(age(&stored).is_some());
    let etag = stored.headers()["etag"].clone();
    let not_modified = client
        .get(&front_page)
        .header("if-none-match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(not_modified.headers()["etag"], etag);
    assert_eq!(
        news_reads(&client, &stack.news_url, "/v1/news/articles").await,
        1
    );
}

#[tokio::test]
async fn a_reader_with_a_token_is_never_served_from_the_cache_and_sees_their_like_at_once() {
    let stack = stack::start(Some(30)).await;
    let client = Client::new();
    let gateway = &stack.gateway_url;
    let page: Value = client
        .get(format!("{gateway}/v1/news/articles?limit=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = page["data"][0]["id"].as_str().unwrap().to_owned();
    let article = format!("{gateway}/v1/news/articles/{id}");
    let route = "/v1/news/articles/{article_id}";

    // Anonymous readers share one stored copy.
    let anonymous = client.get(&article).send().await.unwrap();
    assert!(age(&anonymous).is_none());
    let likes_before = anonymous.json::<Value>().await.unwrap()["like_count"].clone();
    assert!(age(&client.get(&article).send().await.unwrap()).is_some());
    assert_eq!(news_reads(&client, &stack.news_url, route).await, 1);

    // A reader with a token gets news-service's own answer every time.
    let reader = token("cache-reader");
    let read_as_reader = || async {
        let response = client
            .get(&article)
            .bearer_auth(&reader)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(age(&response).is_none(), "never from the cache");
        assert_eq!(response.headers()["cache-control"], "private, no-store");
        response.json::<Value>().await.unwrap()
    };
    let before = read_as_reader().await;
    assert_eq!(before["viewer"]["liked"], false);
    let liked = client
        .post(format!("{article}/like"))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(liked.status(), StatusCode::OK);
    let after = read_as_reader().await;
    assert_eq!(
        after["viewer"]["liked"], true,
        "the like is visible at once"
    );
    assert_eq!(
        after["like_count"].as_u64().unwrap(),
        before["like_count"].as_u64().unwrap() + 1
    );
    assert_eq!(news_reads(&client, &stack.news_url, route).await, 3);

    // Anonymous readers keep the stored copy until its max-age (30 s) has passed.
    let anonymous = client.get(&article).send().await.unwrap();
    assert!(age(&anonymous).is_some());
    assert_eq!(
        anonymous.json::<Value>().await.unwrap()["like_count"],
        likes_before
    );
    assert_eq!(news_reads(&client, &stack.news_url, route).await, 3);
}
