//! The gateway's route table: which upstream group a path belongs to and whether docs/ marks the
//! endpoint Required (refused at the edge without a valid token) or Optional.
//!
//! The table is deliberately conservative: it matches on percent-decoded segments and ignores
//! empty segments, so an oddly spelled path (`/v1/news//me/feed`, `/v1/news/m%65/feed`) needs a
//! token whenever its plain spelling would. Dot segments are resolved before classification (see
//! [`normalize`]), and what is classified is exactly what is sent upstream.

use std::borrow::Cow;

use axum::http::uri::PathAndQuery;
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
/// A plain path (the usual case) is passed on as it came, without being rebuilt.
pub fn normalize(uri: &Uri) -> Option<PathAndQuery> {
    let path_and_query = uri.path_and_query()?;
    let text = path_and_query.as_str();
    if !text.starts_with('/') {
        return None;
    }
    if is_plain(text) {
        return Some(path_and_query.clone());
    }
    let url = reqwest::Url::parse(&format!("http://gateway.invalid{text}")).ok()?;
    let mut normalized = url.path().to_owned();
    if let Some(query) = url.query() {
        normalized.push('?');
        normalized.push_str(query);
    }
    PathAndQuery::from_maybe_shared(bytes::Bytes::from(normalized)).ok()
}

/// Whether URL parsing would leave `path_and_query` unchanged: only characters it never rewrites,
/// and no dot segment, plain or percent-encoded.
fn is_plain(path_and_query: &str) -> bool {
    let safe = path_and_query
        .bytes()
        .all(|b| NEVER_REWRITTEN[usize::from(b)]);
    let path = path_and_query.split('?').next().unwrap_or_default();
    // Most paths have neither a dot nor an escape, so no segment can be a dot segment.
    let may_have_dots = path.bytes().any(|b| b == b'.' || b == b'%');
    safe && !(may_have_dots && path.split('/').any(is_dot_segment))
}

/// The bytes URL parsing never rewrites in a path or query, as a table: this runs on every
/// request.
static NEVER_REWRITTEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = (byte as u8).is_ascii_alphanumeric();
        byte += 1;
    }
    let punctuation = b"-._~!$&()*+,;=:@/?%";
    let mut index = 0;
    while index < punctuation.len() {
        table[punctuation[index] as usize] = true;
        index += 1;
    }
    table
};

fn is_dot_segment(segment: &str) -> bool {
    if segment.len() > 6 || !segment.contains(['.', '%']) {
        return false;
    }
    let undotted = segment.to_ascii_lowercase().replace("%2e", ".");
    undotted == "." || undotted == ".."
}

/// Most segments the route table looks at (`v1`, the group and four more).
const MAX_SEGMENTS: usize = 6;

/// The route of a normalized path, or `None` when it is not under `/v1/lingo` or `/v1/news`.
pub fn classify(path: &str, method: &Method) -> Option<Route> {
    let path = path.split('?').next().unwrap_or_default();
    let mut decoded: [Cow<'_, str>; MAX_SEGMENTS] = Default::default();
    let mut count = 0;
    for segment in path.split('/').filter(|segment| !segment.is_empty()) {
        if count == MAX_SEGMENTS {
            break;
        }
        decoded[count] = if segment.contains('%') {
            percent_decode_str(segment).decode_utf8_lossy()
        } else {
            Cow::Borrowed(segment)
        };
        count += 1;
    }
    let mut segments: [&str; MAX_SEGMENTS] = [""; MAX_SEGMENTS];
    for (slot, segment) in segments.iter_mut().zip(&decoded) {
        *slot = segment.as_ref();
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
/// `Allow`) or 404, not a 401, from the gateway too. `None` when the path is spelled unusually
/// (an escape, an empty segment): the gateway cannot tell what the service would match, and the
/// token check stands. The services' routers are the truth; a system test holds this table to
/// them.
pub fn endpoint_at(path: &str) -> Option<Endpoint> {
    let path = path.split('?').next().unwrap_or_default();
    let rest = path.strip_prefix("/v1/")?;
    if rest.contains('%') || rest.split('/').any(str::is_empty) {
        return None;
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
            "articles" | "journalists" | "organizations" | "openapi.json",
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
        let uri: Uri = path.parse().expect("test URI");
        classify(normalize(&uri).expect("normalizable").as_str(), &method).map(|r| r.access)
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

    /// The fast path must give exactly what URL parsing gives.
    #[test]
    fn plain_paths_are_passed_on_as_url_parsing_would_write_them() {
        let inputs = [
            "/v1/news/articles?limit=2&offset=0",
            "/v1/news/articles/a.b/comments",
            "/v1/news/..%2Fx",
            "/v1/news/x/%2E%2e/me",
            "/v1/news/x/.%2e",
            "/v1/lingo/phrases?q=%27a%27&x=",
            "/v1/lingo/phrases?q='a'",
            "/v1/news/a%20b?",
            "//v1/news",
            "/v1/news/./x",
            "/v1/news/.../x",
            "/v1/news/%zz",
        ];
        // Every visible ASCII byte, in a path and in a query.
        let every_byte = (0x21u8..0x7f).flat_map(|b| {
            let c = char::from(b);
            [format!("/v1/news/a{c}b"), format!("/v1/news?q=a{c}b")]
        });
        let inputs = inputs.into_iter().map(str::to_owned).chain(every_byte);
        for input in inputs {
            let Ok(uri) = input.parse::<Uri>() else {
                continue;
            };
            let fast = normalize(&uri).expect("normalizable");
            let parsed =
                reqwest::Url::parse(&format!("http://gateway.invalid{input}")).expect("url");
            let mut slow = parsed.path().to_owned();
            if let Some(query) = parsed.query() {
                slow.push('?');
                slow.push_str(query);
            }
            assert_eq!(fast.as_str(), slow, "{input}");
        }
    }

    #[test]
    fn unusual_spellings_name_no_endpoint_so_the_token_check_stands() {
        for path in [
            "/v1/news//me/feed",
            "/v1/news/m%65/feed",
            "/v1/lingo/me/xp/",
            "/v2/x",
        ] {
            assert_eq!(endpoint_at(path), None, "{path}");
        }
        assert_eq!(endpoint_at("/v1/lingo/me"), Some(Endpoint::NoRoute));
        let like = endpoint_at("/v1/news/articles/a1/like?x=1").expect("plain");
        assert!(like.allows(&Method::DELETE) && !like.allows(&Method::GET));
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
        let route = classify(normalized.as_str(), &Method::GET).expect("routed");
        assert_eq!(route.group, Group::Lingo);
    }
}
