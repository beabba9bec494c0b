//! The gateway as a whole: [`Application`] wires the state, the frontend and the background
//! tasks (readiness probes, route learning, idle-connection closing), binds the listener and
//! serves until stopped.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use shared_auth::Verifier;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::auth::EdgeAuth;
use crate::cache::AnswerCache;
use crate::client::{self, UpstreamClient};
use crate::client_addr::TrustedProxies;
use crate::config::{ClientTimeouts, GatewayConfig};
use crate::cors::cors_layer;
use crate::dispatch::Frontend;
use crate::docs::ApiReference;
use crate::metrics::Metrics;
use crate::proxy::Proxy;
use crate::ratelimit::RateLimiter;
use crate::routes::Group;
use crate::state::AppState;
use crate::upstream::{self, UpstreamGroup};
use crate::{learn, server};

/// A gateway bound to its listener, ready to serve.
pub struct Application {
    listener: TcpListener,
    port: u16,
    frontend: Frontend,
    client_timeouts: ClientTimeouts,
    workers: usize,
    background: Vec<JoinHandle<()>>,
}

impl Application {
    /// Binds the listener (port 0 picks a free one), loads the keys and starts the readiness
    /// probes and the route learning (routed by the compiled-in document until then).
    pub async fn build(config: GatewayConfig) -> anyhow::Result<Self> {
        let verifier = Verifier::from_config(&config.auth)
            .await
            .context("auth configuration")?;
        let metrics = Arc::new(Metrics::new());
        // The probes' own client, on the runtime that runs them.
        let client = UpstreamClient::new(config.connect_timeout(), config.upstream_timeout());
        let lingo = Arc::new(UpstreamGroup::new(
            Group::Lingo,
            &config.lingo_upstreams.0,
            config.cooldown(),
            config.down_probe_interval(),
        ));
        let news = Arc::new(UpstreamGroup::new(
            Group::News,
            &config.news_upstreams.0,
            config.cooldown(),
            config.down_probe_interval(),
        ));
        let routes = Arc::new(learn::compiled_routes()?);
        let reference = Arc::new(ApiReference::compiled()?);
        let limiter = config.rate_limit_enabled.then(|| {
            Arc::new(RateLimiter::new(
                Duration::from_secs(config.rate_limit_window_secs),
                config.rate_limit_reads,
                config.rate_limit_writes,
                config.rate_limit_max_keys,
            ))
        });
        let state = AppState {
            auth: Arc::new(EdgeAuth::new(
                verifier,
                config.token_cache_capacity,
                metrics.clone(),
            )),
            limiter,
            proxy: Arc::new(Proxy::new(
                UpstreamClient::new(config.connect_timeout(), config.upstream_timeout()),
                config.upstream_timeout(),
                metrics.clone(),
            )),
            lingo: lingo.clone(),
            news: news.clone(),
            metrics: metrics.clone(),
            trusted_proxies: Arc::new(TrustedProxies::new(config.trusted_proxies.0.clone())),
            routes: routes.clone(),
            cache: AnswerCache::new(
                config.cache_max_bytes,
                2 * (config.connect_timeout() + config.upstream_timeout()),
                metrics.clone(),
            )
            .map(Arc::new),
            reference: reference.clone(),
        };
        let frontend = Frontend::new(state, cors_layer(&config.cors_allowed_origins.0)?);
        let learners = [&lingo, &news].map(|group| {
            tokio::spawn(learn::learn_forever(
                group.clone(),
                routes.clone(),
                reference.clone(),
                UpstreamClient::new(config.connect_timeout(), config.upstream_timeout()),
                metrics.clone(),
                config.routes_refresh_interval(),
            ))
        });
        let probes = tokio::spawn(upstream::probe_forever(
            vec![lingo, news],
            client,
            config.probe_interval(),
            config.down_probe_interval(),
        ));

        let listener = shared_auth::http::serve::bind(config.listen_addr.as_str())
            .await
            .with_context(|| format!("cannot listen on {}", config.listen_addr))?;
        let port = listener.local_addr()?.port();
        let workers = config.worker_count();
        tracing::info!(addr = %listener.local_addr()?, workers, "gateway listening");
        Ok(Self {
            listener,
            port,
            frontend,
            client_timeouts: config.client_timeouts(),
            workers,
            background: [
                probes,
                tokio::spawn(client::close_idle_connections_forever()),
            ]
            .into_iter()
            .chain(learners)
            .collect(),
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGINT or SIGTERM, then drains in-flight requests.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.run_until(shared_auth::telemetry::shutdown_signal())
            .await
    }

    /// Serves until `shutdown` resolves: from then on no new connection is accepted, and the
    /// call returns once the requests in flight are answered.
    pub async fn run_until<F>(self, shutdown: F) -> std::io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let result = server::serve(
            self.listener,
            self.frontend,
            self.client_timeouts,
            self.workers,
            shutdown,
        )
        .await;
        for task in self.background {
            task.abort();
        }
        result
    }
}
