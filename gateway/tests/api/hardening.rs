//! Hardening at the edge: slow request heads, the client address behind trusted proxies, rate-limit
//! keys and a full limiter table, and request bodies an upstream stops reading.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use shared_auth::testing::token;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{BIG_BODY_BYTES, Stack, gateway_in_front_of, is_document_request, problem};

async fn echo_of(response: reqwest::Response) -> Value {
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("echo JSON")
}

fn forwarded_for(echo: &Value) -> &str {
    echo["headers"]["x-forwarded-for"][0]
        .as_str()
        .expect("x-forwarded-for")
}

#[tokio::test]
async fn a_half_sent_request_head_is_closed_at_the_timeout_while_others_are_served() {
    let stack = Stack::start_with(|config| config.header_read_timeout_ms = 500).await;
    let gateway = &stack.gateway;
    let mut slow = tokio::net::TcpStream::connect(gateway.addr)
        .await
        .expect("connect");
    slow.write_all(b"GET /v1/news/articles HTTP/1.1\r\nhost: x\r\nx-part")
        .await
        .expect("write");
    let started = Instant::now();

    // Other callers are served meanwhile.
    for _ in 0..3 {
        assert_eq!(gateway.get("/v1/news/articles").await.status(), 200);
    }

    let mut answer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut answer)).await;
    assert!(closed.is_ok(), "the connection was still open after 5 s");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(400),
        "closed too early: {elapsed:?}"
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(
        !text.contains("200 OK"),
        "a half head was never answered: {text}"
    );
    assert_eq!(
        stack.news.hits(),
        3,
        "the half request never reached an upstream"
    );
}

/// A client that asks for a large answer and stops reading it is disconnected once no byte of the
/// answer could be written to it for `CLIENT_SEND_TIMEOUT_MS`: it does not hold the gateway's
/// memory and an upstream connection for as long as it likes.
#[tokio::test]
async fn a_client_that_stops_reading_its_answer_is_closed_at_the_send_timeout() {
    let stack = Stack::start_with(|config| config.client_send_timeout_ms = 500).await;
    // A small receive buffer, so that the gateway's writes stop long before the 50 MB end.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("recv buffer");
    let mut stalled = socket.connect(stack.gateway.addr).await.expect("connect");
    stalled
        .write_all(b"GET /v1/news/articles/big HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .expect("write");
    // Reads nothing for several send timeouts; the gateway's buffers fill within milliseconds.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut answer = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(10), stalled.read_to_end(&mut answer)).await;
    assert!(closed.is_ok(), "the connection was still open 10 s later");
    assert!(
        answer.len() < BIG_BODY_BYTES,
        "the stalled client still got the whole answer ({} bytes)",
        answer.len()
    );
    // Other clients are served as usual.
    assert_eq!(stack.gateway.get("/v1/news/articles").await.status(), 200);
}

#[tokio::test]
async fn a_connection_that_sends_nothing_or_an_http2_preface_is_closed_at_the_timeout() {
    let stack = Stack::start_with(|config| config.header_read_timeout_ms = 500).await;
    for first_bytes in [&b""[..], b"PRI * HTTP/2.0\r\n"] {
        let mut idle = tokio::net::TcpStream::connect(stack.gateway.addr)
            .await
            .expect("connect");
        idle.write_all(first_bytes).await.expect("write");
        let mut answer = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut answer)).await;
        assert!(
            closed.is_ok(),
            "a connection that sent {first_bytes:?} was still open after 5 s"
        );
    }
}

#[tokio::test]
async fn without_trusted_proxies_forwarding_headers_of_the_client_are_ignored() {
    let stack = Stack::start().await;
    let gateway = &stack.gateway;
    let response = gateway
        .client
        .get(gateway.url("/v1/news/articles"))
        .header("x-forwarded-for", "203.0.113.9")
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .expect("request");
    let echo = echo_of(response).await;
    assert_eq!(forwarded_for(&echo), "127.0.0.1");
    assert_eq!(echo["headers"]["x-forwarded-proto"][0], "http");
}

#[tokio::test]
async fn from_a_trusted_proxy_the_client_address_and_proto_are_believed() {
    let stack = Stack::start_with(|config| {
        config.trusted_proxies = "127.0.0.0/8".parse().expect("cidr");
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 2;
    })
    .await;
    let gateway = &stack.gateway;
    let get_as = |xff: &'static str| {
        gateway
            .client
            .get(gateway.url("/v1/news/articles"))
            .header("x-forwarded-for", xff)
            .header("x-forwarded-proto", "https")
            .send()
    };
    // The rightmost entry that is not a trusted proxy is the client.
    let echo = echo_of(
        get_as("6.6.6.6, 203.0.113.9, 127.0.0.5")
            .await
            .expect("request"),
    )
    .await;
    assert_eq!(forwarded_for(&echo), "203.0.113.9");
    assert_eq!(echo["headers"]["x-forwarded-proto"][0], "https");

    // That address has its own budget; a spoofed leftmost entry does not buy a new one.
    assert_eq!(
        get_as("1.1.1.1, 203.0.113.9")
            .await
            .expect("request")
            .status(),
        200
    );
    let refused = get_as("203.0.113.9").await.expect("request");
    assert_eq!(refused.status(), 429);
    assert_eq!(problem(refused).await["code"], "rate_limited");
    assert_eq!(get_as("198.51.100.1").await.expect("request").status(), 200);

    // IPv6 callers are one caller per /64.
    assert_eq!(
        get_as("2001:db8:1:2::1").await.expect("request").status(),
        200
    );
    assert_eq!(
        get_as("2001:db8:1:2::ffff")
            .await
            .expect("request")
            .status(),
        200
    );
    let same_64 = get_as("2001:db8:1:2:abcd::9").await.expect("request");
    assert_eq!(same_64.status(), 429);
    assert_eq!(
        get_as("2001:db8:1:3::1").await.expect("request").status(),
        200
    );
}

#[tokio::test]
async fn a_full_limiter_table_keeps_limiting() {
    let stack = Stack::start_with(|config| {
        config.trusted_proxies = "127.0.0.1/32".parse().expect("cidr");
        config.rate_limit_enabled = true;
        config.rate_limit_reads = 2;
        config.rate_limit_max_keys = 64;
    })
    .await;
    let gateway = &stack.gateway;
    let get_as = |xff: String| {
        gateway
            .client
            .get(gateway.url("/v1/lingo/languages"))
            .header("x-forwarded-for", xff)
            .send()
    };
    let heavy = "198.51.100.7".to_owned();
    for _ in 0..2 {
        assert_eq!(get_as(heavy.clone()).await.expect("request").status(), 200);
    }
    // Ten times the table of new callers, while the heavy caller keeps trying.
    for i in 0..640u32 {
        let [_, _, a, b] = i.to_be_bytes();
        let status = get_as(format!("10.9.{a}.{b}"))
            .await
            .expect("request")
            .status();
        assert_eq!(status, 200, "a first request is allowed");
        if i % 20 == 0 {
            let refused = get_as(heavy.clone()).await.expect("request");
            assert_eq!(refused.status(), 429, "after {i} new callers");
        }
    }
    // A caller first seen with the table full is still limited.
    let late = "192.0.2.200".to_owned();
    for _ in 0..2 {
        assert_eq!(get_as(late.clone()).await.expect("request").status(), 200);
    }
    let refused = get_as(late).await.expect("request");
    assert_eq!(refused.status(), 429);
    assert_eq!(problem(refused).await["code"], "rate_limited");
}

/// An upstream that reads the request head and a little of the body, then answers 413 at once,
/// like a service whose own body limit is smaller than the gateway's. With `linger` it then reads
/// and discards the rest before closing (a graceful close); without, it closes at once, which
/// resets the connection while the gateway is still sending.
async fn early_answering_upstream(linger: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 16 * 1024];
                let Ok(n) = stream.read(&mut buffer).await else {
                    return;
                };
                if buffer[..n].starts_with(b"GET /readyz ") || is_document_request(&buffer[..n]) {
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .await;
                    return;
                }
                let body = br#"{"type":"about:blank","status":413,"code":"payload_too_large","title":"Payload Too Large"}"#;
                let head = format!(
                    "HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body).await;
                let _ = stream.shutdown().await;
                if linger {
                    let drain = async { while let Ok(1..) = stream.read(&mut buffer).await {} };
                    let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

async fn post_chunked(url: String, bytes: usize) -> reqwest::Response {
    let chunks = futures_util::stream::iter(
        (0..bytes / (64 * 1024))
            .map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 64 * 1024]))),
    );
    crate::helpers::client()
        .post(url)
        .bearer_auth(token("ada"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_413_even_when_the_upstream_stops_reading_early() {
    for linger in [false, true] {
        let upstream = early_answering_upstream(linger).await;
        let gateway = gateway_in_front_of(&upstream).await;
        let response = post_chunked(gateway.url("/v1/news/comments"), 2 * 1024 * 1024).await;
        assert_eq!(response.status(), 413, "linger: {linger}");
        assert_eq!(problem(response).await["code"], "payload_too_large");
    }
}

#[tokio::test]
async fn an_early_answer_of_the_upstream_is_passed_on() {
    // Under the gateway's limit the upstream's own answer is what the client gets.
    let upstream = early_answering_upstream(true).await;
    let gateway = gateway_in_front_of(&upstream).await;
    let response = post_chunked(gateway.url("/v1/news/comments"), 512 * 1024).await;
    assert_eq!(response.status(), 413);
    let body = problem(response).await;
    assert_eq!(body["code"], "payload_too_large");
    assert!(
        body.get("detail").is_none(),
        "the upstream's own problem: {body}"
    );
}

/// A request the gateway refuses without reading its body (here 401: no token) still has its
/// body read to the end before the connection closes. Closing on unread bytes resets the
/// connection, and a client still sending its body then loses the answer to the reset.
#[tokio::test]
async fn a_refused_body_is_read_to_its_end_so_the_answer_is_not_lost_to_a_reset() {
    let stack = Stack::start().await;
    for _ in 0..5 {
        let stream = tokio::net::TcpStream::connect(stack.gateway.addr)
            .await
            .expect("connect");
        let (mut reader, mut writer) = stream.into_split();
        let body = vec![b' '; 1024 * 1024];
        let head = format!(
            "POST /v1/news/comments HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        );
        let write = async {
            writer.write_all(head.as_bytes()).await?;
            writer.write_all(&body).await
        };
        let mut answer = Vec::new();
        let read = reader.read_to_end(&mut answer);
        let (written, read) =
            tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(write, read) })
                .await
                .expect("answered and closed");
        assert!(written.is_ok(), "the body could not be sent: {written:?}");
        assert!(read.is_ok(), "the answer was lost: {read:?}");
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 401"), "{text}");
        drop(writer);
    }
    assert_eq!(stack.news.hits(), 0, "nothing refused reached an upstream");
}

/// Sends `head` and `body` on a new connection, half-closes it (the client sends nothing more)
/// and returns the whole answer.
async fn send_and_half_close(addr: SocketAddr, head: &str, body: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(body).await.expect("body");
    stream.shutdown().await.expect("half-close");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A body that breaks off before its declared end, or whose chunked framing is wrong, is the
/// client's mistake: 400 `bad_request`, as at the services, not a 502 blaming the upstream.
#[tokio::test]
async fn a_request_body_that_breaks_off_is_400_not_an_upstream_failure() {
    let stack = Stack::start().await;
    let head = |framing: &str| {
        format!(
            "POST /v1/news/comments HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\
             content-type: application/json\r\n{framing}\r\n",
            token("someone")
        )
    };
    let cases: [(String, &[u8]); 3] = [
        (head("content-length: 1000\r\n"), b"{\"text\": \"only part"),
        (head("transfer-encoding: chunked\r\n"), b"5\r\n{\"tex\r\n"),
        (
            head("transfer-encoding: chunked\r\n"),
            b"zz\r\nnot a chunk\r\n",
        ),
    ];
    for (head, body) in cases {
        let answer = send_and_half_close(stack.gateway.addr, &head, body).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains("\"code\":\"bad_request\""), "{answer}");
    }
    let metrics = stack.gateway.metrics().await;
    assert!(
        !metrics.contains("kind=\"reset\""),
        "a client's broken body is no upstream error: {metrics}"
    );
}
