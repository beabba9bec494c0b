//! `GET /openapi.json` (both services' documents merged) and `GET /docs` (Swagger UI, served from
//! assets inside the binary so the page works offline and without a CDN).
//!
//! The document served is what the gateway routes by: the merge ([`merge`], the one the committed
//! `openapi.json` is made with) of each group's documents as learn.rs last read them from its
//! replicas, and, for a group not read yet, that group's part of the document compiled into the
//! binary (the committed `openapi.json`, which a test regenerates from the services' code). It
//! is rebuilt when a group's documents change, never per request: a request gets the bytes
//! kept in memory, with a strong `ETag` (304 for a matching `If-None-Match`).
//!
//! A document the gateway can route by but cannot read whole as OpenAPI (a hand-made one with no
//! `info` or `responses`, say) leaves its group's last good part in the served document, with a
//! warning in the log.

use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use serde_json::Value;
use shared_auth::http::cache::{etag_of, none_match};
use shared_auth::http::openapi::{OpenApi, merge};

use crate::routes::Group;

/// The merged OpenAPI document (kept in sync with the services by the `system` test).
pub const OPENAPI_JSON: &str = include_str!("../../openapi.json");

const SWAGGER_UI_JS: &[u8] = include_bytes!("../assets/swagger-ui/swagger-ui-bundle.js");
const SWAGGER_UI_CSS: &[u8] = include_bytes!("../assets/swagger-ui/swagger-ui.css");

const DOCS_HTML: &str = r##"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>lingo-news API reference</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      persistAuthorization: true,
      displayOperationId: true
    });
  </script>
</body>
</html>
"##;

const OPENAPI_JSON_PATH: &str = "/openapi.json";
const DOCS_PAGE_PATH: &str = "/docs";
const SWAGGER_UI_JS_PATH: &str = "/docs/swagger-ui-bundle.js";
const SWAGGER_UI_CSS_PATH: &str = "/docs/swagger-ui.css";

/// The paths [`router`] serves.
pub const PATHS: [&str; 4] = [
    OPENAPI_JSON_PATH,
    DOCS_PAGE_PATH,
    SWAGGER_UI_JS_PATH,
    SWAGGER_UI_CSS_PATH,
];

pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<ApiReference>: FromRef<S>,
{
    Router::new()
        .route(OPENAPI_JSON_PATH, get(openapi_json))
        .route(DOCS_PAGE_PATH, get(|| async { Html(DOCS_HTML) }))
        .route(
            SWAGGER_UI_JS_PATH,
            get(|| async { asset("text/javascript; charset=utf-8", SWAGGER_UI_JS) }),
        )
        .route(
            SWAGGER_UI_CSS_PATH,
            get(|| async { asset("text/css; charset=utf-8", SWAGGER_UI_CSS) }),
        )
}

async fn openapi_json(State(reference): State<Arc<ApiReference>>, request: HeaderMap) -> Response {
    let served = reference.served.load();
    let etag = (header::ETAG, served.etag.clone());
    // The document changes when a service ships: a cache may keep it, but asks again each time
    // (the `ETag` makes that a 304).
    let revalidate = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let matches = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| none_match(value, served.etag.to_str().unwrap_or_default()));
    if matches {
        return (StatusCode::NOT_MODIFIED, [etag, revalidate]).into_response();
    }
    let json = (
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    ([json, etag, revalidate], served.body.clone()).into_response()
}

fn asset(content_type: &'static str, bytes: &'static [u8]) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        bytes,
    )
        .into_response()
}

/// What `GET /openapi.json` answers, and the two groups' parts it is merged from.
pub struct ApiReference {
    served: ArcSwap<Served>,
    /// Changed by the two groups' learners, one at a time: each merges both parts.
    parts: Mutex<Parts>,
}

/// A merged document ready to send.
struct Served {
    body: Bytes,
    etag: HeaderValue,
}

impl Served {
    fn of(body: Bytes) -> Self {
        let etag = HeaderValue::from_str(&etag_of(&body)).expect("a quoted hex tag");
        Self { body, etag }
    }
}

struct Parts {
    lingo: Part,
    news: Part,
}

/// One group's part of the served document: the only parsed copy kept.
struct Part {
    document: OpenApi,
    /// A hash of the documents last read (good or not): the same again changes nothing.
    read: Option<u64>,
}

impl Parts {
    fn of(&mut self, group: Group) -> &mut Part {
        match group {
            Group::Lingo => &mut self.lingo,
            Group::News => &mut self.news,
        }
    }
}

impl ApiReference {
    /// The document compiled into the binary, served as it is until a group's documents are
    /// read.
    pub fn compiled() -> anyhow::Result<Self> {
        let part = |group: Group| -> anyhow::Result<Part> {
            let document = compiled_part(group)
                .with_context(|| format!("the compiled-in openapi.json for {}", group.label()))?;
            Ok(Part {
                document,
                read: None,
            })
        };
        Ok(Self {
            served: ArcSwap::from_pointee(Served::of(Bytes::from_static(OPENAPI_JSON.as_bytes()))),
            parts: Mutex::new(Parts {
                lingo: part(Group::Lingo)?,
                news: part(Group::News)?,
            }),
        })
    }

    /// Takes `documents`, the documents `group` is routed by now (every replica's that was
    /// good, together), as the group's part, unless they are what it last read.
    pub fn learned(&self, group: Group, documents: &[Vec<u8>]) {
        let read = fingerprint(documents);
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        let part = parts.of(group);
        if part.read == Some(read) {
            return;
        }
        part.read = Some(read);
        match union(documents) {
            Ok(document) => part.document = document,
            Err(error) => {
                tracing::warn!(group = group.label(), %error, "a route document is not a full OpenAPI document; /openapi.json keeps the group's last good part");
                return;
            }
        }
        let merged = merge([parts.lingo.document.clone(), parts.news.document.clone()]);
        match serde_json::to_string_pretty(&merged) {
            Ok(text) => {
                self.served
                    .store(Arc::new(Served::of(Bytes::from(text + "\n"))));
                tracing::info!(
                    group = group.label(),
                    "/openapi.json now shows the group's documents"
                );
            }
            Err(error) => tracing::warn!(%error, "the merged document cannot be written"),
        }
    }
}

fn fingerprint(documents: &[Vec<u8>]) -> u64 {
    let mut hasher = DefaultHasher::new();
    documents.hash(&mut hasher);
    hasher.finish()
}

/// The documents of one group's replicas as one: every operation any of them has (the first
/// replica's where they differ), every component.
fn union(documents: &[Vec<u8>]) -> Result<OpenApi, serde_json::Error> {
    let mut parsed = documents
        .iter()
        .map(|document| serde_json::from_slice::<OpenApi>(document));
    let mut union = parsed.next().unwrap_or_else(|| Ok(OpenApi::default()))?;
    for document in parsed {
        union.merge(document?);
    }
    without_path_extensions(&mut union);
    Ok(union)
}

/// utoipa reads an `x-...` member of `paths` both as an extension and as a path (two flattened
/// maps); the routes skip it (learn.rs), and so does the reference.
fn without_path_extensions(document: &mut OpenApi) {
    document
        .paths
        .paths
        .retain(|path, _| !path.starts_with("x-"));
    document.paths.extensions = None;
}

/// `group`'s paths of the compiled-in document, with the components they use (a learned part of
/// the other group then shows its own components, not the compiled-in ones of the same name).
/// Read straight into an [`OpenApi`]: a `serde_json::Value` would sort each schema's properties.
fn compiled_part(group: Group) -> serde_json::Result<OpenApi> {
    let mut document: OpenApi = serde_json::from_str(OPENAPI_JSON)?;
    document
        .paths
        .paths
        .retain(|path, _| path.starts_with(group.prefix()));
    let used = components_used(&serde_json::to_value(&document)?);
    if let Some(components) = &mut document.components {
        let used = |kind, name: &String| used.contains(&component_ref(kind, name));
        components.schemas.retain(|name, _| used("schemas", name));
        components
            .responses
            .retain(|name, _| used("responses", name));
    }
    // Tag names are unique in a document: the other group's tags come with its own part.
    let tagged = tags_used(&serde_json::to_value(&document.paths)?);
    if let Some(tags) = &mut document.tags {
        tags.retain(|tag| tagged.contains(&tag.name));
    }
    Ok(document)
}

/// The tags the operations of `paths` name.
fn tags_used(paths: &Value) -> BTreeSet<String> {
    let operations = paths
        .as_object()
        .into_iter()
        .flat_map(|items| items.values());
    operations
        .filter_map(Value::as_object)
        .flat_map(|item| item.values())
        .filter_map(|operation| operation.get("tags")?.as_array())
        .flatten()
        .filter_map(|tag| Some(tag.as_str()?.to_owned()))
        .collect()
}

/// The components `document`'s paths refer to, directly or through other components, each as
/// its `$ref` names it after `#/components/` (`schemas/Problem`).
fn components_used(document: &Value) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut pending = Vec::new();
    refs_in(&document["paths"], &mut pending);
    while let Some(reference) = pending.pop() {
        if let Some(target) = document.pointer(&format!("/components/{reference}"))
            && used.insert(reference)
        {
            refs_in(target, &mut pending);
        }
    }
    used
}

/// How a `$ref` names the component `name` of `kind` after `#/components/` (JSON pointer
/// escapes).
fn component_ref(kind: &str, name: &str) -> String {
    format!("{kind}/{}", name.replace('~', "~0").replace('/', "~1"))
}

fn refs_in(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                match member
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/components/"))
                {
                    Some(reference) if name == "$ref" => found.push(reference.to_owned()),
                    _ => refs_in(member, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs_in(item, found)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn served(reference: &ApiReference) -> Value {
        serde_json::from_slice(&reference.served.load().body).expect("json")
    }

    /// The committed document's part of `group`, as a replica of it publishes it.
    fn committed_part(group: Group) -> Value {
        let mut document: Value = serde_json::from_str(OPENAPI_JSON).expect("json");
        document["paths"]
            .as_object_mut()
            .expect("paths")
            .retain(|path, _| path.starts_with(group.prefix()));
        document
    }

    fn unresolved_refs(document: &Value) -> Vec<String> {
        let mut found = Vec::new();
        refs_in(document, &mut found);
        found.retain(|r| document.pointer(&format!("/components/{r}")).is_none());
        found
    }

    /// Merged again, the parts are the committed document but for the components no path uses.
    #[test]
    fn the_compiled_parts_merge_back_into_the_committed_document() {
        let parts = [Group::Lingo, Group::News].map(|group| compiled_part(group).expect("part"));
        for part in &parts {
            let part = serde_json::to_value(part).expect("json");
            assert_eq!(unresolved_refs(&part), Vec::<String>::new());
        }
        let merged = serde_json::to_string_pretty(&merge(parts)).expect("json") + "\n";

        let mut committed: OpenApi = serde_json::from_str(OPENAPI_JSON).expect("committed");
        let used = components_used(&serde_json::to_value(&committed).expect("json"));
        let components = committed.components.as_mut().expect("components");
        let unused: Vec<String> = components
            .schemas
            .keys()
            .filter(|name| !used.contains(&component_ref("schemas", name)))
            .cloned()
            .collect();
        assert!(unused.len() < 3, "{unused:?}");
        components.schemas.retain(|name, _| !unused.contains(name));
        let expected = serde_json::to_string_pretty(&committed).expect("json") + "\n";
        assert!(merged == expected, "merged again, the parts differ");
    }

    #[test]
    fn a_group_read_replaces_its_part_and_keeps_the_other_groups() {
        let reference = ApiReference::compiled().expect("compiled");
        assert_eq!(reference.served.load().body, OPENAPI_JSON.as_bytes());
        let mut news = committed_part(Group::News);
        news["paths"]["/v1/news/new"] =
            json!({"get": {"responses": {"200": {"description": "new"}}}});
        news["paths"]
            .as_object_mut()
            .expect("paths")
            .remove("/v1/news/me/feed");
        reference.learned(Group::News, &[news.to_string().into_bytes()]);

        let document = served(&reference);
        let paths = document["paths"].as_object().expect("paths");
        assert!(paths.contains_key("/v1/news/new"));
        assert!(!paths.contains_key("/v1/news/me/feed"));
        assert!(
            paths["/v1/news/new"]["get"]["responses"]
                .get("429")
                .is_some(),
            "the gateway's own answers are added"
        );
        let lingo = committed_part(Group::Lingo);
        for (path, item) in lingo["paths"].as_object().expect("paths") {
            assert_eq!(&paths[path], item, "{path}");
        }
        assert_eq!(unresolved_refs(&document), Vec::<String>::new());
    }

    #[test]
    fn replicas_that_disagree_are_documented_together() {
        let reference = ApiReference::compiled().expect("compiled");
        let with = |path: &str| {
            let mut news = committed_part(Group::News);
            news["paths"][path] = json!({"post": {"responses": {"201": {"description": path}}}});
            news.to_string().into_bytes()
        };
        reference.learned(Group::News, &[with("/v1/news/old"), with("/v1/news/new")]);
        let document = served(&reference);
        assert!(document["paths"]["/v1/news/old"]["post"].is_object());
        assert!(document["paths"]["/v1/news/new"]["post"].is_object());
    }

    #[test]
    fn a_document_that_is_no_full_openapi_leaves_the_last_good_part() {
        let reference = ApiReference::compiled().expect("compiled");
        let mut news = committed_part(Group::News);
        news["paths"]["/v1/news/new"] =
            json!({"get": {"responses": {"200": {"description": "new"}}}});
        reference.learned(Group::News, &[news.to_string().into_bytes()]);
        let good = reference.served.load().body.clone();

        let minimal = json!({"openapi": "3.1.0", "paths": {"/v1/news/x": {"get": {}}}});
        reference.learned(Group::News, &[minimal.to_string().into_bytes()]);
        assert_eq!(reference.served.load().body, good);
        // With another replica's good document, still not: the part is all the documents.
        let both = [
            news.to_string().into_bytes(),
            minimal.to_string().into_bytes(),
        ];
        reference.learned(Group::News, &both);
        assert_eq!(reference.served.load().body, good);
    }

    #[test]
    fn a_paths_extension_is_no_path_of_the_reference() {
        let reference = ApiReference::compiled().expect("compiled");
        let mut news = committed_part(Group::News);
        news["paths"]["x-generated-by"] = json!({"tool": "utoipa"});
        reference.learned(Group::News, &[news.to_string().into_bytes()]);
        let text = String::from_utf8(reference.served.load().body.to_vec()).expect("utf-8");
        assert_eq!(text.matches("x-generated-by").count(), 0, "{text}");
        assert!(served(&reference)["paths"]["/v1/news/articles"].is_object());
    }

    #[test]
    fn each_compiled_part_keeps_only_its_own_tags() {
        for group in [Group::Lingo, Group::News] {
            let part = serde_json::to_value(compiled_part(group).expect("part")).expect("json");
            let names: Vec<&str> = part["tags"]
                .as_array()
                .expect("tags")
                .iter()
                .filter_map(|tag| tag["name"].as_str())
                .collect();
            assert!(!names.is_empty());
            let own = group.label();
            assert!(
                names.iter().all(|name| name.starts_with(own)),
                "{own}: {names:?}"
            );
        }
    }

    #[test]
    fn the_same_documents_again_change_nothing() {
        let reference = ApiReference::compiled().expect("compiled");
        let news = committed_part(Group::News).to_string().into_bytes();
        reference.learned(Group::News, std::slice::from_ref(&news));
        let first = reference.served.load_full();
        reference.learned(Group::News, std::slice::from_ref(&news));
        assert!(Arc::ptr_eq(&first, &reference.served.load_full()));
        assert_eq!(
            served(&reference),
            serde_json::from_str::<Value>(OPENAPI_JSON).expect("json"),
            "the committed part, merged again, is the committed document"
        );
    }
}
