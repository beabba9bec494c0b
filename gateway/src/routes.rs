//! The gateway's route table: which endpoints each upstream group serves, the methods each
//! takes, and whether a token is needed (Optional, Required or Scoped). The gateway knows no
//! endpoint by heart: the tables are built from the groups' OpenAPI documents (learn.rs) and
//! swapped whole while requests read them.
//!
//! A path is judged and forwarded exactly as the client spelled it, as the services' routers
//! match it: static segments literally (no percent-decoding), a parameter any non-empty segment.
//! So an oddly spelled path (`/v1/news//me/feed`, `/v1/news/m%65/feed`, `/v1/lingo/me/./xp`, a
//! trailing slash the document does not spell) is no endpoint at the gateway, as it is none at
//! the service: 404, token or not, and never forwarded.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderValue, Method, Uri};

/// The upstream groups behind the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    Lingo,
    News,
}

impl Group {
    pub const ALL: [Group; 2] = [Group::Lingo, Group::News];

    pub fn label(self) -> &'static str {
        match self {
            Group::Lingo => "lingo",
            Group::News => "news",
        }
    }

    /// The start of every path of the group (`/v1/lingo/`).
    pub fn prefix(self) -> &'static str {
        match self {
            Group::Lingo => "/v1/lingo/",
            Group::News => "/v1/news/",
        }
    }

    /// Where the group publishes its OpenAPI document.
    pub fn document_path(self) -> PathAndQuery {
        match self {
            Group::Lingo => PathAndQuery::from_static("/v1/lingo/openapi.json"),
            Group::News => PathAndQuery::from_static("/v1/news/openapi.json"),
        }
    }

    /// The group whose prefix `path` starts with.
    fn of(path: &str) -> Option<Group> {
        let rest = path.strip_prefix("/v1/")?;
        if rest.starts_with("lingo/") {
            Some(Group::Lingo)
        } else if rest.starts_with("news/") {
            Some(Group::News)
        } else {
            None
        }
    }
}

/// What the edge demands of the caller before proxying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Anonymous allowed; an invalid token is still 401 (fail closed).
    Optional,
    /// A valid token is needed.
    Required,
    /// A valid token carrying every one of these scopes (space-separated, sorted) is needed.
    Scoped(Arc<str>),
}

impl Access {
    /// A token with all of `scopes`; a token alone when there are none.
    pub fn scoped<'a>(scopes: impl IntoIterator<Item = &'a str>) -> Self {
        let scopes: BTreeSet<&str> = scopes.into_iter().collect();
        if scopes.is_empty() {
            return Access::Required;
        }
        let joined = scopes.into_iter().collect::<Vec<_>>().join(" ");
        Access::Scoped(joined.into())
    }

    fn scope_set(&self) -> BTreeSet<&str> {
        match self {
            Access::Scoped(scopes) => scopes.split(' ').collect(),
            _ => BTreeSet::new(),
        }
    }

    /// What both demand: where two documents (or a rolling update's two versions) disagree,
    /// the edge keeps the stricter rule.
    pub fn strictest(self, other: Access) -> Access {
        match (self, other) {
            (Access::Scoped(a), Access::Scoped(b)) if a == b => Access::Scoped(a),
            (a @ Access::Scoped(_), b @ Access::Scoped(_)) => {
                let (a, b) = (a.scope_set(), b.scope_set());
                Access::scoped(a.union(&b).copied())
            }
            (a @ Access::Scoped(_), _) | (_, a @ Access::Scoped(_)) => a,
            (Access::Required, _) | (_, Access::Required) => Access::Required,
            (Access::Optional, Access::Optional) => Access::Optional,
        }
    }

    /// What either alternative of an operation's `security` lets through. Two alternatives
    /// with different scopes, neither a subset of the other, need a token at the edge and leave
    /// the choice of scope to the service, which checks it again.
    pub fn weakest(self, other: Access) -> Access {
        match (self, other) {
            (Access::Optional, _) | (_, Access::Optional) => Access::Optional,
            (Access::Required, _) | (_, Access::Required) => Access::Required,
            (a, b) => {
                let (sa, sb) = (a.scope_set(), b.scope_set());
                if sa.is_subset(&sb) {
                    a
                } else if sb.is_subset(&sa) {
                    b
                } else {
                    Access::Required
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub group: Group,
    pub access: Access,
    /// The name of the request's server span: the method and the route's template with its
    /// parameters named by position (`GET /v1/news/articles/{p3}`), never the raw path, so span
    /// names stay a bounded set (one per endpoint) however many articles there are.
    pub span_name: Arc<str>,
}

/// The path and query to send upstream: the request's own, byte for byte (the services match
/// the same spelling), or `None` when it cannot be a proxy target (`OPTIONS *`).
pub fn upstream_target(uri: &Uri) -> Option<PathAndQuery> {
    let path_and_query = uri.path_and_query()?;
    path_and_query
        .as_str()
        .starts_with('/')
        .then(|| path_and_query.clone())
}

/// The methods a route table knows, in the order an `Allow` header lists them: the order the
/// services' routers list them for the endpoints they have (`POST,GET,HEAD`, `POST,DELETE`).
/// An OpenAPI document does not keep the order in which a service registered its handlers.
const METHODS: [Method; 8] = [
    Method::POST,
    Method::GET,
    Method::HEAD,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::TRACE,
];

/// The index of a method named as an OpenAPI path item names it (`get`), in [`METHODS`].
pub fn method_index(name: &str) -> Option<usize> {
    METHODS
        .iter()
        .position(|method| method.as_str().eq_ignore_ascii_case(name))
}

/// Why a path template cannot go into a route table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTemplate(pub String);

impl std::fmt::Display for BadTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "path {:?} is not a template the gateway can match",
            self.0
        )
    }
}

/// The endpoints of one group as documents describe them: path template → method → access.
/// Templates are kept with their parameters renamed by position (`/articles/{p2}`), so the
/// same endpoint named differently by two documents is one endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    paths: BTreeMap<String, BTreeMap<usize, Access>>,
}

impl Endpoints {
    /// Adds `method` (an index of [`METHODS`]) at the OpenAPI path template `template`; a
    /// method added twice keeps the stricter access.
    pub fn add(
        &mut self,
        template: &str,
        method: usize,
        access: Access,
    ) -> Result<(), BadTemplate> {
        let key = matchable(template).ok_or_else(|| BadTemplate(template.to_owned()))?;
        let methods = self.paths.entry(key).or_default();
        let access = match methods.remove(&method) {
            Some(known) => known.strictest(access),
            None => access,
        };
        methods.insert(method, access);
        Ok(())
    }

    /// Every endpoint of either, with the stricter access where both have one.
    pub fn merge(&mut self, other: Endpoints) {
        for (path, methods) in other.paths {
            let mine = self.paths.entry(path).or_default();
            for (method, access) in methods {
                let access = match mine.remove(&method) {
                    Some(known) => known.strictest(access),
                    None => access,
                };
                mine.insert(method, access);
            }
        }
    }

    /// How many paths.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// `template` (`/v1/news/articles/{article_id}`) as a matchit route with positional parameter
/// names, or `None` when a segment is empty (but for a trailing slash), a dot segment, or more
/// than one parameter. A trailing slash is kept: `/v1/news/tags/` is an endpoint of its own, as
/// at the service, and `/v1/news/tags` is not it.
fn matchable(template: &str) -> Option<String> {
    let rest = without_trailing_slash(template.strip_prefix('/')?);
    let mut route = String::with_capacity(template.len());
    for (position, segment) in rest.split('/').enumerate() {
        if !is_plain_segment(segment) {
            return None;
        }
        route.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) if !name.is_empty() && !name.contains(['{', '}', '*']) => {
                route.push_str(&format!("{{p{position}}}"));
            }
            Some(_) => return None,
            None if segment.contains(['{', '}']) => return None,
            None => route.push_str(segment),
        }
    }
    if rest.len() < template.len() - 1 {
        route.push('/');
    }
    Some(route)
}

fn is_plain_segment(segment: &str) -> bool {
    !segment.is_empty() && segment != "." && segment != ".."
}

/// `path` (without its leading `/`) without one trailing slash: the empty segment after it is
/// no segment, but part of the endpoint's spelling.
fn without_trailing_slash(path: &str) -> &str {
    path.strip_suffix('/').unwrap_or(path)
}

/// One endpoint of a built table.
#[derive(Debug)]
struct Endpoint {
    /// Each method with its access and its span name ([`Route::span_name`]).
    methods: Vec<(Method, Access, Arc<str>)>,
    /// The `Allow` header of a 405 here.
    allow: HeaderValue,
}

/// One group's routes, ready to match.
pub struct GroupTable {
    router: matchit::Router<usize>,
    endpoints: Vec<Endpoint>,
    /// What the table was built from, to tell whether a new document changes anything.
    source: Endpoints,
}

impl GroupTable {
    /// The table of `endpoints`; `HEAD` is served wherever `GET` is, as the services' routers
    /// serve it.
    pub fn build(source: Endpoints) -> Result<Self, String> {
        let mut router = matchit::Router::new();
        let mut endpoints = Vec::with_capacity(source.paths.len());
        for (route, methods) in &source.paths {
            let mut methods = methods.clone();
            let (get, head) = (method_index("GET"), method_index("HEAD"));
            if let (Some(get), Some(head)) = (get, head)
                && let Some(access) = methods.get(&get).cloned()
            {
                methods.entry(head).or_insert(access);
            }
            let methods: Vec<(Method, Access, Arc<str>)> = methods
                .into_iter()
                .map(|(index, access)| {
                    let method = METHODS[index].clone();
                    let span_name = format!("{method} {route}").into();
                    (method, access, span_name)
                })
                .collect();
            let allow = methods
                .iter()
                .map(|(method, _, _)| method.as_str())
                .collect::<Vec<_>>()
                .join(",");
            let allow = HeaderValue::from_str(&allow).map_err(|e| e.to_string())?;
            router
                .insert(route.as_str(), endpoints.len())
                .map_err(|e| format!("{route}: {e}"))?;
            endpoints.push(Endpoint { methods, allow });
        }
        Ok(Self {
            router,
            endpoints,
            source,
        })
    }

    /// The endpoints this table was built from.
    pub fn source(&self) -> &Endpoints {
        &self.source
    }
}

/// What the route table says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// An endpoint that takes this method.
    Route(Route),
    /// No endpoint at this path: 404.
    NotFound,
    /// An endpoint that does not take this method: 405 with this `Allow`.
    MethodNotAllowed(HeaderValue),
}

/// The route tables of both groups, each replaced whole when its group's documents change.
pub struct RouteTable {
    lingo: ArcSwap<GroupTable>,
    news: ArcSwap<GroupTable>,
}

impl RouteTable {
    pub fn new(lingo: GroupTable, news: GroupTable) -> Self {
        Self {
            lingo: ArcSwap::from_pointee(lingo),
            news: ArcSwap::from_pointee(news),
        }
    }

    fn of(&self, group: Group) -> &ArcSwap<GroupTable> {
        match group {
            Group::Lingo => &self.lingo,
            Group::News => &self.news,
        }
    }

    /// The table `group` is routed by now.
    pub fn current(&self, group: Group) -> Arc<GroupTable> {
        self.of(group).load_full()
    }

    /// From now on `group` is routed by `table`; requests already routed keep their answer.
    pub fn replace(&self, group: Group, table: GroupTable) {
        self.of(group).store(Arc::new(table));
    }

    /// The route of `method` at `path` (the path alone, without the query). Runs for every
    /// request: a prefix check, one pass over the segments, and one match in the group's table.
    pub fn lookup(&self, path: &str, method: &Method) -> Lookup {
        let Some(group) = Group::of(path) else {
            return Lookup::NotFound;
        };
        if !without_trailing_slash(&path[1..])
            .split('/')
            .all(is_plain_segment)
        {
            return Lookup::NotFound;
        }
        let table = self.of(group).load();
        let Ok(matched) = table.router.at(path) else {
            return Lookup::NotFound;
        };
        let endpoint = &table.endpoints[*matched.value];
        match endpoint
            .methods
            .iter()
            .find(|(known, _, _)| known == method)
        {
            Some((_, access, span_name)) => Lookup::Route(Route {
                group,
                access: access.clone(),
                span_name: span_name.clone(),
            }),
            None => Lookup::MethodNotAllowed(endpoint.allow.clone()),
        }
    }

    /// Whether some endpoint is at `path`, whatever the method.
    pub fn has_endpoint(&self, path: &str) -> bool {
        !matches!(self.lookup(path, &Method::GET), Lookup::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: &str = "lingo:analytics";

    fn table(entries: &[(&str, &[&str], Access)]) -> GroupTable {
        let mut endpoints = Endpoints::default();
        for (path, methods, access) in entries {
            for method in *methods {
                let index = method_index(method).expect("a method");
                endpoints
                    .add(path, index, access.clone())
                    .expect("a template");
            }
        }
        GroupTable::build(endpoints).expect("a table")
    }

    fn sample() -> RouteTable {
        use Access::*;
        let lingo = table(&[
            ("/v1/lingo/languages", &["get"], Optional),
            ("/v1/lingo/me/xp", &["get"], Required),
            ("/v1/lingo/me/study-sessions", &["get", "post"], Required),
            (
                "/v1/lingo/analytics/progress",
                &["get"],
                Access::scoped([SCOPE]),
            ),
        ]);
        let news = table(&[
            ("/v1/news/articles/{article_id}", &["get"], Optional),
            (
                "/v1/news/articles/{article_id}/like",
                &["post", "delete"],
                Required,
            ),
            ("/v1/news/me/feed", &["get"], Required),
        ]);
        RouteTable::new(lingo, news)
    }

    /// A route as these tests expect it; the span names have a test of their own.
    fn route(group: Group, access: Access) -> Lookup {
        Lookup::Route(Route {
            group,
            access,
            span_name: "".into(),
        })
    }

    /// `lookup` without its span name, to compare with [`route`].
    fn judged(lookup: Lookup) -> Lookup {
        match lookup {
            Lookup::Route(route) => Lookup::Route(Route {
                span_name: "".into(),
                ..route
            }),
            other => other,
        }
    }

    #[test]
    fn a_route_names_its_span_by_method_and_template_not_by_the_raw_path() {
        let routes = sample();
        let span_name = |method, path| match routes.lookup(path, &method) {
            Lookup::Route(route) => route.span_name.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            span_name(Method::GET, "/v1/lingo/me/xp"),
            "GET /v1/lingo/me/xp"
        );
        assert_eq!(
            span_name(Method::HEAD, "/v1/lingo/me/xp"),
            "HEAD /v1/lingo/me/xp"
        );
        assert_eq!(
            span_name(Method::DELETE, "/v1/news/articles/a1/like"),
            "DELETE /v1/news/articles/{p3}/like"
        );
        assert_eq!(
            span_name(Method::DELETE, "/v1/news/articles/another-article/like"),
            "DELETE /v1/news/articles/{p3}/like",
            "one name per endpoint, whatever the article"
        );
    }

    #[test]
    fn documented_endpoints_route_with_their_access() {
        let routes = sample();
        let get = |path| judged(routes.lookup(path, &Method::GET));
        assert_eq!(
            get("/v1/lingo/languages"),
            route(Group::Lingo, Access::Optional)
        );
        assert_eq!(
            get("/v1/lingo/me/xp"),
            route(Group::Lingo, Access::Required)
        );
        assert_eq!(
            judged(routes.lookup("/v1/lingo/me/xp", &Method::HEAD)),
            route(Group::Lingo, Access::Required),
            "HEAD wherever GET"
        );
        assert_eq!(
            get("/v1/lingo/analytics/progress"),
            route(Group::Lingo, Access::Scoped(SCOPE.into()))
        );
        assert_eq!(
            get("/v1/news/articles/a%2D1"),
            route(Group::News, Access::Optional),
            "an escape in a parameter is the parameter's business"
        );
        assert_eq!(
            judged(routes.lookup("/v1/news/articles/a1/like", &Method::DELETE)),
            route(Group::News, Access::Required)
        );
    }

    #[test]
    fn a_method_the_endpoint_lacks_is_405_with_allow_in_the_services_order() {
        let routes = sample();
        let allow = |method, path| match routes.lookup(path, &method) {
            Lookup::MethodNotAllowed(allow) => allow.to_str().expect("ascii").to_owned(),
            other => panic!("{method} {path}: {other:?}"),
        };
        assert_eq!(
            allow(Method::GET, "/v1/news/articles/a1/like"),
            "POST,DELETE"
        );
        assert_eq!(allow(Method::PUT, "/v1/lingo/languages"), "GET,HEAD");
        assert_eq!(
            allow(Method::DELETE, "/v1/lingo/me/study-sessions"),
            "POST,GET,HEAD"
        );
    }

    #[test]
    fn unusual_spellings_name_no_endpoint() {
        let routes = sample();
        for path in [
            "/v1/news//me/feed",
            "/v1/news/m%65/feed",
            "/v1/lingo/me/xp/",
            "/v1/lingo/me/./xp",
            "/v1/news/x/../me/feed",
            "/v1/news/x/%2e%2e/me/feed",
            "/v1/news/../lingo/me/xp",
            "/v1/news/articles/./like",
            "/v1/news/articles//like",
            "/v1/news/articles/",
            "/v1/lingo/me",
            "/v1/lingo",
            "/v1/lingo/",
            "/v1/other",
            "/v1/lingo-x/me/xp",
            "/%761/news/me/feed",
            "//v1/news/me/feed",
            "/v1//news/me/feed",
            "/healthz",
            "/",
        ] {
            assert_eq!(
                routes.lookup(path, &Method::GET),
                Lookup::NotFound,
                "{path}"
            );
            assert!(!routes.has_endpoint(path), "{path}");
        }
        assert!(routes.has_endpoint("/v1/news/articles/a1/like"));
    }

    #[test]
    fn a_template_with_a_trailing_slash_is_that_spelling_only() {
        let news = table(&[
            ("/v1/news/tags/", &["get"], Access::Optional),
            ("/v1/news/articles/{id}/", &["get"], Access::Required),
            ("/v1/news/articles/{id}", &["get"], Access::Optional),
        ]);
        let routes = RouteTable::new(table(&[]), news);
        let get = |path| judged(routes.lookup(path, &Method::GET));
        assert_eq!(get("/v1/news/tags/"), route(Group::News, Access::Optional));
        assert_eq!(
            get("/v1/news/articles/a1/"),
            route(Group::News, Access::Required)
        );
        assert_eq!(
            get("/v1/news/articles/a1"),
            route(Group::News, Access::Optional)
        );
        for path in [
            "/v1/news/tags",
            "/v1/news/tags//",
            "/v1/news/tags/./",
            "/v1/news/articles//",
            "/v1/news/articles/a1//",
        ] {
            assert_eq!(
                routes.lookup(path, &Method::GET),
                Lookup::NotFound,
                "{path}"
            );
        }
    }

    #[test]
    fn a_table_is_replaced_whole() {
        let routes = sample();
        let news = table(&[("/v1/news/articles/{id}/related", &["get"], Access::Required)]);
        routes.replace(Group::News, news);
        assert_eq!(
            judged(routes.lookup("/v1/news/articles/a1/related", &Method::GET)),
            route(Group::News, Access::Required)
        );
        assert_eq!(
            routes.lookup("/v1/news/me/feed", &Method::GET),
            Lookup::NotFound
        );
        assert_eq!(
            judged(routes.lookup("/v1/lingo/me/xp", &Method::GET)),
            route(Group::Lingo, Access::Required),
            "the other group keeps its table"
        );
    }

    #[test]
    fn disagreeing_documents_give_every_endpoint_with_the_strictest_access() {
        let mut old = Endpoints::default();
        let get = method_index("get").expect("get");
        let post = method_index("post").expect("post");
        old.add("/v1/news/articles/{article_id}", get, Access::Optional)
            .expect("template");
        old.add("/v1/news/a/{x}", get, Access::Optional)
            .expect("template");
        let mut new = Endpoints::default();
        new.add("/v1/news/articles/{id}", get, Access::Required)
            .expect("template");
        new.add("/v1/news/articles/{id}", post, Access::Optional)
            .expect("template");
        old.merge(new);
        assert_eq!(
            old.len(),
            2,
            "one endpoint, whatever its parameter is called"
        );
        let routes = RouteTable::new(
            GroupTable::build(Endpoints::default()).expect("empty"),
            GroupTable::build(old).expect("table"),
        );
        assert_eq!(
            judged(routes.lookup("/v1/news/articles/a1", &Method::GET)),
            route(Group::News, Access::Required)
        );
        assert_eq!(
            judged(routes.lookup("/v1/news/articles/a1", &Method::POST)),
            route(Group::News, Access::Optional)
        );
        assert_eq!(
            judged(routes.lookup("/v1/news/a/b", &Method::GET)),
            route(Group::News, Access::Optional)
        );
    }

    #[test]
    fn access_orders_scopes_above_tokens_above_anonymous() {
        use Access::*;
        let a = || Access::scoped(["a"]);
        let b = || Access::scoped(["b"]);
        assert_eq!(Optional.strictest(Required), Required);
        assert_eq!(Required.strictest(a()), a());
        assert_eq!(a().strictest(b()), Access::scoped(["a", "b"]));
        assert_eq!(Optional.weakest(a()), Optional);
        assert_eq!(Required.weakest(a()), Required);
        assert_eq!(a().weakest(Access::scoped(["a", "b"])), a());
        assert_eq!(a().weakest(b()), Required);
        assert_eq!(Access::scoped([]), Required);
        assert_eq!(Access::scoped(["b", "a", "b"]), Scoped("a b".into()));
    }

    #[test]
    fn templates_the_gateway_cannot_match_are_refused() {
        let mut endpoints = Endpoints::default();
        for bad in [
            "/v1/news/{a}-{b}",
            "/v1/news/files/{name}.json",
            "/v1/news//x",
            "/v1/news/x//",
            "/v1/news/./x",
            "/v1/news/x/./",
            "/",
            "//",
            "/v1/news/{}",
            "/v1/news/{*rest}",
            "v1/news/x",
        ] {
            assert!(endpoints.add(bad, 0, Access::Optional).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_target_is_forwarded_as_sent() {
        for target in [
            "/v1/news/articles?limit=2",
            "/v1/news/x/../me",
            "/v1/news/a%20b?",
        ] {
            let uri: Uri = target.parse().expect("uri");
            assert_eq!(upstream_target(&uri).expect("a target"), target);
        }
        assert_eq!(upstream_target(&"*".parse().expect("uri")), None);
    }
}
