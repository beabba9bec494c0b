//! Which database serves a read. Writes and whatever a signed-in caller reads use the primary
//! (they see their own writes at once); anonymous reads use the read pool (a replica), and
//! survive either node being down:
//!
//! - the read pool cannot give a connection (refused, timed out), its server does not accept
//!   queries (shutting down, starting up), or a read on it does not finish within
//!   `NEWS_READ_TIMEOUT_MS` (a replica that hangs): the read is retried on the primary in the same
//!   request, and anonymous reads stay on the primary for a cool-down (a circuit) before the read
//!   pool is tried again; the background check holding it down counts the same way;
//! - the primary is down while anonymous reads are on it: the read is retried on the read pool;
//! - optionally, the replica's replay lags more than `NEWS_READ_MAX_LAG_MS` (checked in the
//!   background): anonymous reads go to the primary until it catches up.
//!
//! Each diversion is logged when it starts and ends and counted in `db_read_fallback_total`.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use shared_auth::pg::pool_health::{CheckEvery, PoolHealth, PoolState};
use sqlx::PgPool;

use crate::db;

/// Pool names, as `/readyz` and `/metrics` show them.
const PRIMARY: &str = "primary";
const READ: &str = "read";

/// How anonymous reads fall back from the read pool to the primary.
#[derive(clap::Args, Debug, Clone)]
pub struct ReadRoutingConfig {
    /// Seconds anonymous reads stay on the primary after the read pool failed, before the read
    /// pool is tried again.
    #[arg(long, env = "NEWS_READ_FALLBACK_COOLDOWN_SECS", default_value_t = 10)]
    pub read_fallback_cooldown_secs: u64,
    /// Milliseconds an anonymous read waits for a read-pool connection before it goes to the
    /// primary instead (short, so a dead replica costs little).
    #[arg(long, env = "NEWS_READ_ACQUIRE_TIMEOUT_MS", default_value_t = 1000)]
    pub read_acquire_timeout_ms: u64,
    /// Milliseconds an anonymous read may run on the read pool before it is given up and sent
    /// to the primary (a replica that stopped answering costs a read this, not its deadline).
    #[arg(long, env = "NEWS_READ_TIMEOUT_MS", default_value_t = 2000)]
    pub read_timeout_ms: u64,
    /// Replay lag of the read replica (milliseconds, checked every 2 s) past which anonymous
    /// reads go to the primary; 0 leaves lag unchecked.
    #[arg(long, env = "NEWS_READ_MAX_LAG_MS", default_value_t = 0)]
    pub read_max_lag_ms: u64,
}

impl Default for ReadRoutingConfig {
    fn default() -> Self {
        Self {
            read_fallback_cooldown_secs: 10,
            read_acquire_timeout_ms: 1000,
            read_timeout_ms: 2000,
            read_max_lag_ms: 0,
        }
    }
}

/// Whether a failed read failed because its database is unavailable (worth another node).
pub trait DatabaseFailure {
    fn is_unavailable(&self) -> bool;
}

impl DatabaseFailure for sqlx::Error {
    fn is_unavailable(&self) -> bool {
        shared_auth::pg::pool::is_unavailable(self)
    }
}

impl DatabaseFailure for crate::error::Error {
    fn is_unavailable(&self) -> bool {
        matches!(self, Self::Database(error) if error.is_unavailable())
    }
}

/// The database as a handler reaches it: `State<Db>`, taken from `AppState`, the same handle as
/// lingo-service's. Writes and a signed-in caller's own lists use `primary`; a read anyone may
/// make goes through [`Db::read`], which picks the node. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Db {
    pub primary: PgPool,
    /// The read pool: a replica, or the primary itself when none is configured.
    pub read: PgPool,
    routing: Arc<Routing>,
}

impl Db {
    /// Lazy pools for `database_url` and, when given, `read_url`, with their background check.
    /// Both pools get `timeouts.statement`; the read pool keeps its own short acquire timeout,
    /// so a read falls back to the primary quickly.
    pub fn connect(
        database_url: &str,
        read_url: Option<&str>,
        max_connections: u32,
        timeouts: db::PoolTimeouts,
        config: &ReadRoutingConfig,
    ) -> Result<Self, sqlx::Error> {
        let primary = db::lazy_pool(database_url, max_connections, "news-service", timeouts)?;
        let read_timeouts = db::PoolTimeouts {
            acquire: Duration::from_millis(config.read_acquire_timeout_ms),
            ..timeouts
        };
        let read = match read_url.filter(|url| !url.is_empty()) {
            Some(url) => Some(db::lazy_pool(
                url,
                max_connections,
                "news-service-read",
                read_timeouts,
            )?),
            None => None,
        };
        Ok(Self::new(primary, read, config))
    }

    /// Starts the background check of both pools (needs a Tokio runtime).
    pub fn new(primary: PgPool, read: Option<PgPool>, config: &ReadRoutingConfig) -> Self {
        let separate = read.is_some();
        let read = read.unwrap_or_else(|| primary.clone());
        let health = PoolHealth::spawn(
            vec![(PRIMARY, primary.clone()), (READ, read.clone())],
            CheckEvery::default(),
        );
        let routing = Routing {
            separate,
            health,
            circuit: Circuit::new(Duration::from_secs(config.read_fallback_cooldown_secs)),
            fallbacks: Family::default(),
            diverted: Gauge::default(),
            read_timeout: Duration::from_millis(config.read_timeout_ms),
            max_lag_ms: config.read_max_lag_ms,
            lag_ms: AtomicU64::new(0),
        };
        let routing = Arc::new(routing);
        if separate && config.read_max_lag_ms > 0 {
            tokio::spawn(watch_lag(Arc::downgrade(&routing), read.clone()));
        }
        Self {
            primary,
            read,
            routing,
        }
    }

    /// The pools by name, for the connection metrics.
    pub fn named(&self) -> Vec<(&'static str, PgPool)> {
        vec![(PRIMARY, self.primary.clone()), (READ, self.read.clone())]
    }

    /// The background check `/readyz` answers from.
    pub fn health(&self) -> PoolHealth {
        self.routing.health.clone()
    }

    /// Registers the pools' health and the fallback metrics in the service's registry.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.routing.health.register_metrics(registry);
        registry.register(
            "db_read_fallback",
            "Anonymous reads served by the primary because the read pool was unavailable, by \
             reason (read_failed: retried after failing on it; read_pool_down: sent straight to \
             the primary during the cool-down)",
            self.routing.fallbacks.clone(),
        );
        registry.register(
            "db_read_diverted",
            "1 while anonymous reads go to the primary instead of the read pool",
            self.routing.diverted.clone(),
        );
        registry.register(
            "db_read_replica_lag_milliseconds",
            "Replay lag of the read replica, checked every 2 s when NEWS_READ_MAX_LAG_MS is set",
            ReplicaLag(self.routing.clone()),
        );
    }

    /// Runs `read` (given the pool to use) for a caller: on the primary when `signed_in`, else
    /// on the read pool, retried once on the other node when the first is unavailable.
    pub async fn read<T, E, F, Fut>(&self, signed_in: bool, read: F) -> Result<T, E>
    where
        F: Fn(PgPool) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: DatabaseFailure + std::fmt::Display,
    {
        if signed_in || !self.routing.separate {
            return read(self.primary.clone()).await;
        }
        let first = self.routing.choose();
        let attempt = read(self.pool(first));
        let outcome = if first == Node::Read {
            // A replica that stopped answering (no reset, no refusal) would hold the read until
            // the request's deadline.
            match tokio::time::timeout(self.routing.read_timeout, attempt).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    self.routing
                        .after_failure(Node::Read, &"the read pool did not answer in time");
                    return read(self.primary.clone()).await;
                }
            }
        } else {
            attempt.await
        };
        match outcome {
            Err(error) if error.is_unavailable() => match self.routing.after_failure(first, &error)
            {
                Some(second) => read(self.pool(second)).await,
                None => Err(error),
            },
            done => done,
        }
    }

    fn pool(&self, node: Node) -> PgPool {
        match node {
            Node::Primary => self.primary.clone(),
            Node::Read => self.read.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Primary,
    Read,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: &'static str,
}

#[derive(Debug)]
struct Routing {
    /// False when the read pool is the primary itself: nothing to route.
    separate: bool,
    health: PoolHealth,
    circuit: Circuit,
    /// How long a read may run on the read pool.
    read_timeout: Duration,
    fallbacks: Family<Reason, Counter>,
    diverted: Gauge,
    /// 0: lag is not checked.
    max_lag_ms: u64,
    /// The replica's replay lag at the last check.
    lag_ms: AtomicU64,
}

impl Routing {
    /// The node an anonymous read tries first.
    fn choose(&self) -> Node {
        let checked_down = self.health.state(READ) == PoolState::Down;
        if checked_down || self.circuit.is_open() {
            self.divert(&"the read pool is down or cooling down after a failure");
            self.count("read_pool_down");
            return Node::Primary;
        }
        if self.max_lag_ms > 0 && self.lag_ms.load(Ordering::Relaxed) > self.max_lag_ms {
            self.divert(&"the read replica lags behind the primary");
            self.count("replica_lagging");
            return Node::Primary;
        }
        if self.circuit.diverted.swap(false, Ordering::Relaxed) {
            self.diverted.set(0);
            tracing::info!("anonymous reads are back on the read pool");
        }
        Node::Read
    }

    /// Where a read that failed on `failed` because its node is unavailable goes next, if
    /// anywhere; a failure on the read pool opens the circuit.
    fn after_failure(&self, failed: Node, error: &dyn std::fmt::Display) -> Option<Node> {
        match failed {
            Node::Read => {
                self.circuit.open();
                self.divert(error);
                self.count("read_failed");
                Some(Node::Primary)
            }
            // The primary went away while reads were on it: the read pool may still serve.
            Node::Primary if self.health.state(READ) != PoolState::Down => {
                tracing::warn!(%error, "primary unavailable: retrying an anonymous read on the read pool");
                Some(Node::Read)
            }
            Node::Primary => None,
        }
    }

    fn divert(&self, cause: &dyn std::fmt::Display) {
        if !self.circuit.diverted.swap(true, Ordering::Relaxed) {
            self.diverted.set(1);
            tracing::warn!(
                cause = %cause,
                cooldown_secs = self.circuit.cooldown.as_secs(),
                "read pool unavailable: anonymous reads go to the primary"
            );
        }
    }

    fn count(&self, reason: &'static str) {
        self.fallbacks.get_or_create(&Reason { reason }).inc();
    }
}

/// Checks the replica's lag every 2 s while the routing lives; a failed check leaves the last
/// value (the pool check and the circuit handle an unreachable replica).
async fn watch_lag(routing: std::sync::Weak<Routing>, read: PgPool) {
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        ticker.tick().await;
        let Some(routing) = routing.upgrade() else {
            return;
        };
        // Zero when the replica has replayed all it received (an idle primary sends nothing,
        // which is not lag), else the age of the last transaction it replayed.
        let query = sqlx::query_scalar!(
            r#"SELECT CASE WHEN NOT pg_is_in_recovery()
                             OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                 ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) * 1000, 0)
               END::int8 AS "lag_ms!""#
        )
        .fetch_one(&read);
        if let Ok(Ok(lag)) = tokio::time::timeout(Duration::from_secs(1), query).await {
            let lag = u64::try_from(lag).unwrap_or(0);
            let before = routing.lag_ms.swap(lag, Ordering::Relaxed);
            if lag > routing.max_lag_ms && before <= routing.max_lag_ms {
                tracing::warn!(
                    lag_ms = lag,
                    max_lag_ms = routing.max_lag_ms,
                    "read replica lags"
                );
            }
        }
    }
}

/// `db_read_replica_lag_milliseconds`, read from the routing when `/metrics` is rendered.
#[derive(Debug)]
struct ReplicaLag(Arc<Routing>);

impl prometheus_client::encoding::EncodeMetric for ReplicaLag {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let lag = i64::try_from(self.0.lag_ms.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        encoder.encode_gauge(&lag)
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Gauge
    }
}

/// Open for `cooldown` after the read pool failed a read.
#[derive(Debug)]
struct Circuit {
    origin: Instant,
    cooldown: Duration,
    /// Milliseconds since `origin` until which the read pool is skipped.
    open_until_ms: AtomicU64,
    /// Whether reads are currently diverted (so the change is logged once each way).
    diverted: AtomicBool,
}

impl Circuit {
    fn new(cooldown: Duration) -> Self {
        Self {
            origin: Instant::now(),
            cooldown,
            open_until_ms: AtomicU64::new(0),
            diverted: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn is_open(&self) -> bool {
        self.now_ms() < self.open_until_ms.load(Ordering::Relaxed)
    }

    fn open(&self) {
        let cooldown = u64::try_from(self.cooldown.as_millis()).unwrap_or(u64::MAX);
        let until = self.now_ms().saturating_add(cooldown);
        self.open_until_ms.fetch_max(until, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_circuit_opens_for_its_cooldown_only() {
        let circuit = Circuit::new(Duration::from_millis(50));
        assert!(!circuit.is_open());
        circuit.open();
        assert!(circuit.is_open());
        std::thread::sleep(Duration::from_millis(60));
        assert!(!circuit.is_open());
    }

    #[test]
    fn only_unavailability_counts_as_a_node_failure() {
        assert!(sqlx::Error::PoolTimedOut.is_unavailable());
        assert!(!sqlx::Error::RowNotFound.is_unavailable());
        let error = crate::error::Error::from(sqlx::Error::PoolTimedOut);
        assert!(error.is_unavailable());
        let refusal = crate::error::Error::from(crate::error::ErrorCode::ArticleNotFound);
        assert!(!refusal.is_unavailable());
    }
}
