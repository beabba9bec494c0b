//! The gateway's route table: which upstream group a path belongs to and whether docs/ marks the
//! endpoint Required (refused at the edge without a valid token) or Optional.
//!
//! A path is judged and forwarded exactly as the client spelled it, as the services' routers
//! match it: static segments literally, a parameter any non-empty segment. So an oddly spelled
//! path (`/v1/news//me/feed`, `/v1/news/m%65/feed`, `/v1/lingo/me/./xp`, a trailing slash) is no
//! endpoint at the gateway, as it is none at the service: 404, token or not, and never forwarded.

use axum::http::uri::PathAndQuery;
use axum::http::{Method, Uri};

/// The upstream groups behind the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    Lingo,
    News,
}

impl Group {
    pub fn label(self) -> &'static str {
        match self {
            Group::Lingo => "lingo",
            Group::News => "news",
        }
    }
}

/// What the edge demands of the caller before proxying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anonymous allowed; an invalid token is still 401 (fail closed).
    Optional,
    /// A valid token is needed.
    Required,
    /// A valid token carrying this scope is needed.
    Scoped(&'static str),
}

pub const ANALYTICS_SCOPE: &str = "lingo:analytics";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub group: Group,
    pub access: Access,
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

/// Most segments the route table looks at (`v1`, the group and four more).
const MAX_SEGMENTS: usize = 6;

/// The route of a path, or `None` when it is not under `/v1/lingo` or `/v1/news`. Segments are
/// compared as written, as [`endpoint_at`] and the services' routers compare them: a path that
/// reaches a group only once decoded or with its empty segments skipped (`/%761/news/me/feed`,
/// `//v1/news/me/feed`) belongs to none, and is 404 at the gateway as at a service.
pub fn classify(path: &str, method: &Method) -> Option<Route> {
    let path = path.split('?').next().unwrap_or_default();
    let mut segments = [""; MAX_SEGMENTS];
    let mut count = 0;
    for segment in path.strip_prefix('/')?.split('/').take(MAX_SEGMENTS) {
        segments[count] = segment;
        count += 1;
    }
    match &segments[..count] {
        ["v1", "lingo", rest @ ..] => Some(Route {
            group: Group::Lingo,
            access: lingo_access(rest),
        }),
        ["v1", "news", rest @ ..] => Some(Route {
            group: Group::News,
            access: news_access(rest, method),
        }),
        _ => None,
    }
}

fn lingo_access(rest: &[&str]) -> Access {
    match rest {
        ["me", ..] => Access::Required,
        ["analytics", ..] => Access::Scoped(ANALYTICS_SCOPE),
        _ => Access::Optional,
    }
}

fn news_access(rest: &[&str], method: &Method) -> Access {
    match rest {
        ["me", ..] => Access::Required,
        // Engagement toggles need a caller whatever the method: a method the service does not
        // serve there must not let anonymous traffic through either.
        ["articles", _, "like" | "bookmark", ..] => Access::Required,
        ["journalists" | "organizations", _, "follow", ..] => Access::Required,
        ["comments"] if method != Method::GET && method != Method::HEAD => Access::Required,
        _ => Access::Optional,
    }
}

/// What the services serve at a path, for the gateway's refusals: a service routes before it
/// authenticates, so a wrong method or a path that is no endpoint must get the service's 405 (with
/// `Allow`) or 404, not a 401, from the gateway too. Matched as the services' routers match: the
/// path as sent, static segments literally (`m%65` is not `me`), a parameter any non-empty
/// segment (no route has an empty one, so `//` and a trailing slash name nothing). `None` outside
/// `/v1/`. The services' routers are the truth; a system test holds this table to them.
pub fn endpoint_at(path: &str) -> Option<Endpoint> {
    let path = path.split('?').next().unwrap_or_default();
    let rest = path.strip_prefix("/v1/")?;
    if rest.split('/').any(str::is_empty) {
        return Some(Endpoint::NoRoute);
    }
    // On the stack (the longest route has four segments): this runs for every request.
    let mut segments = [""; 6];
    let mut count = 0;
    for segment in rest.split('/') {
        if count == segments.len() {
            return Some(Endpoint::NoRoute);
        }
        segments[count] = segment;
        count += 1;
    }
    let allow = match &segments[..count] {
        ["lingo", "languages" | "phrases" | "openapi.json"] => "GET,HEAD",
        ["lingo", "phrases", _] => "GET,HEAD",
        [
            "news",
            "articles" | "journalists" | "organizations" | "search" | "openapi.json",
        ] => "GET,HEAD",
        ["news", "articles", _] | ["news", "articles", _, "comments"] => "GET,HEAD",
        ["news", "comments", _] => "GET,HEAD",
        ["lingo", "me", "progress" | "xp" | "recommendations"] => "GET,HEAD",
        ["lingo", "me", "study-sessions"] => "POST,GET,HEAD",
        ["lingo", "me", "study-sessions", _] => "GET,HEAD",
        ["lingo", "analytics", "progress"] => "GET,HEAD",
        ["news", "me", "feed" | "bookmarks" | "following"] => "GET,HEAD",
        ["news", "articles", _, "like" | "bookmark"] => "POST,DELETE",
        ["news", "journalists" | "organizations", _, "follow"] => "POST,DELETE",
        ["news", "comments"] => "POST",
        _ => return Some(Endpoint::NoRoute),
    };
    Some(Endpoint::Allows(allow))
}

/// A path's endpoint at a service, as [`endpoint_at`] knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// No route of the service: 404.
    NoRoute,
    /// The methods it answers, as an `Allow` header lists them.
    Allows(&'static str),
}

impl Endpoint {
    /// Whether `method` is served here.
    pub fn allows(self, method: &Method) -> bool {
        match self {
            Endpoint::NoRoute => false,
            Endpoint::Allows(allow) => allow.split(',').any(|name| name == method.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(method: Method, path: &str) -> Option<Access> {
        classify(path, &method).map(|r| r.access)
    }

    #[test]
    fn api_md_required_endpoints_need_a_token() {
        use Access::*;
        let table: &[(Method, &str, Option<Access>)] = &[
            (Method::GET, "/v1/lingo/languages", Some(Optional)),
            (Method::GET, "/v1/lingo/phrases?language=de", Some(Optional)),
            (Method::GET, "/v1/lingo/phrases/p1", Some(Optional)),
            (Method::GET, "/v1/lingo/me/progress", Some(Required)),
            (Method::GET, "/v1/lingo/me/xp", Some(Required)),
            (Method::POST, "/v1/lingo/me/study-sessions", Some(Required)),
            (Method::GET, "/v1/lingo/me/study-sessions/1", Some(Required)),
            (Method::GET, "/v1/lingo/me/recommendations", Some(Required)),
            (Method::GET, "/v1/lingo/me", Some(Required)),
            (
                Method::GET,
                "/v1/lingo/analytics/progress",
                Some(Scoped(ANALYTICS_SCOPE)),
            ),
            (Method::GET, "/v1/news/articles", Some(Optional)),
            (Method::GET, "/v1/news/search", Some(Optional)),
            (Method::GET, "/v1/news/articles/a1", Some(Optional)),
            (Method::GET, "/v1/news/articles/a1/comments", Some(Optional)),
            (Method::POST, "/v1/news/articles/a1/like", Some(Required)),
            (Method::DELETE, "/v1/news/articles/a1/like", Some(Required)),
            (
                Method::POST,
                "/v1/news/articles/a1/bookmark",
                Some(Required),
            ),
            (
                Method::DELETE,
                "/v1/news/articles/a1/bookmark",
                Some(Required),
            ),
            (
                Method::POST,
                "/v1/news/journalists/j1/follow",
                Some(Required),
            ),
            (
                Method::DELETE,
                "/v1/news/organizations/o1/follow",
                Some(Required),
            ),
            (Method::GET, "/v1/news/organizations", Some(Optional)),
            (
                Method::GET,
                "/v1/news/journalists?organization_id=o1",
                Some(Optional),
            ),
            (Method::POST, "/v1/news/comments", Some(Required)),
            (Method::GET, "/v1/news/comments/c1", Some(Optional)),
            (Method::GET, "/v1/news/me/bookmarks", Some(Required)),
            (Method::GET, "/v1/news/me/following", Some(Required)),
            (Method::GET, "/v1/news/me/feed?cursor=x", Some(Required)),
            (Method::GET, "/v1/lingo", Some(Optional)),
            (Method::GET, "/v1/other", None),
            (Method::GET, "/v1/lingo-x/me", None),
            (Method::GET, "/%761/news/me/feed", None),
            (Method::GET, "//v1/news/me/feed", None),
            (Method::GET, "/v1//news/me/feed", None),
            (Method::GET, "/healthz", None),
        ];
        for (method, path, expected) in table {
            assert_eq!(access(method.clone(), path), *expected, "{method} {path}");
        }
    }

    #[test]
    fn unusual_spellings_name_no_endpoint() {
        for path in [
            "/v1/news//me/feed",
            "/v1/news/m%65/feed",
            "/v1/lingo/me/xp/",
            "/v1/lingo/me/./xp",
            "/v1/news/x/../me/feed",
            "/v1/news/x/%2e%2e/me/feed",
            "/v1/news/../lingo/me/xp",
            "/v1/news/articles//comments",
            "/v1/lingo/me",
        ] {
            assert_eq!(endpoint_at(path), Some(Endpoint::NoRoute), "{path}");
        }
        assert_eq!(endpoint_at("/v2/x"), None);
        assert_eq!(endpoint_at("/healthz"), None);
        let like = endpoint_at("/v1/news/articles/a1/like?x=1").expect("plain");
        assert!(like.allows(&Method::DELETE) && !like.allows(&Method::GET));
        // An escape in a parameter is the parameter's business, as at the service.
        let article = endpoint_at("/v1/news/articles/a%2D1").expect("an article");
        assert!(article.allows(&Method::GET));
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
