//! `GET /openapi.json` shows what the gateway routes: the documents it learned from the replicas
//! (merged as the committed `openapi.json` is), the compiled-in part of a group not read yet.
//! Real HTTP: stand-in replicas on port 0 whose documents the tests change.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Document, TestGateway, Upstream, committed_document, config};
use crate::learned::{eventually, status_with_token};

const RELATED: &str = "/v1/news/articles/{article_id}/related";

/// The committed news document with `GET` at `path` too, as a newer news-service publishes it.
fn news_with(path: &str) -> Value {
    let mut document = committed_document("news");
    document["paths"][path] = json!({"get": {
        "summary": format!("New: {path}"),
        "operationId": path,
        "security": [{"bearer": []}],
        "parameters": [{"name": "article_id", "in": "path", "required": true,
                        "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the related articles"}}
    }});
    document
}

/// How long a change may take to show (the refresh is every second).
const WITHIN: Duration = Duration::from_secs(5);

/// `GET /openapi.json`: the document and its `ETag`.
async fn served(gateway: &TestGateway) -> (Value, String) {
    let response = gateway.get("/openapi.json").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let etag = response.headers()["etag"]
        .to_str()
        .expect("ascii")
        .to_owned();
    (response.json().await.expect("json"), etag)
}

async fn documents(gateway: &TestGateway, path: &str) -> bool {
    served(gateway).await.0["paths"].get(path).is_some()
}

/// Waits until `replica` has served its document twice more: the gateway has taken what it
/// publishes now (the second read starts after the first was taken).
async fn wait_for_two_reads(replica: &Upstream) {
    let seen = replica.documents_served();
    eventually(WITHIN, "two document reads", || async {
        replica.documents_served() >= seen + 2
    })
    .await;
}

/// Every path of the committed document's `group` part is served as committed.
fn assert_part_is_committed(document: &Value, group: &str) {
    let committed = committed_document(group);
    let paths = committed["paths"].as_object().expect("paths");
    for (path, item) in paths {
        assert_eq!(&document["paths"][path], item, "{path}");
    }
    let prefix = format!("/v1/{group}/");
    let served = document["paths"].as_object().expect("paths");
    let count = served.keys().filter(|p| p.starts_with(&prefix)).count();
    assert_eq!(count, paths.len(), "{group}");
}

/// Every `$ref` of `document` names one of its components.
fn assert_refs_resolve(document: &Value) {
    fn walk(value: &Value, root: &Value) {
        match value {
            Value::Object(members) => {
                for (name, member) in members {
                    match member.as_str().and_then(|r| r.strip_prefix('#')) {
                        Some(pointer) if name == "$ref" => {
                            assert!(root.pointer(pointer).is_some(), "{pointer}");
                        }
                        _ => walk(member, root),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, root)),
            _ => {}
        }
    }
    walk(document, document);
}

#[tokio::test]
async fn an_endpoint_a_service_ships_is_documented_within_the_refresh_and_gone_once_removed() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    let committed: Value =
        serde_json::from_str(include_str!("../../../openapi.json")).expect("committed");
    let (_, first_etag) = served(&gateway).await;

    news.set_document(Document::Text(news_with(RELATED).to_string()));
    eventually(WITHIN, "the new endpoint documented", || {
        documents(&gateway, RELATED)
    })
    .await;
    assert_eq!(
        status_with_token(&gateway, "/v1/news/articles/a1/related").await,
        200,
        "documented and routed alike"
    );
    let (document, etag) = served(&gateway).await;
    assert_ne!(etag, first_etag);
    assert_eq!(document["info"], committed["info"], "the merged title");
    let operation = &document["paths"][RELATED]["get"];
    assert_eq!(operation["summary"], format!("New: {RELATED}"));
    let answers = operation["responses"].as_object().expect("responses");
    for status in ["200", "400", "429", "502", "503", "504"] {
        assert!(
            answers.contains_key(status),
            "{status}: the gateway's answers are added"
        );
    }
    assert_part_is_committed(&document, "lingo");
    assert_refs_resolve(&document);

    // The ETag is the document's: a client holding it gets 304 until the document changes.
    let revalidated = gateway
        .client
        .get(gateway.url("/openapi.json"))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("answered");
    assert_eq!(revalidated.status(), 304);
    assert_eq!(revalidated.headers()["etag"], etag.as_str());

    news.set_document(Document::Committed);
    eventually(WITHIN, "the endpoint removed", || async {
        !documents(&gateway, RELATED).await
    })
    .await;
    let (document, back_etag) = served(&gateway).await;
    assert_eq!(
        document, committed,
        "the replicas publish the committed parts again"
    );
    assert_ne!(back_etag, etag);
    let stale = gateway
        .client
        .get(gateway.url("/openapi.json"))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("answered");
    assert_eq!(stale.status(), 200);
}

/// A rolling update: the replicas' documents are documented together. The other group, never
/// read (its replica is down), keeps its compiled-in part, with the components it uses.
#[tokio::test]
async fn replicas_that_disagree_are_documented_together_beside_the_other_groups_part() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let lingo_addr = closed.local_addr().expect("addr");
    drop(closed);
    let old = Upstream::start("news-old").await;
    let new = Upstream::start("news-new").await;
    old.set_document(Document::Text(news_with("/v1/news/only-old").to_string()));
    new.set_document(Document::Text(news_with(RELATED).to_string()));
    let mut config = config(&[], &[&old, &new]);
    config.lingo_upstreams = format!("http://{lingo_addr}").parse().expect("url");
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;

    eventually(WITHIN, "both replicas' endpoints", || async {
        documents(&gateway, RELATED).await && documents(&gateway, "/v1/news/only-old").await
    })
    .await;
    let (document, _) = served(&gateway).await;
    assert_part_is_committed(&document, "lingo");
    assert_refs_resolve(&document);

    // The new version everywhere: the old one's endpoint goes.
    old.set_document(Document::Text(news_with(RELATED).to_string()));
    eventually(WITHIN, "the old replica's endpoint gone", || async {
        !documents(&gateway, "/v1/news/only-old").await
    })
    .await;
    assert!(documents(&gateway, RELATED).await);
}

/// A document the gateway routes by but cannot read as a whole OpenAPI document (no `info`, no
/// `responses`), and one it does not take at all, leave the group's last good part.
#[tokio::test]
async fn a_document_that_is_no_full_openapi_leaves_the_last_good_part() {
    let lingo = Upstream::start("lingo-1").await;
    let news = Upstream::start("news-1").await;
    news.set_document(Document::Text(news_with(RELATED).to_string()));
    let mut config = config(&[&lingo], &[&news]);
    config.routes_refresh_secs = 1;
    let gateway = TestGateway::start(config).await;
    eventually(WITHIN, "the good document", || documents(&gateway, RELATED)).await;
    let (good, good_etag) = served(&gateway).await;

    let minimal = json!({"openapi": "3.1.0", "paths": {
        "/v1/news/articles": {"get": {}},
        "/v1/news/minimal": {"get": {}}
    }});
    news.set_document(Document::Text(minimal.to_string()));
    eventually(WITHIN, "the minimal document routed", || async {
        gateway.get("/v1/news/minimal").await.status() == 200
    })
    .await;
    wait_for_two_reads(&news).await;
    assert_eq!(served(&gateway).await, (good.clone(), good_etag.clone()));

    news.set_document(Document::Text("not JSON".into()));
    wait_for_two_reads(&news).await;
    assert_eq!(served(&gateway).await, (good, good_etag));

    news.set_document(Document::Text(news_with("/v1/news/other").to_string()));
    eventually(WITHIN, "a good document again", || {
        documents(&gateway, "/v1/news/other")
    })
    .await;
    assert!(!documents(&gateway, RELATED).await);
    assert!(!documents(&gateway, "/v1/news/minimal").await);
}
