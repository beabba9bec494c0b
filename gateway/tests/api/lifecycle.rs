//! Graceful shutdown of an in-process gateway, triggered through `run_until`'s shutdown future.

use std::time::{Duration, Instant};

use crate::binary::refuses_connections;
use crate::helpers::{Stack, client};

#[tokio::test]
async fn shutdown_drains_in_flight_requests_and_refuses_new_connections() {
    let mut stack = Stack::start().await;
    let in_flight = tokio::spawn(
        client()
            .get(stack.gateway.url("/v1/lingo/languages?sleep_ms=1000"))
            .send(),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while stack.lingo.hits() == 0 {
        assert!(Instant::now() < deadline, "the slow request never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let addr = stack.gateway.addr;
    let serving = stack.gateway.shutdown();

    assert!(
        refuses_connections(addr).await,
        "the listener is closed at once"
    );
    let response = in_flight
        .await
        .expect("task")
        .expect("in-flight request completes");
    assert_eq!(response.status(), 200);
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("run_until returns once drained")
        .expect("task")
        .expect("serve");
}

/// Several worker threads share the listener: many clients at once, each on its own connection,
/// are all proxied (each on the worker that accepted it), and shutdown still drains them all.
#[tokio::test]
async fn several_workers_serve_concurrent_connections_and_drain_on_shutdown() {
    let mut stack = Stack::start_with(|config| config.workers = 3).await;
    // A client each, so each request has a connection of its own.
    let requests = (0..24).map(|n| {
        let url = stack
            .gateway
            .url(&format!("/v1/lingo/languages?sleep_ms=200&n={n}"));
        async move { client().get(url).send().await }
    });
    let answers = futures_util::future::join_all(requests);
    let answers = tokio::spawn(answers);
    let deadline = Instant::now() + Duration::from_secs(5);
    while stack.lingo.hits() < 24 {
        assert!(
            Instant::now() < deadline,
            "only {} of 24 requests reached the upstream",
            stack.lingo.hits()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let serving = stack.gateway.shutdown();
    for answer in answers.await.expect("task") {
        assert_eq!(answer.expect("answered").status(), 200);
    }
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("every worker drains and stops")
        .expect("task")
        .expect("serve");
}
