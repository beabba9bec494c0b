//! The gateway's shared cache of public answers (docs/gateway.md, "Cached public answers").
//!
//! An anonymous `GET` whose answer is a 200 saying `Cache-Control: public, max-age=N` (or
//! `s-maxage=N`) is kept for up to N seconds and replayed to the next anonymous requests for the
//! same target, byte for byte, with `Age`. Concurrent misses for one target wait for a single
//! upstream request (single flight); when that request yields nothing storable (a failure, a
//! personalised answer, a client that went away) the waiters go upstream themselves, each with
//! its own request, so none gets a wrong or a shared failure.
//!
//! Memory is bounded in bytes (each entry weighs its body, head and key plus a fixed overhead, so
//! the number of entries is bounded too); `quick_cache` evicts what is least used. Entries expire
//! at their own max-age. The answers being read to be stored are bounded too, all together
//! (`cache/fill.rs`), and a stored body goes to each client in pieces (`cache/replay.rs`). A
//! cached answer is kept as its head (a `HeaderMap` of shared byte strings) and body (`Bytes`): a
//! hit clones both, adds `Age`, and parses nothing.
//!
//! The cache sits where the edge would forward the request, after routing, token checks and
//! rate limiting; a hit still goes through everything the edge and the frontend do for every
//! answer (request id, `RateLimit-*`, CORS, metrics).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody as _};
use axum::http::uri::PathAndQuery;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use shared_auth::http::cache::none_match;
use shared_auth::{Problem, SharedCode};
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::proxy::{Outgoing, Proxy};
use crate::upstream::UpstreamGroup;

mod fill;
mod replay;

use fill::FillBudget;

/// Bookkeeping counted per entry beside its bytes (the map slot, the `HeaderMap`'s tables, the
/// `Arc`): it also bounds the number of entries, to the byte limit over this.
const ENTRY_OVERHEAD: u64 = 512;

/// The largest body stored. Larger answers are streamed through, never buffered.
const MAX_BODY_BYTES: u64 = 2 * 1024 * 1024;

/// The answers being read to be stored may hold, all together, the cache's size divided by this
/// (a quarter): stored and arriving answers together hold at most 1.25 times the cache's size.
const FILL_SHARE: u64 = 4;

/// How long a URL whose 200 answer was not storable skips single flight: its requests go
/// upstream at once instead of queueing behind one another (Varnish's "hit-for-miss").
const PASS_FOR: Duration = Duration::from_secs(10);

/// Request headers with which the cache is not used at all: a credential or cookie (the answer
/// may be personal), a range, and conditions other than `If-None-Match`, which the cache does
/// not evaluate (such requests are forwarded as they are).
static NOT_CACHED_WITH: [HeaderName; 7] = [
    header::AUTHORIZATION,
    header::COOKIE,
    header::RANGE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_MODIFIED_SINCE,
    header::IF_RANGE,
];

/// Response headers not stored: the gateway sets its own request id and `Age` on every replay.
static NOT_STORED: [HeaderName; 2] = [header::AGE, HeaderName::from_static("x-request-id")];

/// What a 304 carries of the stored answer (RFC 9110 15.4.5), `Age` added.
static KEPT_ON_304: [HeaderName; 6] = [
    header::CACHE_CONTROL,
    header::CONTENT_LOCATION,
    header::DATE,
    header::ETAG,
    header::EXPIRES,
    header::VARY,
];

/// Whether the cache may answer `request` or store its answer: an anonymous `GET` or `HEAD`
/// without a body, a cookie, a range, or a condition other than `If-None-Match`.
pub fn takes(request: &Outgoing) -> bool {
    (request.method == Method::GET || request.method == Method::HEAD)
        && request.body.is_end_stream()
        && !request
            .headers
            .keys()
            .any(|name| NOT_CACHED_WITH.contains(name))
}

/// One stored answer (always a 200).
struct Answer {
    /// The head as replayed: hop-by-hop headers, `Age` and `x-request-id` removed,
    /// `Content-Length` set.
    headers: HeaderMap,
    body: Bytes,
    /// The request headers the answer's `Vary` names, with the values its request had: another
    /// request is answered only if its values are the same.
    vary: Box<[(HeaderName, Box<[HeaderValue]>)]>,
    stored_at: Instant,
    /// The answer's `Age` when it arrived (0 from a service, which sends none).
    age_at_store: u64,
    expires_at: Instant,
    weight: u64,
}

#[derive(Clone)]
enum Cached {
    Answer(Arc<Answer>),
    /// The URL's last 200 answer was not storable; until then, no single flight for it.
    Pass {
        until: Instant,
    },
}

#[derive(Clone)]
struct Weigh;

impl quick_cache::Weighter<Box<str>, Cached> for Weigh {
    fn weight(&self, target: &Box<str>, cached: &Cached) -> u64 {
        let own = match cached {
            Cached::Answer(answer) => answer.weight,
            Cached::Pass { .. } => 0,
        };
        target.len() as u64 + own + ENTRY_OVERHEAD
    }
}

enum Lookup {
    Fresh(Arc<Answer>),
    Pass,
    Miss,
}

/// The cache of public answers.
pub struct AnswerCache {
    entries: quick_cache::sync::Cache<Box<str>, Cached, Weigh>,
    /// The upstream requests in flight for a target, each announcing its end by dropping its
    /// sender (see [`Leader`]).
    flights: Mutex<HashMap<Box<str>, watch::Receiver<FlightEnd>>>,
    largest_body: u64,
    /// The bytes all fills may hold at once.
    fills: FillBudget,
    /// How long a miss waits for another request's upstream call before making its own.
    wait_limit: Duration,
    metrics: Arc<Metrics>,
}

impl AnswerCache {
    /// A cache of at most `max_bytes` (`None` for 0: the cache is off). A waiting miss gives up
    /// waiting after `wait_limit` and goes upstream itself: longer than the leader's own bound
    /// (connect, then the upstream timeout), so that a leader's timeout reaches its waiters
    /// before they give up on it.
    pub fn new(max_bytes: u64, wait_limit: Duration, metrics: Arc<Metrics>) -> Option<Self> {
        if max_bytes == 0 {
            return None;
        }
        // Sizes the tables only; the byte limit is what bounds the cache.
        let estimated_entries = usize::try_from(max_bytes / 2048)
            .unwrap_or(usize::MAX)
            .clamp(64, 1 << 20);
        let entries = quick_cache::sync::Cache::with_weighter(estimated_entries, max_bytes, Weigh);
        // Each shard holds its share of the bytes and refuses an entry heavier than that.
        let largest_body = (entries.shard_capacity() / 2).min(MAX_BODY_BYTES);
        // Room for the largest body at least, so that any storable answer can be stored.
        let fills = FillBudget::new(
            (max_bytes / FILL_SHARE).max(largest_body),
            metrics.answer_cache_filling(),
        );
        Some(Self {
            entries,
            flights: Mutex::new(HashMap::new()),
            largest_body,
            fills,
            wait_limit,
            metrics,
        })
    }

    /// Answers `request` (one [`takes`] accepts) from the cache, or forwards it to `group`,
    /// storing the answer when it is public.
    pub async fn serve(
        &self,
        proxy: &Proxy,
        group: &UpstreamGroup,
        request: Outgoing,
    ) -> Result<Response, Problem> {
        let now = Instant::now();
        match self.lookup(request.path_and_query.as_str(), &request.headers, now) {
            Lookup::Fresh(answer) => {
                self.metrics.answer_cache_hit();
                Ok(answer.reply(&request.method, &request.headers, now))
            }
            Lookup::Pass => {
                self.metrics.answer_cache_pass();
                // Boxed, like every path that goes upstream: it keeps the hit's future small.
                if request.method == Method::HEAD {
                    return Box::pin(proxy.forward(group, request)).await;
                }
                // No single flight, but an answer that is storable now is stored (Varnish's
                // hit-for-miss): a URL that became public is not bypassed for the rest of the
                // pass.
                Box::pin(self.fetch(proxy, group, request, None)).await
            }
            Lookup::Miss => Box::pin(self.miss(proxy, group, request)).await,
        }
    }

    fn lookup(&self, target: &str, headers: &HeaderMap, now: Instant) -> Lookup {
        match self.entries.get(target) {
            None => Lookup::Miss,
            Some(Cached::Pass { until }) if until > now => Lookup::Pass,
            Some(Cached::Answer(answer)) if answer.expires_at > now => {
                if answer.chosen_by_same(headers) {
                    Lookup::Fresh(answer)
                } else {
                    Lookup::Miss
                }
            }
            Some(_) => {
                // Expired: dropped now rather than when evicted (unless replaced meanwhile).
                let expired = |cached: &Cached| match cached {
                    Cached::Answer(answer) => answer.expires_at <= now,
                    Cached::Pass { until } => *until <= now,
                };
                if self.entries.remove_if(target, expired).is_some() {
                    self.size_changed();
                }
                Lookup::Miss
            }
        }
    }

    async fn miss(
        &self,
        proxy: &Proxy,
        group: &UpstreamGroup,
        request: Outgoing,
    ) -> Result<Response, Problem> {
        if request.method == Method::HEAD {
            // A HEAD is answered from a stored GET, but never fills the cache (no body to store).
            self.metrics.answer_cache_miss();
            return proxy.forward(group, request).await;
        }
        let target = request.path_and_query.as_str();
        let leader = match self.join_flight(target) {
            Flight::Lead(leader) => {
                // The flight before this one may have stored the answer just after this
                // request's lookup.
                if let Lookup::Fresh(answer) = self.lookup(target, &request.headers, Instant::now())
                {
                    self.metrics.answer_cache_hit();
                    return Ok(answer.reply(&request.method, &request.headers, Instant::now()));
                }
                self.metrics.answer_cache_miss();
                Some(leader)
            }
            Flight::Wait(mut done) => {
                self.metrics.answer_cache_coalesced();
                // Ends when the leader reports a failure or drops its sender.
                let _ = tokio::time::timeout(self.wait_limit, done.changed()).await;
                if let Some(problem) = done.borrow().clone() {
                    return Err(problem);
                }
                let now = Instant::now();
                match self.lookup(target, &request.headers, now) {
                    Lookup::Fresh(answer) => {
                        return Ok(answer.reply(&request.method, &request.headers, now));
                    }
                    // Nothing stored: this request goes upstream on its own, without queueing
                    // again, and stores what it may.
                    Lookup::Pass | Lookup::Miss => None,
                }
            }
        };
        self.fetch(proxy, group, request, leader).await
    }

    /// The leader's role for `target`, or the end of the leader's flight to wait for.
    fn join_flight(&self, target: &str) -> Flight<'_> {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(done) = flights.get(target) {
            return Flight::Wait(done.clone());
        }
        let (sender, done) = watch::channel(None);
        let target: Box<str> = target.into();
        flights.insert(target.clone(), done);
        Flight::Lead(Leader {
            flights: &self.flights,
            target,
            sender,
        })
    }

    /// Forwards a `GET` and stores its answer when it may. The validator is the cache's to
    /// answer: the upstream is asked for the whole answer (without `If-None-Match`) so that it
    /// can be stored, and the client's `If-None-Match` is then judged against it.
    async fn fetch(
        &self,
        proxy: &Proxy,
        group: &UpstreamGroup,
        mut request: Outgoing,
        leader: Option<Leader<'_>>,
    ) -> Result<Response, Problem> {
        let if_none_match: Vec<HeaderValue> = request
            .headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .cloned()
            .collect();
        request.headers.remove(header::IF_NONE_MATCH);
        let target: Box<str> = request.path_and_query.as_str().into();
        // The headers the upstream saw, for the values of the ones its `Vary` names.
        let sent = request.headers.clone();
        let method = request.method.clone();
        let response = match proxy.forward(group, request).await {
            Ok(response) => response,
            Err(problem) => return Err(Self::shared_failure(leader.as_ref(), problem)),
        };

        let now = Instant::now();
        let Some(storable) = Storable::of(&response) else {
            if response.status() == StatusCode::OK {
                self.pass(target, now);
            }
            return Ok(judged_by_client(response, &if_none_match));
        };
        let (parts, body) = response.into_parts();
        let body = match read_whole(body, self.largest_body, &self.fills).await {
            Read::Whole(body) => body,
            Read::TooLarge(body) => {
                self.pass(target, now);
                let response = Response::from_parts(parts, body);
                return Ok(judged_by_client(response, &if_none_match));
            }
            Read::NoRoom(body) => {
                // Not the URL's fault: no pass, the next request for it tries to store it again.
                // The waiters (woken when this returns) go upstream on their own.
                self.metrics.answer_cache_unbuffered();
                let response = Response::from_parts(parts, body);
                return Ok(judged_by_client(response, &if_none_match));
            }
            Read::BrokeOff => {
                // Nothing of the answer has reached the client yet: a problem, not a broken body.
                self.metrics.upstream_error(group.group.label(), "reset");
                tracing::warn!(
                    url = &*target,
                    "upstream broke off a cacheable answer's body"
                );
                let problem = Problem::from_code(SharedCode::UpstreamUnavailable)
                    .with_detail("the upstream broke off its answer's body");
                return Err(Self::shared_failure(leader.as_ref(), problem));
            }
        };
        let answer = Arc::new(Answer::new(parts.headers, body, &sent, storable, now));
        self.entries
            .insert(target, Cached::Answer(Arc::clone(&answer)));
        self.size_changed();
        // The waiters find the answer stored once the flight has ended.
        drop(leader);
        let if_none_match: Vec<&HeaderValue> = if_none_match.iter().collect();
        let mut response = answer.reply_to(&method, &if_none_match, now);
        if answer.age_at_store == 0 {
            // Made by the service for this request: no `Age`. One the answer arrived with (from
            // a cache behind the gateway) stays, as on any answer passed on.
            response.headers_mut().remove(header::AGE);
        }
        Ok(response)
    }

    /// The leader's failure, told to its waiters too.
    fn shared_failure(leader: Option<&Leader<'_>>, problem: Problem) -> Problem {
        if let Some(leader) = leader {
            leader.failed(&problem);
        }
        problem
    }

    /// RFC 9111 4.4: an unsafe request (`POST`, `PUT`, `PATCH`, `DELETE`, ...) that succeeded
    /// (a 2xx or 3xx) changed what its target, and what its `Location` and `Content-Location`
    /// name, would answer: their stored answers are dropped, so the next anonymous read gets the
    /// service's. Only references that are a path on this gateway (`/v1/...`) are known here.
    pub fn invalidate_after_write(&self, target: &PathAndQuery, answer: &Response) {
        let status = answer.status();
        if !(status.is_success() || status.is_redirection()) {
            return;
        }
        let mut dropped = self.entries.remove(target.as_str()).is_some();
        for name in [header::LOCATION, header::CONTENT_LOCATION] {
            let reference = answer.headers().get(name).and_then(|v| v.to_str().ok());
            if let Some(path) = reference.filter(|r| r.starts_with('/') && !r.starts_with("//")) {
                dropped |= self.entries.remove(path).is_some();
            }
        }
        if dropped {
            self.size_changed();
        }
    }

    fn pass(&self, target: Box<str>, now: Instant) {
        self.entries.insert(
            target,
            Cached::Pass {
                until: now + PASS_FOR,
            },
        );
        self.size_changed();
    }

    fn size_changed(&self) {
        self.metrics
            .set_answer_cache_size(self.entries.weight(), self.entries.len());
    }
}

enum Flight<'a> {
    Lead(Leader<'a>),
    Wait(watch::Receiver<FlightEnd>),
}

/// The one request of a flight that goes upstream. When it is dropped (answer stored, nothing
/// storable, failure, or its client gone) the flight ends: its entry leaves the table first,
/// then its sender is dropped, which wakes every waiter.
struct Leader<'a> {
    flights: &'a Mutex<HashMap<Box<str>, watch::Receiver<FlightEnd>>>,
    target: Box<str>,
    sender: watch::Sender<FlightEnd>,
}

/// How a flight ended, for its waiters: `None` when they should look in the cache (the answer was
/// stored, or there was nothing to store), or the problem the leader's upstream request ended in,
/// which they share rather than each waiting out the same failure again.
type FlightEnd = Option<Problem>;

impl Leader<'_> {
    fn failed(&self, problem: &Problem) {
        self.sender.send_replace(Some(problem.clone()));
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        self.flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.target);
    }
}

/// What makes an answer storable, read from its head.
#[derive(Debug, PartialEq, Eq)]
struct Storable {
    fresh_for: Duration,
    age: u64,
    vary: Vec<HeaderName>,
}

impl Storable {
    /// `Some` for a 200 a shared cache may store (RFC 9111 3): `public` with a positive
    /// `s-maxage` (or else `max-age`) larger than its `Age`, without `no-store`, `private`,
    /// `no-cache`, `Set-Cookie` or `Vary: *`.
    fn of(response: &Response) -> Option<Self> {
        let headers = response.headers();
        if response.status() != StatusCode::OK || headers.contains_key(header::SET_COOKIE) {
            return None;
        }
        let lifetime = shared_lifetime(headers)?;
        let age = match headers.get(header::AGE) {
            None => 0,
            Some(value) => delta_seconds(value.to_str().ok()?)?,
        };
        let fresh_for = lifetime.checked_sub(age).filter(|&secs| secs > 0)?;
        Some(Self {
            fresh_for: Duration::from_secs(fresh_for),
            age,
            vary: vary_names(headers)?,
        })
    }
}

/// How long a shared cache may keep the answer, from `Cache-Control`; `None` when it may not
/// store it. A directive given twice, or a lifetime that is no number, counts as not storable
/// (RFC 9111 4.2.1 allows treating the answer as stale).
fn shared_lifetime(headers: &HeaderMap) -> Option<u64> {
    let mut public = false;
    let mut max_age = None;
    let mut s_maxage = None;
    for line in headers.get_all(header::CACHE_CONTROL) {
        for directive in line.to_str().ok()?.split(',') {
            let (name, value) = match directive.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.trim().trim_matches('"'))),
                None => (directive.trim(), None),
            };
            let is = |known: &str| name.eq_ignore_ascii_case(known);
            if is("no-store") || is("private") || is("no-cache") {
                return None;
            } else if is("public") {
                public = true;
            } else if is("max-age") {
                set_once(&mut max_age, value)?;
            } else if is("s-maxage") {
                set_once(&mut s_maxage, value)?;
            }
        }
    }
    if !public {
        return None;
    }
    s_maxage.or(max_age).filter(|&secs| secs > 0)
}

fn set_once(slot: &mut Option<u64>, value: Option<&str>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(delta_seconds(value?)?);
    Some(())
}

/// The largest lifetime or age the cache counts with: RFC 9111 1.2.2 has a value beyond what a
/// cache can represent taken as 2^31 seconds (68 years), and keeps every sum of them from
/// overflowing (`Instant + Duration` panics past its range).
const GREATEST_DELTA_SECONDS: u64 = 1 << 31;

/// RFC 9111 1.2.2: digits only; a value over [`GREATEST_DELTA_SECONDS`] (however many digits)
/// counts as that.
fn delta_seconds(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(text.parse::<u64>().map_or(GREATEST_DELTA_SECONDS, |secs| {
        secs.min(GREATEST_DELTA_SECONDS)
    }))
}

/// The request headers `Vary` names; `None` for `Vary: *` (never stored) or a name that is not
/// a header name.
fn vary_names(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut names: Vec<HeaderName> = Vec::new();
    for line in headers.get_all(header::VARY) {
        for name in line.to_str().ok()?.split(',').map(str::trim) {
            if name.is_empty() {
                continue;
            }
            if name == "*" {
                return None;
            }
            let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Some(names)
}

impl Answer {
    fn new(
        mut headers: HeaderMap,
        body: Bytes,
        request: &HeaderMap,
        storable: Storable,
        now: Instant,
    ) -> Self {
        for name in &NOT_STORED {
            headers.remove(name);
        }
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        let vary: Box<[(HeaderName, Box<[HeaderValue]>)]> = storable
            .vary
            .into_iter()
            .map(|name| {
                let values = request.get_all(&name).iter().cloned().collect();
                (name, values)
            })
            .collect();
        let head_bytes: usize = headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len())
            .sum();
        let vary_bytes: usize = vary
            .iter()
            .map(|(name, values)| {
                name.as_str().len() + values.iter().map(HeaderValue::len).sum::<usize>()
            })
            .sum();
        let weight = (body.len() + head_bytes + vary_bytes) as u64;
        Self {
            headers,
            body,
            vary,
            stored_at: now,
            age_at_store: storable.age,
            expires_at: now + storable.fresh_for,
            weight,
        }
    }

    /// Whether a request with `headers` would have got this answer: the headers `Vary` names
    /// have the values this answer's request had (absent where it had none).
    fn chosen_by_same(&self, headers: &HeaderMap) -> bool {
        self.vary
            .iter()
            .all(|(name, values)| headers.get_all(name).iter().eq(values.iter()))
    }

    fn reply(&self, method: &Method, request: &HeaderMap, now: Instant) -> Response {
        let if_none_match: Vec<&HeaderValue> =
            request.get_all(header::IF_NONE_MATCH).iter().collect();
        self.reply_to(method, &if_none_match, now)
    }

    /// The stored answer with its `Age`; 304 when `If-None-Match` matches its `ETag` (weak
    /// comparison, `*` matches), without a body for `HEAD`.
    fn reply_to(&self, method: &Method, if_none_match: &[&HeaderValue], now: Instant) -> Response {
        let age = self.age_at_store + now.saturating_duration_since(self.stored_at).as_secs();
        if validator_matches(&self.headers, if_none_match) {
            let mut response = not_modified(&self.headers);
            response
                .headers_mut()
                .insert(header::AGE, HeaderValue::from(age));
            return response;
        }
        let body = if *method == Method::HEAD {
            Body::empty()
        } else {
            replay::replayed(&self.body)
        };
        let mut response = Response::new(body);
        *response.headers_mut() = self.headers.clone();
        response
            .headers_mut()
            .insert(header::AGE, HeaderValue::from(age));
        response
    }
}

/// Whether an answer with `headers` matches the client's `If-None-Match` (weak comparison).
/// `*` matches any answer, with an `ETag` or without (RFC 9110 13.1.2: there is a current
/// representation).
fn validator_matches(headers: &HeaderMap, if_none_match: &[&HeaderValue]) -> bool {
    let etag = headers.get(header::ETAG).and_then(|v| v.to_str().ok());
    if_none_match
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| {
            value.trim() == "*"
                || etag
                    .is_some_and(|etag| none_match(value, etag.strip_prefix("W/").unwrap_or(etag)))
        })
}

/// The 304 for an answer with `headers`: the headers a 304 keeps, no body.
fn not_modified(headers: &HeaderMap) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NOT_MODIFIED;
    let kept = response.headers_mut();
    for name in &KEPT_ON_304 {
        for value in headers.get_all(name) {
            kept.append(name.clone(), value.clone());
        }
    }
    response
}

/// An answer that is not stored, to a client whose `If-None-Match` was held back from the
/// upstream so that the answer could be stored: its 200 is judged against the client's tags here.
fn judged_by_client(response: Response, if_none_match: &[HeaderValue]) -> Response {
    let if_none_match: Vec<&HeaderValue> = if_none_match.iter().collect();
    if response.status() == StatusCode::OK && validator_matches(response.headers(), &if_none_match)
    {
        return not_modified(response.headers());
    }
    response
}

enum Read {
    Whole(Bytes),
    /// What was read followed by the rest, to be streamed through as proxying would have.
    TooLarge(Body),
    /// Likewise, because the fills together hold as much as they may (`cache/fill.rs`).
    NoRoom(Body),
    /// The body ended in an error (a reset, a stall, broken framing) before its end.
    BrokeOff,
}

/// Reads `body` whole if it is at most `limit` bytes and `fills` has room for it. What is read
/// holds its bytes of `fills` until it is stored (or dropped), or, streamed through after all,
/// until it has gone to the client.
async fn read_whole(mut body: Body, limit: u64, fills: &FillBudget) -> Read {
    let size = body.size_hint();
    if size.lower() > limit {
        return Read::TooLarge(body);
    }
    let mut reserved = fills.reserve();
    // An answer with a `Content-Length` (every service's) takes its bytes at once.
    if !reserved.grow_to(size.exact().unwrap_or(0)) {
        return Read::NoRoom(body);
    }
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut total = 0u64;
    loop {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        match frame {
            None => break,
            Some(Ok(frame)) => {
                // Trailers are not kept (the services send none).
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                total += data.len() as u64;
                pieces.push(data);
                let too_large = total > limit;
                if too_large || !reserved.grow_to(total) {
                    let body = reserved.stream_through(pieces, body.into_data_stream());
                    return if too_large {
                        Read::TooLarge(body)
                    } else {
                        Read::NoRoom(body)
                    };
                }
            }
            Some(Err(_)) => return Read::BrokeOff,
        }
    }
    Read::Whole(match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.swap_remove(0),
        _ => pieces.concat().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::header_map;

    fn answer(status: u16, pairs: &[(&str, &str)]) -> Response {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::from_u16(status).expect("status");
        *response.headers_mut() = header_map(pairs);
        response
    }

    fn lifetime(pairs: &[(&str, &str)]) -> Option<u64> {
        Storable::of(&answer(200, pairs)).map(|s| s.fresh_for.as_secs())
    }

    #[test]
    fn only_public_answers_with_a_positive_lifetime_are_stored() {
        let cc = |value| lifetime(&[("cache-control", value)]);
        assert_eq!(cc("public, max-age=30"), Some(30));
        assert_eq!(cc("Public, Max-Age=\"30\""), Some(30));
        assert_eq!(cc("public, max-age=0, s-maxage=60"), Some(60));
        assert_eq!(cc("public, max-age=60, s-maxage=0"), None);
        assert_eq!(cc("public, max-age=60, must-revalidate"), Some(60));
        for refused in [
            "max-age=30",
            "public",
            "public, max-age=0",
            "public, max-age=30, no-store",
            "public, max-age=30, private",
            "public, max-age=30, no-cache",
            "public, no-cache=\"set-cookie\", max-age=30",
            "private, no-store",
            "public, max-age=30, max-age=60",
            "public, max-age=-1",
            "public, max-age=+5",
            "public, max-age=1e3",
            "public, max-age=",
        ] {
            assert_eq!(cc(refused), None, "{refused}");
        }
        // RFC 9111 1.2.2: a lifetime too large to represent is 2^31 s, never an overflow.
        for huge in [
            "public, max-age=18446744073709551615",
            "public, max-age=99999999999999999999999",
            "public, max-age=2147483649",
        ] {
            assert_eq!(cc(huge), Some(GREATEST_DELTA_SECONDS), "{huge}");
        }
        // Several lines count as one list.
        assert_eq!(
            lifetime(&[("cache-control", "public"), ("cache-control", "max-age=5")]),
            Some(5)
        );
        assert_eq!(
            lifetime(&[
                ("cache-control", "public, max-age=5"),
                ("cache-control", "no-store")
            ]),
            None
        );
    }

    #[test]
    fn cookies_other_statuses_and_vary_star_are_never_stored() {
        let public = ("cache-control", "public, max-age=30");
        assert!(Storable::of(&answer(200, &[public])).is_some());
        assert!(Storable::of(&answer(200, &[public, ("set-cookie", "a=b")])).is_none());
        assert!(Storable::of(&answer(200, &[public, ("vary", "*")])).is_none());
        assert!(Storable::of(&answer(200, &[public, ("vary", "accept, *")])).is_none());
        for status in [203, 204, 206, 301, 304, 404, 500, 503] {
            assert!(
                Storable::of(&answer(status, &[public])).is_none(),
                "{status}"
            );
        }
    }

    #[test]
    fn an_upstream_age_shortens_the_lifetime() {
        let public = ("cache-control", "public, max-age=30");
        assert_eq!(lifetime(&[public, ("age", "10")]), Some(20));
        assert_eq!(lifetime(&[public, ("age", "30")]), None);
        assert_eq!(lifetime(&[public, ("age", "x")]), None);
        assert_eq!(lifetime(&[public, ("age", "18446744073709551615")]), None);
    }

    #[test]
    fn vary_names_are_read_from_every_line_once() {
        let public = ("cache-control", "public, max-age=30");
        let storable = Storable::of(&answer(
            200,
            &[
                public,
                ("vary", "Authorization, accept-language"),
                ("vary", "authorization"),
            ],
        ))
        .expect("storable");
        let names: Vec<&str> = storable.vary.iter().map(HeaderName::as_str).collect();
        assert_eq!(names, ["authorization", "accept-language"]);
    }

    fn stored(vary: &[&str], request: &[(&str, &str)]) -> Answer {
        let mut headers = HeaderMap::new();
        headers.insert(header::ETAG, HeaderValue::from_static("\"tag\""));
        headers.insert(header::AGE, HeaderValue::from_static("3"));
        let request_headers = header_map(request);
        let storable = Storable {
            fresh_for: Duration::from_secs(30),
            age: 3,
            vary: vary
                .iter()
                .map(|name| HeaderName::from_bytes(name.as_bytes()).expect("name"))
                .collect(),
        };
        Answer::new(
            headers,
            Bytes::from_static(b"hello"),
            &request_headers,
            storable,
            Instant::now(),
        )
    }

    #[test]
    fn a_stored_answer_serves_only_requests_with_the_same_varying_headers() {
        let answer = stored(
            &["accept-language", "authorization"],
            &[("accept-language", "de")],
        );
        assert!(answer.chosen_by_same(&header_map(&[("accept-language", "de"), ("x", "y")])));
        assert!(!answer.chosen_by_same(&header_map(&[("accept-language", "fr")])));
        assert!(!answer.chosen_by_same(&header_map(&[])));
        assert!(!answer.chosen_by_same(&header_map(&[
            ("accept-language", "de"),
            ("authorization", "Bearer x")
        ])));
    }

    #[test]
    fn replies_carry_age_and_answer_a_matching_validator_with_304() {
        let answer = stored(&[], &[]);
        let now = answer.stored_at + Duration::from_millis(2500);
        let full = answer.reply_to(&Method::GET, &[], now);
        assert_eq!(full.status(), StatusCode::OK);
        assert_eq!(full.headers()["age"], "5");
        assert_eq!(full.headers()["content-length"], "5");
        let tag = HeaderValue::from_static("W/\"tag\"");
        let not_modified = answer.reply_to(&Method::GET, &[&tag], now);
        assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(not_modified.headers()["etag"], "\"tag\"");
        assert!(not_modified.headers().get("content-length").is_none());
        let other = HeaderValue::from_static("\"other\"");
        assert_eq!(
            answer.reply_to(&Method::GET, &[&other], now).status(),
            StatusCode::OK
        );
        let head = answer.reply_to(&Method::HEAD, &[], now);
        assert_eq!(head.headers()["content-length"], "5");
        assert!(head.body().is_end_stream());
    }
}
