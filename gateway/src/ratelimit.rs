//! Per-caller rate limits: a fixed window per caller key (`sub` of a valid token, else the client
//! IP) with separate read and write budgets. Keys whose window has ended are swept once per
//! window, so memory holds only the callers of the current window.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use shared_auth::Problem;

/// Above this many tracked callers, new callers are not tracked until the next sweep: a flood of
/// distinct keys cannot grow memory without bound (each key is checked again next window).
const MAX_KEYS: usize = 200_000;

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
        Problem::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited")
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

pub struct RateLimiter {
    window: Duration,
    reads: u32,
    writes: u32,
    state: Mutex<State>,
}

struct State {
    windows: HashMap<String, Window>,
    last_sweep: Instant,
}

impl RateLimiter {
    pub fn new(window: Duration, reads: u32, writes: u32) -> Self {
        Self {
            window: window.max(Duration::from_secs(1)),
            reads,
            writes,
            state: Mutex::new(State {
                windows: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        }
    }

    /// Counts one request of `key` against `budget` and says whether it may pass.
    pub fn check(&self, key: &str, budget: Budget, now: Instant) -> Decision {
        let limit = match budget {
            Budget::Read => self.reads,
            Budget::Write => self.writes,
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.sweep(&mut state, now);
        let fresh = Window {
            started: now,
            reads: 0,
            writes: 0,
        };
        let mut untracked = fresh;
        let tracked = state.windows.len() < MAX_KEYS || state.windows.contains_key(key);
        let window = if tracked {
            state.windows.entry(key.to_owned()).or_insert(fresh)
        } else {
            &mut untracked
        };
        if now.duration_since(window.started) >= self.window {
            *window = fresh;
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

    fn sweep(&self, state: &mut State, now: Instant) {
        if now.duration_since(state.last_sweep) < self.window {
            return;
        }
        let window = self.window;
        state
            .windows
            .retain(|_, w| now.duration_since(w.started) < window);
        state.last_sweep = now;
    }

    pub fn tracked_keys(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .windows
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_separate_and_reset_with_the_window() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 3, 1);
        let t0 = Instant::now();
        for expected_remaining in [2, 1, 0] {
            let d = limiter.check("ip:1", Budget::Read, t0);
            assert!(d.allowed);
            assert_eq!(d.remaining, expected_remaining);
        }
        let refused = limiter.check("ip:1", Budget::Read, t0 + Duration::from_secs(4));
        assert!(!refused.allowed);
        assert_eq!(refused.reset_secs, 6);
        assert!(
            limiter.check("ip:1", Budget::Write, t0).allowed,
            "writes have their own budget"
        );
        assert!(!limiter.check("ip:1", Budget::Write, t0).allowed);
        assert!(
            limiter.check("ip:2", Budget::Read, t0).allowed,
            "callers have their own budget"
        );
        let later = t0 + Duration::from_secs(10);
        assert!(limiter.check("ip:1", Budget::Read, later).allowed);
    }

    #[test]
    fn stale_keys_are_swept() {
        let limiter = RateLimiter::new(Duration::from_secs(10), 3, 1);
        let t0 = Instant::now();
        for i in 0..100 {
            limiter.check(&format!("ip:{i}"), Budget::Read, t0);
        }
        assert_eq!(limiter.tracked_keys(), 100);
        limiter.check("ip:new", Budget::Read, t0 + Duration::from_secs(11));
        assert_eq!(limiter.tracked_keys(), 1);
    }

    #[test]
    fn methods_map_to_budgets() {
        assert_eq!(Budget::of(&Method::GET), Budget::Read);
        assert_eq!(Budget::of(&Method::OPTIONS), Budget::Read);
        assert_eq!(Budget::of(&Method::POST), Budget::Write);
        assert_eq!(Budget::of(&Method::DELETE), Budget::Write);
    }
}
