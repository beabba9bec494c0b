//! One trace from the gateway down to SQL: a small OTLP/HTTP receiver collects the spans that the
//! real gateway binary and an in-process lingo-service export, and the test follows the parent
//! links from the gateway's client span to the service's server span to a SQL span. Also: every
//! `/metrics` is valid Prometheus text whose counters move.
#![allow(clippy::unwrap_used)]

#[path = "../common/stack.rs"]
mod stack;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use shared_auth::telemetry::{LogFormat, init_exporting_to};
use shared_auth::testing::{TEST_SECRET, TestDatabase, token};
use tokio::process::{Child, Command};

/// A span as received, with the service that sent it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: Vec<(String, String)>,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

type Spans = Arc<Mutex<Vec<Received>>>;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text_of(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

async fn receive(State(spans): State<Spans>, body: Bytes) -> &'static str {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf payload");
    let mut spans = spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text_of(kv.value.as_ref()))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            spans.push(Received {
                service: service.clone(),
                name: span.name,
                kind: span.kind,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                attributes: span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), text_of(kv.value.as_ref())))
                    .collect(),
            });
        }
    }
    ""
}

async fn start_receiver() -> (String, Spans) {
    let spans: Spans = Arc::default();
    let app = Router::new()
        .route("/v1/traces", post(receive))
        .with_state(spans.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, spans)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real gateway binary, exporting to the receiver, in front of `lingo_url`.
async fn start_gateway(lingo_url: &str, otlp: &str) -> (Child, String) {
    start_gateway_with(lingo_url, otlp, &[]).await
}

/// Like [`start_gateway`], with extra environment variables.
async fn start_gateway_with(lingo_url: &str, otlp: &str, env: &[(&str, &str)]) -> (Child, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .arg("serve")
        .env_clear()
        .envs(env.iter().copied())
        .env("GATEWAY_LISTEN_ADDR", format!("127.0.0.1:{port}"))
        .env("LINGO_UPSTREAMS", lingo_url)
        .env("NEWS_UPSTREAMS", lingo_url)
        .env("AUTH_HS256_SECRET", TEST_SECRET)
        .env("RATE_LIMIT_ENABLED", "false")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{url}/healthz")).await.is_err() {
        assert!(Instant::now() < deadline, "the gateway did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, url)
}

/// Waits until `found` finds what it looks for in the received spans.
async fn wait_for<T>(spans: &Spans, what: &str, found: impl Fn(&[Received]) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(result) = found(&spans.lock().unwrap()) {
            return result;
        }
        if Instant::now() > deadline {
            let spans = spans.lock().unwrap();
            let seen: Vec<String> = spans
                .iter()
                .map(|s| format!("{}:{}", s.service, s.name))
                .collect();
            panic!("never received {what}; spans seen: {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_is_one_trace_from_the_gateway_down_to_sql() {
    let (otlp, spans) = start_receiver().await;
    let telemetry = init_exporting_to(
        "lingo-service",
        LogFormat::Human,
        format!("{otlp}/v1/traces"),
        Duration::from_millis(100),
    );

    let db = TestDatabase::create().await;
    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    let lingo_url = stack::start_lingo(&db).await;
    let (_gateway, gateway_url) = start_gateway(&lingo_url, &otlp).await;
    let client = reqwest::Client::new();

    // A request without a traceparent: the gateway starts the trace.
    let response = client
        .get(format!("{gateway_url}/v1/lingo/me/xp"))
        .bearer_auth(token("traced-learner"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let (client_span, server_span) = wait_for(
        &spans,
        "the service's server span under the gateway's client span",
        |spans| {
            spans
                .iter()
                .filter(|s| s.service == "gateway" && s.kind == SpanKind::Client as i32)
                .find_map(|client| {
                    spans
                        .iter()
                        .find(|s| {
                            s.service == "lingo-service"
                                && s.kind == SpanKind::Server as i32
                                && s.parent_span_id == client.span_id
                        })
                        .map(|server| (client.clone(), server.clone()))
                })
        },
    )
    .await;
    assert_eq!(client_span.trace_id, server_span.trace_id);
    assert_eq!(server_span.name, "GET /v1/lingo/me/xp");
    // OpenTelemetry's HTTP client conventions: the replica's host and port, apart.
    let replica = reqwest::Url::parse(&lingo_url).unwrap();
    assert_eq!(client_span.attribute("server.address"), replica.host_str());
    let port = replica.port_or_known_default().unwrap().to_string();
    assert_eq!(client_span.attribute("server.port"), Some(port.as_str()));
    assert_eq!(client_span.attribute("upstream.group"), Some("lingo"));
    let gateway_span = wait_for(
        &spans,
        "the gateway's server span, parent of its client span",
        |spans| {
            spans
                .iter()
                .find(|s| s.service == "gateway" && s.span_id == client_span.parent_span_id)
                .cloned()
        },
    )
    .await;
    assert_eq!(gateway_span.kind, SpanKind::Server as i32);
    // Named by the route table's template, not the raw path (bounded span names).
    assert_eq!(gateway_span.name, "GET /v1/lingo/me/xp");

    let sql = wait_for(
        &spans,
        "a SQL span under the service's server span",
        |spans| {
            spans
                .iter()
                .find(|s| {
                    s.parent_span_id == server_span.span_id
                        && s.attribute("db.system") == Some("postgresql")
                })
                .cloned()
        },
    )
    .await;
    assert_eq!(sql.trace_id, server_span.trace_id);
    assert_eq!(sql.kind, SpanKind::Client as i32);
    let operation = sql.attribute("db.operation").unwrap();
    assert!(
        ["SELECT", "INSERT", "WITH", "UPDATE"].contains(&operation),
        "{operation}"
    );
    // The statement summary has placeholders, never the caller's values.
    assert!(
        !sql.attribute("db.query.summary")
            .unwrap_or_default()
            .contains("traced-learner")
    );

    // A request that arrives with a traceparent keeps its trace id end to end.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = client
        .get(format!("{gateway_url}/v1/lingo/me/progress"))
        .bearer_auth(token("traced-learner"))
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let services = wait_for(
        &spans,
        "spans of the client's trace from both binaries",
        |spans| {
            let of_trace: Vec<&Received> =
                spans.iter().filter(|s| s.trace_id == trace_id).collect();
            let both = ["gateway", "lingo-service"]
                .iter()
                .all(|service| of_trace.iter().any(|s| s.service == *service));
            both.then_some(of_trace.len())
        },
    )
    .await;
    assert!(
        services >= 3,
        "gateway request + client spans and the service's spans"
    );
    telemetry.shutdown().await;
}

/// An upstream that records the `traceparent` of every request it gets.
async fn start_traceparent_recorder() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = {
        let seen = seen.clone();
        move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                let traceparent = headers
                    .get("traceparent")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                seen.lock().unwrap().push(traceparent);
                "{}"
            }
        }
    };
    // No document of its own (the gateway keeps routing by its compiled-in one): the gateway's
    // reads of it are no requests under test.
    let no_document = || async { axum::http::StatusCode::NOT_FOUND };
    let app = Router::new()
        .route("/readyz", axum::routing::get(|| async { "ready" }))
        .route("/v1/{group}/openapi.json", axum::routing::get(no_document))
        .fallback(record);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn the_sampler_decides_what_is_exported_and_the_context_still_goes_upstream() {
    let (otlp, spans) = start_receiver().await;
    let (upstream, traceparents) = start_traceparent_recorder().await;
    // Parent-based ratio 0: only traces whose caller sampled them are exported.
    let sampler = [
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0"),
    ];
    let (_gateway, gateway_url) = start_gateway_with(&upstream, &otlp, &sampler).await;
    let client = reqwest::Client::new();
    let get = |traceparent: Option<String>| {
        let mut request = client.get(format!("{gateway_url}/v1/news/articles"));
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        request.send()
    };

    let dropped = "0af7651916cd43dd8448eb211c80319c";
    assert_eq!(get(None).await.unwrap().status(), 200);
    let unsampled_parent = format!("00-{dropped}-b7ad6b7169203331-00");
    assert_eq!(get(Some(unsampled_parent)).await.unwrap().status(), 200);
    let kept = "4bf92f3577b34da6a3ce929d0e0e4736";
    let sampled_parent = format!("00-{kept}-00f067aa0ba902b7-01");
    assert_eq!(get(Some(sampled_parent)).await.unwrap().status(), 200);

    // The sampled trace arrives; give the dropped ones two more export rounds to show up.
    wait_for(&spans, "the sampled trace", |spans| {
        spans.iter().find(|s| s.trace_id == kept).cloned()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let exported: Vec<String> = spans
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.trace_id.clone())
        .collect();
    assert!(
        exported.iter().all(|id| id == kept),
        "only the sampled trace is exported: {exported:?}"
    );

    // Every request still carried a trace context upstream, dropped or not.
    let seen = traceparents.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().all(|t| t.starts_with("00-")), "{seen:?}");
    assert!(seen[0].ends_with("-00"), "not sampled: {seen:?}");
    assert!(
        seen[1].contains(dropped) && seen[1].ends_with("-00"),
        "{seen:?}"
    );
    assert!(
        seen[2].contains(kept) && seen[2].ends_with("-01"),
        "{seen:?}"
    );
}

/// Parses Prometheus text and returns the sum of the samples of `metric` (all label sets).
fn total(text: &str, metric: &str) -> f64 {
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == metric)
        .map(|sample| match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

async fn scrape(client: &reqwest::Client, base: &str) -> String {
    let response = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200, "{base}/metrics");
    response.text().await.unwrap()
}

#[tokio::test]
async fn every_metrics_endpoint_is_prometheus_text_whose_counters_move() {
    let stack = stack::start(None).await;
    let (gateway_url, lingo_url, news_url) =
        (&stack.gateway_url, &stack.lingo_url, &stack.news_url);
    let client = reqwest::Client::new();

    let counters = [
        (gateway_url, "gateway_http_requests_total"),
        (lingo_url, "lingo_http_requests_total"),
        (news_url, "news_http_requests_total"),
    ];
    let mut before = Vec::new();
    for (base, metric) in counters {
        before.push(total(&scrape(&client, base).await, metric));
    }
    for path in [
        "/v1/lingo/languages",
        "/v1/news/articles?limit=1",
        "/v1/news/articles/nope",
    ] {
        client
            .get(format!("{gateway_url}{path}"))
            .send()
            .await
            .unwrap();
    }
    for ((base, metric), before) in counters.into_iter().zip(before) {
        let text = scrape(&client, base).await;
        let after = total(&text, metric);
        assert!(
            after >= before + 1.0,
            "{metric} did not move: {before} -> {after}"
        );
        if base != gateway_url {
            let service = if base == lingo_url { "lingo" } else { "news" };
            let connections = total(&text, &format!("{service}_db_pool_connections"));
            assert!(
                connections >= 1.0,
                "{service} pool gauges are exported:\n{text}"
            );
            assert!(text.contains(&format!("{service}_http_request_duration_seconds_bucket")));
        }
    }
}
