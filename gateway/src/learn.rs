//! Learning each group's routes from its own OpenAPI document, `GET /v1/<group>/openapi.json` on
//! its replicas: at start, every `ROUTES_REFRESH_SECS`, and when a replica comes back up. The
//! document's `paths` give the endpoints and methods, each operation's `security` the access
//! (`[{}, {"bearer": []}]` optional, `[{"bearer": []}]` required, `[{"bearer": ["scope"]}]`
//! scoped). Replicas that disagree (a rolling update) give every endpoint any of them documents,
//! with the strictest access any of them gives it.
//!
//! Until a group's document has been read once, the group is routed by the document compiled
//! into the binary (the committed, merged `openapi.json`). A document that is not JSON, not
//! OpenAPI, larger than [`MAX_DOCUMENT_BYTES`], or has a path outside the group's prefix is
//! ignored with a warning and counted in `gateway_route_documents_total{group,outcome}`; the
//! last good table stays.
//!
//! The documents a group is routed by are also its part of `GET /openapi.json`: each time they
//! are taken they go to [`ApiReference::learned`] (docs.rs), which rebuilds the served document
//! when they changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use http_body::Body as _;
use serde::Deserialize;

use crate::client::{OutBody, SendError, UpstreamClient};
use crate::docs::{ApiReference, OPENAPI_JSON};
use crate::metrics::Metrics;
use crate::routes::{Access, Endpoints, Group, GroupTable, RouteTable, method_index};
use crate::upstream::{Replica, UpstreamGroup};

/// The largest document read; the services' own are a few hundred KiB. A larger one is refused
/// as soon as its `Content-Length`, or its bytes so far, pass this.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// How long reading one replica's document may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The parts of an OpenAPI document the gateway reads; everything else is skipped unread.
#[derive(Deserialize)]
struct Document {
    openapi: String,
    /// Path → path item, and specification extensions (`x-...`), which may hold anything.
    paths: BTreeMap<String, serde_json::Value>,
    /// The default of every operation without its own `security`.
    #[serde(default)]
    security: Option<Vec<Requirement>>,
}

/// One alternative of a `security` list: scheme name → scopes, all needed.
type Requirement = BTreeMap<String, Vec<String>>;

/// A path item: its operations by method; other members (`parameters`, `summary`) are skipped.
#[derive(Deserialize)]
struct PathItem(BTreeMap<String, serde_json::Value>);

#[derive(Deserialize)]
struct Operation {
    #[serde(default)]
    security: Option<Vec<Requirement>>,
}

/// Why a replica's document was not used; [`Self::outcome`] is its metric label.
#[derive(Debug)]
pub enum Refused {
    /// No connection: the replica is down (the probe says so; logged at debug only). It is
    /// marked down, so that its document is read again as soon as it answers.
    Unavailable(String),
    /// The replica is up but gave no document: not a 200, or not within [`FETCH_TIMEOUT`], or
    /// the connection broken before or during its answer (a misconfigured or stuck replica:
    /// logged as a warning).
    NotServed(String),
    /// Larger than [`MAX_DOCUMENT_BYTES`].
    TooLarge,
    /// Not JSON, not OpenAPI 3, no operation at all, or an operation or path the gateway cannot
    /// read.
    Invalid(String),
    /// A path outside the group's prefix: not this group's document.
    WrongPrefix(String),
}

impl Refused {
    pub fn outcome(&self) -> &'static str {
        match self {
            Refused::Unavailable(_) | Refused::NotServed(_) => "unavailable",
            Refused::TooLarge => "too_large",
            Refused::Invalid(_) => "invalid",
            Refused::WrongPrefix(_) => "wrong_prefix",
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Unavailable(why) | Refused::NotServed(why) => {
                write!(f, "no document: {why}")
            }
            Refused::TooLarge => write!(f, "the document is over {MAX_DOCUMENT_BYTES} bytes"),
            Refused::Invalid(why) => write!(f, "not a usable OpenAPI document: {why}"),
            Refused::WrongPrefix(path) => write!(f, "path {path:?} is outside the group"),
        }
    }
}

/// The endpoints `document` gives `group`. Strict (`only_group` false): every path must be under
/// the group's prefix. The compiled-in document holds both groups, and is read with
/// `only_group` true: the other group's paths are skipped.
fn endpoints_of(document: &[u8], group: Group, only_group: bool) -> Result<Endpoints, Refused> {
    let document: Document =
        serde_json::from_slice(document).map_err(|e| Refused::Invalid(e.to_string()))?;
    if !document.openapi.starts_with("3.") {
        return Err(Refused::Invalid(format!(
            "openapi version {:?}",
            document.openapi
        )));
    }
    let mut endpoints = Endpoints::default();
    for (path, item) in &document.paths {
        if path.starts_with("x-") {
            continue;
        }
        if !path.starts_with(group.prefix()) {
            if only_group {
                continue;
            }
            return Err(Refused::WrongPrefix(path.clone()));
        }
        let item =
            PathItem::deserialize(item).map_err(|e| Refused::Invalid(format!("{path}: {e}")))?;
        for (name, operation) in &item.0 {
            let Some(method) = method_index(name).filter(|_| is_operation(name)) else {
                continue;
            };
            let operation = Operation::deserialize(operation)
                .map_err(|e| Refused::Invalid(format!("{name} {path}: {e}")))?;
            let security = operation.security.as_ref().or(document.security.as_ref());
            endpoints
                .add(path, method, access_of(security))
                .map_err(|e| Refused::Invalid(e.to_string()))?;
        }
    }
    // A service always documents some operation: an empty document is a broken build or a
    // misconfigured replica, and taken as the table it would turn every route of the group to 404.
    if endpoints.is_empty() {
        return Err(Refused::Invalid(
            "no operation under the group's prefix".into(),
        ));
    }
    Ok(endpoints)
}

/// The members of a path item that are operations (OpenAPI 3.1, section 4.8.9).
fn is_operation(name: &str) -> bool {
    matches!(
        name,
        "get" | "put" | "post" | "delete" | "options" | "head" | "patch" | "trace"
    )
}

/// An operation's access from its `security`: no list, or an empty one, or an empty alternative
/// (`{}`) lets anonymous callers through; otherwise the weakest alternative decides, an
/// alternative needing a token with all the scopes it lists (any scheme: the gateway's token is
/// the only credential).
fn access_of(security: Option<&Vec<Requirement>>) -> Access {
    let Some(alternatives) = security else {
        return Access::Optional;
    };
    alternatives
        .iter()
        .map(|requirement| {
            if requirement.is_empty() {
                Access::Optional
            } else {
                Access::scoped(requirement.values().flatten().map(String::as_str))
            }
        })
        .reduce(Access::weakest)
        .unwrap_or(Access::Optional)
}

/// The route tables of the document compiled into the binary.
pub fn compiled_routes() -> anyhow::Result<RouteTable> {
    let table = |group: Group| -> anyhow::Result<GroupTable> {
        let endpoints = endpoints_of(OPENAPI_JSON.as_bytes(), group, true)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("the compiled-in openapi.json for {}", group.label()))?;
        GroupTable::build(endpoints).map_err(|e| anyhow::anyhow!("compiled-in routes: {e}"))
    };
    Ok(RouteTable::new(table(Group::Lingo)?, table(Group::News)?))
}

/// Reads one replica's document: at most [`MAX_DOCUMENT_BYTES`], within [`FETCH_TIMEOUT`].
async fn read_document(
    client: &UpstreamClient,
    replica: &Replica,
    group: Group,
) -> Result<Vec<u8>, Refused> {
    let uri = replica
        .uri_for(group.document_path())
        .ok_or_else(|| Refused::Unavailable("no URI".into()))?;
    let mut request = Request::new(OutBody::Empty);
    *request.method_mut() = Method::GET;
    *request.uri_mut() = uri;
    request
        .headers_mut()
        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let read = async {
        let response =
            client
                .send(&replica.endpoint, request)
                .await
                .map_err(|error| match error {
                    SendError::NotSent(_) => Refused::Unavailable(error.to_string()),
                    SendError::Failed(_) => Refused::NotServed(error.to_string()),
                })?;
        if response.status() != StatusCode::OK {
            return Err(Refused::NotServed(format!("status {}", response.status())));
        }
        let declared = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > MAX_DOCUMENT_BYTES as u64) {
            return Err(Refused::TooLarge);
        }
        let mut body = std::pin::pin!(response.into_body());
        let mut bytes = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| Refused::NotServed(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_DOCUMENT_BYTES {
                    // Dropping the body closes the connection: the rest is never read.
                    return Err(Refused::TooLarge);
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    };
    tokio::time::timeout(FETCH_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| {
            Err(Refused::NotServed(format!(
                "not read within {FETCH_TIMEOUT:?}"
            )))
        })
}

/// Reads the document of every replica of `group` and, when at least one was good, routes the
/// group by what the good ones say together, and documents it by them at `/openapi.json`.
pub async fn refresh(
    group: &UpstreamGroup,
    routes: &RouteTable,
    reference: &Arc<ApiReference>,
    client: &UpstreamClient,
    metrics: &Metrics,
) {
    let label = group.group.label();
    let reads = group.replicas.iter().map(|replica| async move {
        let document = read_document(client, replica, group.group).await?;
        let endpoints = endpoints_of(&document, group.group, false)?;
        Ok::<_, Refused>((document, endpoints))
    });
    let results = futures_util::future::join_all(reads).await;
    let mut learned: Option<Endpoints> = None;
    let mut documents = Vec::new();
    for (replica, result) in group.replicas.iter().zip(results) {
        let outcome = match result {
            Ok((document, endpoints)) => {
                learned
                    .get_or_insert_with(Endpoints::default)
                    .merge(endpoints);
                documents.push(document);
                "ok"
            }
            Err(refused @ Refused::Unavailable(_)) => {
                tracing::debug!(group = label, upstream = %replica.base, %refused, "route document not read");
                // Whatever its last probe said: when it answers again, it is read again.
                replica.mark_down();
                refused.outcome()
            }
            Err(refused) => {
                tracing::warn!(group = label, upstream = %replica.base, %refused, "route document ignored; the last good routes stay");
                refused.outcome()
            }
        };
        metrics.route_document(label, outcome);
    }
    let Some(learned) = learned else {
        return;
    };
    if routes.current(group.group).source() != &learned {
        let paths = learned.len();
        match GroupTable::build(learned) {
            Ok(table) => {
                routes.replace(group.group, table);
                tracing::info!(
                    group = label,
                    paths,
                    "routes learned from the group's documents"
                );
            }
            Err(error) => {
                tracing::warn!(group = label, %error, "the documents together give no usable table; the last good routes stay");
                return;
            }
        }
    }
    // Parsing and merging a document takes milliseconds (more in a debug build): off the
    // runtime, which also runs the readiness probes.
    let (reference, group) = (reference.clone(), group.group);
    let taken = tokio::task::spawn_blocking(move || reference.learned(group, &documents)).await;
    if let Err(error) = taken {
        tracing::error!(group = label, %error, "the API reference was not rebuilt");
    }
}

/// Learns `group`'s routes at once, then every `every` and whenever one of its replicas comes
/// back up.
pub async fn learn_forever(
    group: Arc<UpstreamGroup>,
    routes: Arc<RouteTable>,
    reference: Arc<ApiReference>,
    client: UpstreamClient,
    metrics: Arc<Metrics>,
    every: Duration,
) {
    if group.replicas.is_empty() {
        return;
    }
    // Every `every` from one start to the next, not from the end of a read to the next start:
    // a replica slow to give its document (up to FETCH_TIMEOUT) does not stretch the period.
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        refresh(&group, &routes, &reference, &client, &metrics).await;
        tokio::select! {
            _ = ticks.tick() => {}
            () = group.came_back.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Method;

    use super::*;
    use crate::routes::{Lookup, Route};

    fn news(document: &str) -> Result<Endpoints, Refused> {
        endpoints_of(document.as_bytes(), Group::News, false)
    }

    #[test]
    fn security_gives_the_access() {
        let document = r#"{"openapi": "3.1.0", "paths": {
            "/v1/news/a": {"get": {"security": [{}, {"bearer": []}]},
                           "post": {"security": [{"bearer": []}]},
                           "delete": {"security": [{"bearer": ["news:admin"]}]},
                           "put": {},
                           "parameters": [], "summary": "not operations"},
            "/v1/news/b/{id}": {"patch": {"security": []}}
        }}"#;
        let table = GroupTable::build(news(document).expect("valid")).expect("table");
        let empty = GroupTable::build(Endpoints::default()).expect("empty");
        let routes = RouteTable::new(empty, table);
        let access = |method: Method, path| match routes.lookup(path, &method) {
            Lookup::Route(Route { access, .. }) => access,
            other => panic!("{method} {path}: {other:?}"),
        };
        assert_eq!(access(Method::GET, "/v1/news/a"), Access::Optional);
        assert_eq!(access(Method::HEAD, "/v1/news/a"), Access::Optional);
        assert_eq!(access(Method::POST, "/v1/news/a"), Access::Required);
        assert_eq!(
            access(Method::DELETE, "/v1/news/a"),
            Access::scoped(["news:admin"])
        );
        assert_eq!(access(Method::PUT, "/v1/news/a"), Access::Optional);
        assert_eq!(access(Method::PATCH, "/v1/news/b/1"), Access::Optional);
    }

    #[test]
    fn the_documents_default_security_applies_where_an_operation_has_none() {
        let document = r#"{"openapi": "3.0.3", "security": [{"bearer": []}], "paths": {
            "/v1/news/a": {"get": {}, "post": {"security": [{}]}}
        }}"#;
        let endpoints = news(document).expect("valid");
        let mut expected = Endpoints::default();
        let index = |name| method_index(name).expect("method");
        expected
            .add("/v1/news/a", index("get"), Access::Required)
            .expect("ok");
        expected
            .add("/v1/news/a", index("post"), Access::Optional)
            .expect("ok");
        assert_eq!(endpoints, expected);
    }

    #[test]
    fn specification_extensions_are_no_paths() {
        let document = r#"{"openapi": "3.1.0", "x-owner": "news", "paths": {
            "x-generated-by": {"tool": "utoipa"}, "x-count": 1,
            "/v1/news/a": {"x-rate-class": "cheap", "get": {"x-internal": true}}}}"#;
        let mut expected = Endpoints::default();
        expected
            .add(
                "/v1/news/a",
                method_index("get").expect("get"),
                Access::Optional,
            )
            .expect("ok");
        assert_eq!(news(document).expect("learned"), expected);
    }

    #[test]
    fn wrong_documents_are_refused_with_their_reason() {
        let outcome = |document: &str| news(document).err().map(|e| e.outcome());
        assert_eq!(outcome("not json"), Some("invalid"));
        assert_eq!(outcome(r#"{"paths": {}}"#), Some("invalid"));
        assert_eq!(
            outcome(r#"{"swagger": "2.0", "openapi": "2.0", "paths": {}}"#),
            Some("invalid")
        );
        assert_eq!(
            outcome(r#"{"openapi": "3.1.0", "paths": {"/v1/lingo/me/xp": {"get": {}}}}"#),
            Some("wrong_prefix")
        );
        assert_eq!(
            outcome(
                r#"{"openapi": "3.1.0", "paths": {"/v1/news/x": {"get": {"security": "bearer"}}}}"#
            ),
            Some("invalid")
        );
        assert_eq!(
            outcome(r#"{"openapi": "3.1.0", "paths": {"/v1/news/{a}-{b}": {"get": {}}}}"#),
            Some("invalid")
        );
        assert_eq!(
            outcome(r#"{"openapi": "3.1.0", "paths": {}}"#),
            Some("invalid")
        );
        assert_eq!(
            outcome(
                r#"{"openapi": "3.1.0", "paths": {"/v1/news/x": {"summary": "no operation"}}}"#
            ),
            Some("invalid")
        );
    }

    #[test]
    fn the_compiled_document_routes_both_groups() {
        let routes = compiled_routes().expect("the committed openapi.json is usable");
        for group in Group::ALL {
            let table = routes.current(group);
            assert!(table.source().len() > 3, "{}", group.label());
        }
        assert_eq!(
            routes.lookup("/v1/lingo/analytics/progress", &Method::GET),
            Lookup::Route(Route {
                group: Group::Lingo,
                access: Access::scoped(["lingo:analytics"]),
                span_name: "GET /v1/lingo/analytics/progress".into(),
            })
        );
    }
}
