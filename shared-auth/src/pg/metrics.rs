//! The database pools' metrics: connections in use and idle, read at every scrape, and the time
//! to acquire a connection, sampled in the background (the handlers use the pools directly, so
//! there is no per-query hook to time).

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sqlx::PgPool;

use crate::http::metrics::{HistogramFamily, HttpMetrics, Sampled, seconds_histogram};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: &'static str,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolName {
    pool: &'static str,
}

/// The metrics of a service's named pools.
pub struct PoolMetrics {
    connections: Family<PoolLabels, Gauge>,
    wait: HistogramFamily<PoolName>,
    pools: Vec<(&'static str, PgPool)>,
}

impl PoolMetrics {
    /// Registers `db_pool_connections` and `db_pool_wait_seconds` for `pools`.
    pub fn register(registry: &mut Registry, pools: Vec<(&'static str, PgPool)>) -> Arc<Self> {
        let connections = Family::<PoolLabels, Gauge>::default();
        let wait: HistogramFamily<PoolName> = Family::new_with_constructor(seconds_histogram);
        registry.register(
            "db_pool_connections",
            "Database connections by pool and state (in_use, idle)",
            connections.clone(),
        );
        registry.register(
            "db_pool_wait_seconds",
            "Time to acquire a connection, sampled every few seconds, by pool",
            wait.clone(),
        );
        Arc::new(Self {
            connections,
            wait,
            pools,
        })
    }

    async fn sample_wait(&self) {
        for (name, pool) in &self.pools {
            let started = Instant::now();
            if let Ok(connection) = pool.acquire().await {
                drop(connection);
                self.wait
                    .get_or_create(&PoolName { pool: name })
                    .observe(started.elapsed().as_secs_f64());
            }
        }
    }
}

impl Sampled for PoolMetrics {
    fn refresh(&self) {
        for (name, pool) in &self.pools {
            let idle = pool.num_idle() as i64;
            let size = i64::from(pool.size());
            let gauge = |state| {
                self.connections
                    .get_or_create(&PoolLabels { pool: name, state })
            };
            gauge("idle").set(idle);
            gauge("in_use").set((size - idle).max(0));
        }
    }

    fn spawn_sampler(self: Arc<Self>, every: Duration) {
        let metrics = Arc::downgrade(&self);
        drop(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                let Some(metrics) = metrics.upgrade() else {
                    return;
                };
                metrics.sample_wait().await;
            }
        });
    }
}

/// The services' metrics: the HTTP metrics plus their database pools.
impl HttpMetrics {
    /// Metrics named `<prefix>_...` (e.g. `lingo_http_requests_total`) for the given pools.
    pub fn new(prefix: &str, pools: Vec<(&'static str, PgPool)>) -> Arc<Self> {
        Self::with_extra(prefix, pools, |_| {})
    }

    /// Like [`HttpMetrics::new`], letting the service register metrics of its own (pool health,
    /// read routing) under the same prefix and `/metrics`.
    pub fn with_extra(
        prefix: &str,
        pools: Vec<(&'static str, PgPool)>,
        register: impl FnOnce(&mut Registry),
    ) -> Arc<Self> {
        let mut builder = HttpMetrics::builder(prefix);
        let pools = PoolMetrics::register(builder.registry(), pools);
        register(builder.registry());
        builder.with_sampled(pools).build()
    }

    /// Samples how long acquiring a connection takes, every `every`, for as long as the metrics
    /// live.
    pub fn spawn_pool_sampler(self: &Arc<Self>, every: Duration) {
        self.spawn_samplers(every);
    }
}
