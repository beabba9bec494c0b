//! The whole system in-process for the gateway's cross-crate tests: a fresh database, both
//! services on port 0 and the gateway in front of them (rate limits off: every call comes from
//! 127.0.0.1). Shared by the `system` and `observability` test binaries.

// Each test binary uses a different part of the stack.
#![allow(dead_code)]

use std::net::SocketAddr;

use shared_auth::testing::{TestDatabase, auth_config};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct Stack {
    pub gateway_url: String,
    pub lingo_url: String,
    pub news_url: String,
    pub db: TestDatabase,
    lingo: Option<Lingo>,
}

/// A lingo-service that the test can stop and start again on the same port.
struct Lingo {
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Stack {
    /// Stops lingo-service: it closes its listener and its connections.
    pub async fn stop_lingo(&mut self) {
        let lingo = self.lingo.take().expect("lingo is running");
        let _ = lingo.stop.send(());
        lingo.task.await.unwrap().unwrap();
    }

    /// Starts lingo-service again on its old port.
    pub async fn restart_lingo(&mut self) {
        assert!(self.lingo.is_none(), "lingo is still running");
        let addr: SocketAddr = self
            .lingo_url
            .trim_start_matches("http://")
            .parse()
            .unwrap();
        self.lingo = Some(serve_lingo(&self.db, addr).await.1);
    }
}

/// Migrates both schemas, seeds them with `news_articles` articles when `Some`, and starts the
/// three servers.
pub async fn start(news_articles: Option<u64>) -> Stack {
    start_with(news_articles, |_| {}).await
}

/// Like [`start`], with the gateway's configuration adjusted by `tweak`.
pub async fn start_with(
    news_articles: Option<u64>,
    tweak: impl FnOnce(&mut gateway::config::GatewayConfig),
) -> Stack {
    let db = TestDatabase::create().await;
    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    news_service::migrate(&db.url_for("news_owner"))
        .await
        .unwrap();
    if let Some(articles) = news_articles {
        lingo_service::seed(&db.url_for("lingo_pipeline"))
            .await
            .unwrap();
        news_service::seed(&db.url_for("news_pipeline"), articles)
            .await
            .unwrap();
    }
    let (lingo_url, lingo) = serve_lingo(&db, SocketAddr::from(([127, 0, 0, 1], 0))).await;

    let news = news_service::Application::build(news_service::config::ServeConfig::new(
        db.url_for("news_app"),
        auth_config(),
    ))
    .await
    .unwrap();
    let news_url = format!("http://127.0.0.1:{}", news.port());
    tokio::spawn(news.run_until_stopped());

    let mut config = gateway::config::GatewayConfig::for_tests(
        std::slice::from_ref(&lingo_url),
        std::slice::from_ref(&news_url),
    );
    config.auth = auth_config();
    config.rate_limit_enabled = false;
    tweak(&mut config);
    let gateway = gateway::Application::build(config).await.unwrap();
    let gateway_url = format!("http://127.0.0.1:{}", gateway.port());
    tokio::spawn(gateway.run_until_stopped());

    Stack {
        gateway_url,
        lingo_url,
        news_url,
        db,
        lingo: Some(lingo),
    }
}

async fn serve_lingo(db: &TestDatabase, addr: SocketAddr) -> (String, Lingo) {
    let lingo = lingo_service::Application::build(lingo_service::Config::new(
        addr,
        db.url_for("lingo_app"),
        auth_config(),
    ))
    .await
    .unwrap();
    let url = format!("http://127.0.0.1:{}", lingo.port());
    let (stop, stopped) = oneshot::channel::<()>();
    // Stops only when told to: a stack whose handle was dropped keeps serving.
    let task = tokio::spawn(lingo.run_with_shutdown(async {
        if stopped.await.is_err() {
            std::future::pending::<()>().await;
        }
    }));
    (url, Lingo { stop, task })
}

/// lingo-service alone on port 0 against an already migrated database; returns its base URL.
pub async fn start_lingo(db: &TestDatabase) -> String {
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let lingo = lingo_service::Application::build(lingo_service::Config::new(
        any_port,
        db.url_for("lingo_app"),
        auth_config(),
    ))
    .await
    .unwrap();
    let url = format!("http://127.0.0.1:{}", lingo.port());
    tokio::spawn(lingo.run_until_stopped());
    url
}
