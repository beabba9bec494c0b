//! Per-caller rate limits: a fixed window per caller key (`sub` of a valid token, else the client
//! address, IPv6 by its /64) with separate read and write budgets.
//!
//! The table is split into shards, each behind its own short lock, so callers on different shards
//! never wait for each other. Memory is bounded: windows that ended are swept once per window, and
//! a shard that is still full drops its idlest callers (least recently seen) to make room. It never
//! stops limiting: a new caller is always tracked.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use shared_auth::{Problem, SharedCode};

use crate::client_addr::limit_prefix;

/// Most independently locked parts of the table.
const SHARDS: usize = 32;
/// Fewest callers per part: a small table is not split (each part drops its own idlest callers,
/// so parts that are too small would drop active callers early).
const MIN_SHARD_KEYS: usize = 1024;

static LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
static REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
static RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Read,
    Write,
}

impl Budget {
    pub fn of(method: &Method) -> Self {
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            Budget::Read
        } else {
            Budget::Write
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    reads: u32,
    writes: u32,
}

/// The outcome of one check, rendered as `RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Seconds until the window ends (at least 1).
    pub reset_secs: u64,
}

impl Decision {
    /// Sets the `RateLimit-*` headers on `headers`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        headers.insert(LIMIT.clone(), HeaderValue::from(self.limit));
        headers.insert(REMAINING.clone(), HeaderValue::from(self.remaining));
        headers.insert(RESET.clone(), HeaderValue::from(self.reset_secs));
    }

    /// 429 `rate_limited` with `Retry-After` and the `RateLimit-*` headers.
    pub fn problem(&self) -> Problem {
        Problem::from_code(SharedCode::RateLimited)
            .with_detail(format!(
                "at most {} such requests per window; retry in {} s",
                self.limit, self.reset_secs
            ))
            .with_header(header::RETRY_AFTER, HeaderValue::from(self.reset_secs))
            .with_header(LIMIT.clone(), HeaderValue::from(self.limit))
            .with_header(REMAINING.clone(), HeaderValue::from(self.remaining))
            .with_header(RESET.clone(), HeaderValue::from(self.reset_secs))
    }
}

/// Whom a budget belongs to. A `sub` is kept as a keyed hash (no allocation per request; with 64
/// bits and a per-process random key, two callers sharing a budget by chance is negligible).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallerKey {
    Sub(u64),
    Ip(IpAddr),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    window: Window,
    last_seen: Instant,
}

type Shard = HashMap<CallerKey, Entry>;

pub struct RateLimiter {
    window: Duration,
    reads: u32,
    writes: u32,
    shard_capacity: usize,
    hasher: std::collections::hash_map::RandomState,
    shards: Vec<Mutex<Shard>>,
    epoch: Instant,
    /// Milliseconds after `epoch` when ended windows are next swept from every shard.
    next_sweep_ms: AtomicU64,
}

impl RateLimiter {
    /// A limiter tracking at most about `max_keys` callers.
    pub fn new(window: Duration, reads: u32, writes: u32, max_keys: usize) -> Self {
        let window = window.max(Duration::from_secs(1));
        let shards = (max_keys / MIN_SHARD_KEYS).clamp(1, SHARDS);
        Self {
            window,
            reads,
            writes,
            shard_capacity: max_keys.max(1).div_ceil(shards),
            hasher: Default::default(),
            shards: (0..shards).map(|_| Mutex::new(HashMap::new())).collect(),
            epoch: Instant::now(),
            next_sweep_ms: AtomicU64::new(window.as_millis() as u64),
        }
    }

    /// The key of a caller with a valid token.
    pub fn sub_key(&self, sub: &str) -> CallerKey {
        CallerKey::Sub(self.hasher.hash_one(sub))
    }

    /// The key of an anonymous caller: its address, IPv6 by its /64.
    pub fn ip_key(ip: IpAddr) -> CallerKey {
        CallerKey::Ip(limit_prefix(ip))
    }

    fn shard_of(&self, key: &CallerKey) -> &Mutex<Shard> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        &self.shards[index]
    }

    /// Counts one request of `key` against `budget` and says whether it may pass.
    pub fn check(&self, key: CallerKey, budget: Budget, now: Instant) -> Decision {
        let limit = match budget {
            Budget::Read => self.reads,
            Budget::Write => self.writes,
        };
        self.sweep_if_due(now);
        let mut shard = self
            .shard_of(&key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !shard.contains_key(&key) && shard.len() >= self.shard_capacity {
            self.make_room(&mut shard, now);
        }
        let entry = shard.entry(key).or_insert(Entry {
            window: Window {
                started: now,
                reads: 0,
                writes: 0,
            },
            last_seen: now,
        });
        entry.last_seen = now;
        let window = &mut entry.window;
        if now.duration_since(window.started) >= self.window {
            *window = Window {
                started: now,
                reads: 0,
                writes: 0,
            };
        }
        let used = match budget {
            Budget::Read => &mut window.reads,
            Budget::Write => &mut window.writes,
        };
        let allowed = *used < limit;
        if allowed {
            *used += 1;
        }
        let remaining = limit.saturating_sub(*used);
        let ends = window.started + self.window;
        let reset_secs = ends.saturating_duration_since(now).as_secs_f64().ceil() as u64;
        Decision {
            allowed,
            limit,
            remaining,
            reset_secs: reset_secs.max(1),
        }
    }

    /// A full shard: drop ended windows, and if that is not enough, the idlest eighth.
    fn make_room(&self, shard: &mut Shard, now: Instant) {
        let window = self.window;
        shard.retain(|_, entry| now.duration_since(entry.window.started) < window);
        if shard.len() < self.shard_capacity {
            return;
        }
        let evict = (self.shard_capacity / 8).max(1);
        let mut by_last_seen: Vec<(Instant, CallerKey)> = shard
            .iter()
            .map(|(key, entry)| (entry.last_seen, *key))
            .collect();
        by_last_seen.select_nth_unstable_by_key(evict - 1, |(seen, _)| *seen);
        for (_, key) in &by_last_seen[..evict] {
            shard.remove(key);
        }
    }

    /// Once per window, drops the ended windows of every shard (one shard locked at a time), so
    /// memory holds only the callers of about the current window.
    fn sweep_if_due(&self, now: Instant) {
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        let due = self.next_sweep_ms.load(Ordering::Relaxed);
        if now_ms < due {
            return;
        }
        let next = now_ms + self.window.as_millis() as u64;
        if self
            .next_sweep_ms
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return; // another request is sweeping
        }
        let window = self.window;
        for shard in &self.shards {
            shard
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|_, entry| now.duration_since(entry.window.started) < window);
        }
    }

    pub fn tracked_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    /// Most callers tracked at once.
    pub fn capacity(&self) -> usize {
        self.shard_capacity * self.shards.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> CallerKey {
        RateLimiter::ip_key(IpAddr::from(n.to_be_bytes()))
    }

    #[test]
    fn budgets_are_separate_and_reset_with_the_window() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 3, 1, 1000);
        let t0 = Instant::now();
        for expected_remaining in [2, 1, 0] {
            let d = limiter.check(ip(1), Budget::Read, t0);
            assert!(d.allowed);
            assert_eq!(d.remaining, expected_remaining);
        }
        let refused = limiter.check(ip(1), Budget::Read, t0 + Duration::from_secs(4));
        assert!(!refused.allowed);
        assert_eq!(refused.reset_secs, 6);
        assert!(
            limiter.check(ip(1), Budget::Write, t0).allowed,
            "writes have their own budget"
        );
        assert!(!limiter.check(ip(1), Budget::Write, t0).allowed);
        assert!(
            limiter.check(ip(2), Budget::Read, t0).allowed,
            "callers have their own budget"
        );
        let later = t0 + Duration::from_secs(10);
        assert!(limiter.check(ip(1), Budget::Read, later).allowed);
    }

    #[test]
    fn stale_keys_are_swept() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 3, 1, 1000);
        let t0 = limiter.epoch;
        for i in 0..100 {
            limiter.check(ip(i), Budget::Read, t0);
        }
        assert_eq!(limiter.tracked_keys(), 100);
        limiter.check(ip(1000), Budget::Read, t0 + Duration::from_secs(11));
        assert_eq!(limiter.tracked_keys(), 1);
    }

    #[test]
    fn a_full_table_keeps_limiting_old_and_new_callers() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 3, 1, 256);
        let t0 = limiter.epoch;
        let heavy = limiter.sub_key("heavy");
        for _ in 0..3 {
            assert!(limiter.check(heavy, Budget::Read, t0).allowed);
        }
        // A flood of distinct callers, 40 times the table, while the heavy caller keeps trying.
        for i in 0..10_000 {
            let at = t0 + Duration::from_micros(u64::from(i));
            limiter.check(ip(i), Budget::Read, at);
            if i % 100 == 0 {
                assert!(!limiter.check(heavy, Budget::Read, at).allowed, "at {i}");
            }
            assert!(limiter.tracked_keys() <= limiter.capacity());
        }
        // A caller first seen while the table is full is tracked and limited like any other.
        let late = ip(20_000);
        let at = t0 + Duration::from_secs(1);
        for _ in 0..3 {
            assert!(limiter.check(late, Budget::Read, at).allowed);
        }
        assert!(!limiter.check(late, Budget::Read, at).allowed);
        assert!(!limiter.check(heavy, Budget::Read, at).allowed);
    }

    #[test]
    fn a_full_sharded_table_stays_bounded_and_keeps_limiting() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 2, 1, 64 * 1024);
        assert_eq!(limiter.shards.len(), SHARDS);
        let t0 = limiter.epoch;
        let heavy = limiter.sub_key("heavy");
        for i in 0..200_000u32 {
            let at = t0 + Duration::from_micros(u64::from(i));
            assert!(limiter.check(ip(i), Budget::Read, at).allowed);
            if i % 1_000 == 0 {
                limiter.check(heavy, Budget::Read, at);
            }
        }
        assert!(limiter.tracked_keys() <= limiter.capacity());
        let at = t0 + Duration::from_secs(1);
        assert!(!limiter.check(heavy, Budget::Read, at).allowed);
        let late = ip(300_000);
        assert!(limiter.check(late, Budget::Read, at).allowed);
        assert!(limiter.check(late, Budget::Read, at).allowed);
        assert!(!limiter.check(late, Budget::Read, at).allowed);
    }

    #[test]
    fn ipv6_callers_share_the_budget_of_their_64() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 1, 1, 100);
        let t0 = limiter.epoch;
        let a = RateLimiter::ip_key("2001:db8:0:1::1".parse().expect("ip"));
        let b = RateLimiter::ip_key("2001:db8:0:1:ffff::9".parse().expect("ip"));
        let other = RateLimiter::ip_key("2001:db8:0:2::1".parse().expect("ip"));
        assert!(limiter.check(a, Budget::Read, t0).allowed);
        assert!(!limiter.check(b, Budget::Read, t0).allowed);
        assert!(limiter.check(other, Budget::Read, t0).allowed);
    }

    #[test]
    fn methods_map_to_budgets() {
        assert_eq!(Budget::of(&Method::GET), Budget::Read);
        assert_eq!(Budget::of(&Method::OPTIONS), Budget::Read);
        assert_eq!(Budget::of(&Method::POST), Budget::Write);
        assert_eq!(Budget::of(&Method::DELETE), Budget::Write);
    }
}
