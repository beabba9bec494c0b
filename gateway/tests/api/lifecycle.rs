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
