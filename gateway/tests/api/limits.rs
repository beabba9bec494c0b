//! Rate limits and the request-body limit.

use serde_json::Value;
use shared_auth::testing::token;

use crate::helpers::{Stack, problem};

fn header(response: &reqwest::Response, name: &str) -> u64 {
    response.headers()[name]
        .to_str()
        .expect("ascii")
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

#[tokio::test]
async fn callers_get_429_with_rate_limit_headers_after_their_budget() {
    let stack = Stack::start_with(|config| {
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 5;
        config.rate_limit_writes = 2;
        config.rate_limit_window_secs = 10;
    })
    .await;
    let gateway = &stack.gateway;

    for remaining in (0..5).rev() {
        let response = gateway.get("/v1/news/articles").await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "ratelimit-limit"), 5);
        assert_eq!(header(&response, "ratelimit-remaining"), remaining);
    }
    let refused = gateway.get("/v1/lingo/languages").await;
    assert_eq!(refused.status(), 429);
    let retry_after = header(&refused, "retry-after");
    assert!((1..=10).contains(&retry_after), "{retry_after}");
    assert_eq!(header(&refused, "ratelimit-limit"), 5);
    assert_eq!(header(&refused, "ratelimit-remaining"), 0);
    assert!((1..=10).contains(&header(&refused, "ratelimit-reset")));
    assert_eq!(problem(refused).await["code"], "rate_limited");
    assert_eq!(
        stack.hits(),
        5,
        "the refused request never reached an upstream"
    );

    // A caller with a token has budgets of its own, and writes are counted apart from reads.
    let ada = token("ada");
    for _ in 0..2 {
        let response = gateway
            .client
            .post(gateway.url("/v1/news/articles/a-1/like"))
            .bearer_auth(&ada)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 201);
    }
    let refused = gateway
        .client
        .delete(gateway.url("/v1/news/articles/a-1/like"))
        .bearer_auth(&ada)
        .send()
        .await
        .expect("request");
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "ratelimit-limit"), 2);
    let read = gateway
        .client
        .get(gateway.url("/v1/news/me/feed"))
        .bearer_auth(&ada)
        .send()
        .await
        .expect("request");
    assert_eq!(read.status(), 200, "reads have their own budget");
    let other = gateway
        .client
        .post(gateway.url("/v1/news/articles/a-1/like"))
        .bearer_auth(token("bob"))
        .send()
        .await
        .expect("request");
    assert_eq!(other.status(), 201, "another caller has its own budget");
}

#[tokio::test]
async fn rate_limits_can_be_switched_off() {
    let stack = Stack::start_with(|config| {
        config.rate_limit_enabled = false;
        config.rate_limit_reads = 1;
    })
    .await;
    for _ in 0..5 {
        let response = stack.gateway.get("/v1/news/articles").await;
        assert_eq!(response.status(), 200);
        assert!(response.headers().get("ratelimit-limit").is_none());
    }
}

#[tokio::test]
async fn a_2_mib_body_is_413_and_never_reaches_the_upstream() {
    let stack = Stack::start().await;
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body(vec![b' '; 2 * 1024 * 1024])
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 413);
    // The body was not read: the client is told not to reuse the connection.
    assert_eq!(response.headers()["connection"], "close");
    assert_eq!(problem(response).await["code"], "payload_too_large");
    assert_eq!(stack.hits(), 0);

    // Exactly 1 MiB passes (on a new connection).
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .body(vec![b' '; 1024 * 1024])
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);
    let echo: Value = response.json().await.expect("echo");
    assert_eq!(echo["body_len"], 1024 * 1024);
}

#[tokio::test]
async fn a_streamed_body_without_length_is_cut_at_1_mib_with_413() {
    let stack = Stack::start().await;
    let chunks = futures_util::stream::iter(
        (0..32).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 64 * 1024]))),
    );
    let response = stack
        .gateway
        .client
        .post(stack.gateway.url("/v1/news/comments"))
        .bearer_auth(token("ada"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 413);
    assert_eq!(problem(response).await["code"], "payload_too_large");
}
