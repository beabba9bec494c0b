//! The gateway's route table: which upstream group a path belongs to and whether API.md marks the
//! endpoint Required (refused at the edge without a valid token) or Optional.
//!
//! The table is deliberately conservative: it matches on percent-decoded segments and ignores
//! empty segments, so an oddly spelled path (`/v1/news//me/feed`, `/v1/news/m%65/feed`) needs a
//! token whenever its plain spelling would. Dot segments are resolved before classification (see
//! [`normalize`]), and what is classified is exactly what is sent upstream.

use std::borrow::Cow;

use axum::http::{Method, Uri};
use percent_encoding::percent_decode_str;

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

/// The path and query to send upstream, with dot segments resolved the way an HTTP client would
/// resolve them (`/v1/news/x/../me` is `/v1/news/me`), or `None` when it cannot be a proxy target.
pub fn normalize(uri: &Uri) -> Option<String> {
    let path_and_query = uri.path_and_query()?.as_str();
    if !path_and_query.starts_with('/') {
        return None;
    }
    let url = reqwest::Url::parse(&format!("http://gateway.invalid{path_and_query}")).ok()?;
    let mut normalized = url.path().to_owned();
    if let Some(query) = url.query() {
        normalized.push('?');
        normalized.push_str(query);
    }
    Some(normalized)
}

/// The route of a normalized path, or `None` when it is not under `/v1/lingo` or `/v1/news`.
pub fn classify(path: &str, method: &Method) -> Option<Route> {
    let path = path.split('?').next().unwrap_or_default();
    let decoded: Vec<Cow<'_, str>> = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .map(|segment| percent_decode_str(segment).decode_utf8_lossy())
        .collect();
    let segments: Vec<&str> = decoded.iter().map(AsRef::as_ref).collect();
    match segments.as_slice() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn access(method: Method, path: &str) -> Option<Access> {
        let uri: Uri = path.parse().expect("test URI");
        classify(&normalize(&uri).expect("normalizable"), &method).map(|r| r.access)
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
            (Method::GET, "/healthz", None),
        ];
        for (method, path, expected) in table {
            assert_eq!(access(method.clone(), path), *expected, "{method} {path}");
        }
    }

    #[test]
    fn odd_spellings_do_not_dodge_the_table() {
        assert_eq!(
            access(Method::GET, "/v1/news//me/feed"),
            Some(Access::Required)
        );
        assert_eq!(
            access(Method::GET, "/v1/news/m%65/feed"),
            Some(Access::Required)
        );
        assert_eq!(
            access(Method::GET, "/v1/news/x/../me/feed"),
            Some(Access::Required)
        );
        assert_eq!(
            access(Method::GET, "/v1/news/x/%2e%2e/me/feed"),
            Some(Access::Required)
        );
        assert_eq!(
            access(Method::POST, "/v1/news/comments/"),
            Some(Access::Required)
        );
        assert_eq!(
            access(Method::GET, "/v1/lingo/./me/xp"),
            Some(Access::Required)
        );
        // Leaving a group through dot segments lands in the other group's table.
        let uri: Uri = "/v1/news/../lingo/me/xp".parse().expect("uri");
        let normalized = normalize(&uri).expect("normalizable");
        assert_eq!(normalized, "/v1/lingo/me/xp");
        let route = classify(&normalized, &Method::GET).expect("routed");
        assert_eq!(route.group, Group::Lingo);
    }
}
