//! Replicas, cooldowns, probes and the upstream failures of docs/gateway.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use shared_auth::testing::token;

use crate::helpers::{
    TestGateway, Upstream, config, gateway_in_front_of, is_document_request, problem,
};

/// A port nothing listens on.
async fn dead_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}

/// A replica that answers its `/readyz`, but reads any other request and closes the connection
/// without answering: the request was sent, so it must not be retried elsewhere.
async fn hang_up_replica() -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let Ok(n) = socket.read(&mut buffer).await else {
                    return;
                };
                if buffer[..n].starts_with(b"GET /readyz ") || is_document_request(&buffer[..n]) {
                    let ok = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    let _ = socket.write_all(ok.as_bytes()).await;
                } else if n > 0 {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                drop(socket);
            });
        }
    });
    (format!("http://{addr}"), requests)
}

/// What [`idle_closing_replica`] counts.
#[derive(Default)]
struct ConnectionCounts {
    /// Connections that carried a `/v1` request.
    used: AtomicUsize,
    /// Of those, the ones the gateway closed (the replica read end of file).
    closed_by_gateway: AtomicUsize,
}

/// A keep-alive HTTP/1.1 replica that closes a connection once it has idled for `idle_close`,
/// as the services do after their header read timeout.
async fn idle_closing_replica(idle_close: Duration) -> (String, Arc<ConnectionCounts>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let counts = Arc::new(ConnectionCounts::default());
    let counter = counts.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut counted = false;
                let mut buffer = [0u8; 4096];
                loop {
                    // Bodiless requests: each ends with its blank line.
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let request: Vec<u8> = pending.drain(..end + 4).collect();
                        if request.starts_with(b"GET /v1/")
                            && !is_document_request(&request)
                            && !counted
                        {
                            counted = true;
                            counter.used.fetch_add(1, Ordering::SeqCst);
                        }
                        let ok = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if socket.write_all(ok.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match tokio::time::timeout(idle_close, socket.read(&mut buffer)).await {
                        Ok(Ok(0)) => {
                            if counted {
                                counter.closed_by_gateway.fetch_add(1, Ordering::SeqCst);
                            }
                            return;
                        }
                        Ok(Ok(n)) => pending.extend_from_slice(&buffer[..n]),
                        _ => return,
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), counts)
}

#[tokio::test]
async fn upstream_connections_are_reused_and_one_the_replica_closed_is_replaced_unseen() {
    let (url, counts) = idle_closing_replica(Duration::from_millis(300)).await;
    let connections = &counts.used;
    let mut config = config(&[], &[]);
    config.lingo_upstreams.0 = vec![url.parse().expect("url")];
    let gateway = TestGateway::start(config).await;

    for _ in 0..5 {
        assert_eq!(gateway.get("/v1/lingo/languages").await.status(), 200);
    }
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "one pooled connection"
    );

    // The replica closes the idle connection; the next requests find it closed, not broken.
    tokio::time::sleep(Duration::from_millis(700)).await;
    for _ in 0..3 {
        assert_eq!(gateway.get("/v1/lingo/languages").await.status(), 200);
    }
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_gateway_closes_idle_upstream_connections_before_the_service_would() {
    // The services close a keep-alive connection after 10 s idle; the gateway retires its own
    // after 5 s, and closes it: the TIME_WAIT stays on the gateway's side.
    let (url, counts) = idle_closing_replica(Duration::from_secs(10)).await;
    let mut config = config(&[], &[]);
    config.lingo_upstreams.0 = vec![url.parse().expect("url")];
    let gateway = TestGateway::start(config).await;
    assert_eq!(gateway.get("/v1/lingo/languages").await.status(), 200);
    assert_eq!(counts.used.load(Ordering::SeqCst), 1);

    let deadline = Instant::now() + Duration::from_secs(9);
    while counts.closed_by_gateway.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the idle connection is still open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn replica_of(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 200);
    let echo: Value = response.json().await.expect("echo");
    echo["replica"].as_str().expect("replica").to_owned()
}

#[tokio::test]
async fn two_replicas_share_traffic_survive_one_dying_and_fail_fast_when_all_are_down() {
    let lingo = Upstream::start("lingo-1").await;
    let mut news_a = Upstream::start("news-a").await;
    let mut news_b = Upstream::start("news-b").await;
    let gateway = TestGateway::start(config(&[&lingo], &[&news_a, &news_b])).await;

    for _ in 0..10 {
        replica_of(gateway.get("/v1/news/articles").await).await;
    }
    assert!(
        news_a.hits() > 0 && news_b.hits() > 0,
        "both replicas get traffic"
    );
    assert_eq!(news_a.hits() + news_b.hits(), 10);

    news_a.kill().await;
    for _ in 0..10 {
        let replica = replica_of(gateway.get("/v1/news/articles").await).await;
        assert_eq!(replica, "news-b");
    }
    // Writes keep working too: the dead replica is never half-sent a request.
    let response = gateway
        .client
        .post(gateway.url("/v1/news/articles/a-1/like"))
        .bearer_auth(token("ada"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 201);

    news_b.kill().await;
    let started = Instant::now();
    let response = gateway.get("/v1/news/articles").await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let status = response.status().as_u16();
    assert!(status == 502 || status == 503, "{status}");
    assert_eq!(problem(response).await["code"], "upstream_unavailable");

    // Now both are cooling down: 503 with Retry-After, without trying them.
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 503);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!((1..=10).contains(&retry_after), "{retry_after}");
    assert_eq!(problem(response).await["code"], "upstream_unavailable");

    // The other group is unaffected.
    assert_eq!(gateway.get("/v1/lingo/languages").await.status(), 200);
}

#[tokio::test]
async fn every_replica_refusing_is_502_and_then_503_during_the_cooldown() {
    let lingo = Upstream::start("lingo-1").await;
    let mut config = config(&[&lingo], &[]);
    config.news_upstreams = format!("{},{}", dead_url().await, dead_url().await)
        .parse()
        .expect("urls");
    let gateway = TestGateway::start(config).await;

    // The first request may find the replicas already marked down by the start-up probe.
    let first = gateway.get("/v1/news/articles").await;
    let status = first.status().as_u16();
    assert!(status == 502 || status == 503, "{status}");
    assert_eq!(problem(first).await["code"], "upstream_unavailable");
    let second = gateway.get("/v1/news/articles").await;
    assert_eq!(second.status(), 503);
    assert!(second.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn a_refused_connection_is_retried_on_another_replica_for_any_method() {
    let lingo = Upstream::start("lingo-1").await;
    let alive = Upstream::start("news-alive").await;
    let mut config = config(&[&lingo], &[]);
    // Probes would mark the dead replica down before any request; make them rare so the
    // request path itself meets the refusal.
    config.upstream_probe_interval_secs = 3600;
    config.news_upstreams = format!("{},{}", dead_url().await, alive.url)
        .parse()
        .expect("urls");
    let gateway = TestGateway::start(config).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..4 {
        let response = gateway
            .client
            .post(gateway.url("/v1/news/comments"))
            .bearer_auth(token("ada"))
            .header("content-type", "application/json")
            .body(r#"{"article_id":"a-1","text":"hi"}"#)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 201);
        let echo: Value = response.json().await.expect("echo");
        assert_eq!(echo["body_len"], 32, "the body survives the failed attempt");
    }
    assert_eq!(alive.hits(), 4);
}

#[tokio::test]
async fn a_replica_failing_its_readiness_probe_gets_no_traffic() {
    let lingo = Upstream::start("lingo-1").await;
    let sick = Upstream::start("news-sick").await;
    let healthy = Upstream::start("news-healthy").await;
    sick.set_ready(false);
    let mut config = config(&[&lingo], &[&sick, &healthy]);
    config.upstream_probe_interval_secs = 1;
    let gateway = TestGateway::start(config).await;
    // The background probe runs at start-up and then every second.
    sick.wait_for_probe_after(0).await;
    for _ in 0..6 {
        assert_eq!(
            replica_of(gateway.get("/v1/news/articles").await).await,
            "news-healthy"
        );
    }
    assert_eq!(sick.hits(), 0);
    sick.set_ready(true);
    sick.wait_for_probe_after(sick.probes()).await;
    for _ in 0..6 {
        replica_of(gateway.get("/v1/news/articles").await).await;
    }
    assert!(
        sick.hits() > 0,
        "a replica that is ready again gets traffic again"
    );
}

#[tokio::test]
async fn no_replica_configured_is_503_with_retry_after() {
    let lingo = Upstream::start("lingo-1").await;
    let gateway = TestGateway::start(config(&[&lingo], &[])).await;
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(problem(response).await["code"], "upstream_unavailable");
}

#[tokio::test]
async fn a_slow_upstream_is_504_at_the_timeout_and_a_sent_post_is_never_retried() {
    let lingo = Upstream::start("lingo-1").await;
    let slow_a = Upstream::start("news-a").await;
    let slow_b = Upstream::start("news-b").await;
    let mut config = config(&[&lingo], &[&slow_a, &slow_b]);
    config.upstream_timeout_ms = 300;
    let gateway = TestGateway::start(config).await;

    let started = Instant::now();
    let response = gateway.get("/v1/news/articles?sleep_ms=3000").await;
    let elapsed = started.elapsed();
    assert_eq!(response.status(), 504);
    assert_eq!(problem(response).await["code"], "upstream_timeout");
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(2500),
        "answered before the upstream would: {elapsed:?}"
    );

    let response = gateway
        .client
        .post(gateway.url("/v1/news/comments?sleep_ms=1000"))
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 504);
    // Long enough for any retry to have reached the other replica.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        slow_a.hits() + slow_b.hits(),
        2,
        "one GET and one POST, each sent once"
    );
}

#[tokio::test]
async fn a_connection_dropped_after_the_request_was_sent_is_502_without_retry() {
    let lingo = Upstream::start("lingo-1").await;
    let (first, first_count) = hang_up_replica().await;
    let (second, second_count) = hang_up_replica().await;
    let mut config = config(&[&lingo], &[]);
    config.news_upstreams = format!("{first},{second}").parse().expect("urls");
    let gateway = TestGateway::start(config).await;

    let response = gateway
        .client
        .post(gateway.url("/v1/news/articles/a-1/like"))
        .bearer_auth(token("ada"))
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let sent = first_count.load(Ordering::SeqCst) + second_count.load(Ordering::SeqCst);
    assert_eq!(status, 502, "a reset after sending is a bad gateway");
    assert_eq!(
        sent, 1,
        "the POST reached exactly one replica and was not retried"
    );
}

/// A replica that answers its `/readyz`, and any other request with the bytes of `answer`;
/// then it holds the connection open for a while (`hold_open`) or closes it.
async fn fixed_answer_replica(answer: &'static str, hold_open: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let Ok(n) = socket.read(&mut buffer).await else {
                    return;
                };
                if buffer[..n].starts_with(b"GET /readyz ") || is_document_request(&buffer[..n]) {
                    let ok = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    let _ = socket.write_all(ok.as_bytes()).await;
                    return;
                }
                let _ = socket.write_all(answer.as_bytes()).await;
                if hold_open {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

/// Once the status line is out, a stalled body cannot become a 504: the client's connection is
/// cut after the upstream timeout of silence instead of being left waiting for ever.
#[tokio::test]
async fn a_response_body_that_stalls_is_cut_off_at_the_upstream_timeout() {
    // The head of a 100-byte answer and 10 bytes of it, then silence.
    let stalling = fixed_answer_replica(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"data\": [",
        true,
    )
    .await;
    let mut config = gateway::config::GatewayConfig::for_tests(&[], &[stalling]);
    config.rate_limit_enabled = false;
    config.upstream_timeout_ms = 300;
    let gateway = TestGateway::start(config).await;

    let started = Instant::now();
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(5), response.bytes())
        .await
        .expect("the body ended, one way or another, before 5 s");
    assert!(
        body.is_err(),
        "a cut-off body is an error, not a short answer"
    );
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
}

/// Until the first byte of an answer's body is there, nothing has gone to the client: an upstream
/// that sends a head and then closes the connection is 502 (not an empty reply), and one that
/// sends a head and then nothing is 504 at the upstream timeout.
#[tokio::test]
async fn an_answer_that_stops_after_its_head_is_502_or_504() {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
    for (hold_open, status, code) in [
        (false, 502, "upstream_unavailable"),
        (true, 504, "upstream_timeout"),
    ] {
        let replica = fixed_answer_replica(head, hold_open).await;
        let mut config = gateway::config::GatewayConfig::for_tests(&[], &[replica]);
        config.rate_limit_enabled = false;
        config.upstream_timeout_ms = 300;
        let gateway = TestGateway::start(config).await;
        let response = gateway.get("/v1/news/articles").await;
        let got = response.status();
        let body = problem(response).await;
        assert_eq!(got, status, "{body}");
        assert_eq!(body["code"], code);
    }
}

/// The gateway answers in its own HTTP version: an upstream's HTTP/1.0 answer (its body ended by
/// the close) reaches an HTTP/1.1 client as HTTP/1.1, whole.
#[tokio::test]
async fn an_http10_answer_goes_out_as_http11() {
    let replica = fixed_answer_replica(
        "HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{\"x\":1}",
        false,
    )
    .await;
    let gateway = gateway_in_front_of(&replica).await;
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), "{\"x\":1}");
}

/// The first piece of a body is read before the answer goes on: broken chunk framing there is a
/// broken answer (502 `bad_response`), and a chunked body found empty goes out as an empty body
/// of length 0.
#[tokio::test]
async fn the_first_piece_of_a_chunked_body_is_judged_before_the_answer_goes_on() {
    let broken = fixed_answer_replica(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n",
        true,
    )
    .await;
    let gateway = gateway_in_front_of(&broken).await;
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 502);
    assert_eq!(problem(response).await["code"], "upstream_unavailable");
    let metrics = gateway.metrics().await;
    assert!(metrics.contains("kind=\"bad_response\""), "{metrics}");

    let empty = fixed_answer_replica(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        true,
    )
    .await;
    let gateway = gateway_in_front_of(&empty).await;
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-length"], "0");
    assert!(response.bytes().await.expect("body").is_empty());
}

/// What no service serves is 404 or 405 from the gateway whether or not a replica is up, with or
/// without a token: the route table, not the upstream, decides.
#[tokio::test]
async fn no_endpoint_is_404_and_a_wrong_method_405_even_with_every_replica_down() {
    let lingo = Upstream::start("lingo-1").await;
    let mut config = config(&[&lingo], &[]);
    config.news_upstreams = dead_url().await.parse().expect("url");
    let gateway = TestGateway::start(config).await;
    // The group is down: 502 from the refused connection, or 503 once the start-up probe has
    // marked the replica down (whichever came first).
    let down = gateway.get("/v1/news/articles").await.status().as_u16();
    assert!(down == 502 || down == 503, "{down}");
    for (method, path, status) in [
        (reqwest::Method::GET, "/v1/news/no/such/thing", 404),
        (reqwest::Method::PUT, "/v1/news/articles", 405),
        (reqwest::Method::DELETE, "/v1/news/comments", 405),
    ] {
        let response = gateway
            .client
            .request(method.clone(), gateway.url(path))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), status, "{method} {path}");
    }
}

/// RFC 9112: `Transfer-Encoding` frames the body, and a proxy drops the `Content-Length` beside
/// it; passed on, it would cut the client's copy short without any error.
#[tokio::test]
async fn a_chunked_answer_that_also_declares_a_length_arrives_whole() {
    // A chunked body of 10 bytes that also (wrongly) declares `Content-Length: 5`.
    let replica = fixed_answer_replica(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\
         connection: close\r\n\r\na\r\n0123456789\r\n0\r\n\r\n",
        false,
    )
    .await;
    let gateway = gateway_in_front_of(&replica).await;
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.expect("body"), "0123456789");
}

/// A replica cooling down after a refused connection is not shown as ready, though its last
/// probe was good: `/metrics` and `/readyz` say what the next request will find.
#[tokio::test]
async fn a_replica_in_cooldown_is_not_counted_as_ready() {
    let lingo = Upstream::start("lingo-1").await;
    let mut news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.upstream_probe_interval_secs = 3600;
    let gateway = TestGateway::start(config).await;
    assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);
    // The start-up probe has found the replica ready; the next one is an hour away.
    news.wait_for_probe_after(0).await;

    news.kill().await;
    assert_eq!(gateway.get("/v1/news/articles").await.status(), 502);
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("gateway_upstream_ready_replicas{group=\"news\"} 0"),
        "{metrics}"
    );
    let ready: Value = gateway.get("/readyz").await.json().await.expect("json");
    assert_eq!(ready["upstreams"]["news"]["ready_replicas"], 0, "{ready}");
}

/// A client that is still sending its body when the upstream timeout passes gets 408
/// `request_timeout`: its own slowness, not a 504 blaming the service (nor counted as one).
#[tokio::test]
async fn a_body_still_arriving_at_the_upstream_timeout_is_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.upstream_timeout_ms = 300;
    let gateway = TestGateway::start(config).await;

    let mut stream = tokio::net::TcpStream::connect(gateway.addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /v1/news/comments HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"text\": ",
        token("ada")
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("answered before 5 s")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    let metrics = gateway.metrics().await;
    assert!(!metrics.contains("kind=\"timeout\""), "{metrics}");
}

/// An upstream that answers `101 Switching Protocols` to a plain request (the gateway strips
/// `Upgrade`) gave a broken answer: 502, never a switched connection to the client.
#[tokio::test]
async fn an_unasked_101_from_the_upstream_is_502() {
    let replica = fixed_answer_replica(
        "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: h2c\r\n\r\n",
        true,
    )
    .await;
    let gateway = gateway_in_front_of(&replica).await;
    let response = gateway.get("/v1/news/articles").await;
    assert_eq!(response.status(), 502);
    assert_eq!(problem(response).await["code"], "upstream_unavailable");
}

/// An answer that is not HTTP/1.1 (garbage, conflicting lengths, a head over the size limit) is
/// 502 counted as `bad_response`, and its detail does not claim the upstream hung up.
#[tokio::test]
async fn an_unreadable_upstream_answer_is_502_bad_response() {
    let huge_head: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nx-filler: {}\r\ncontent-length: 0\r\n\r\n",
            "a".repeat(1024 * 1024)
        )
        .into_boxed_str(),
    );
    let answers = [
        "this is not HTTP at all\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc",
        "HTTP/1.1 2000 OK\r\ncontent-length: 0\r\n\r\n",
        "HTTP/1.1 999 Whatever\r\ncontent-length: 0\r\n\r\n",
        huge_head,
    ];
    for answer in answers {
        let replica = fixed_answer_replica(answer, true).await;
        let gateway = gateway_in_front_of(&replica).await;
        let response = gateway.get("/v1/news/articles").await;
        assert_eq!(response.status(), 502, "{}", &answer[..20]);
        let body = problem(response).await;
        assert_eq!(body["code"], "upstream_unavailable");
        assert!(
            !body["detail"].as_str().unwrap_or("").contains("closed"),
            "{body}"
        );
        let metrics = gateway.metrics().await;
        assert!(metrics.contains("kind=\"bad_response\""), "{metrics}");
        assert!(!metrics.contains("kind=\"reset\""), "{metrics}");
    }
}
