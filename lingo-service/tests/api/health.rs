//! `/healthz` and `/readyz`, a database that is down (503 problems, no hang), and unknown
//! routes and methods answered as problems.

use lingo_service::ServeConfig;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use shared_auth::testing::{TestDatabase, auth_config, token};

use crate::helpers::{assert_problem, local, serve, spawn_app};

#[tokio::test]
async fn healthz_and_readyz_answer_when_the_database_is_up() {
    let app = spawn_app().await;
    let response = app.get("/healthz", None).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );

    let response = app.get("/readyz", None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"status": "ready", "pools": {"primary": "up"}})
    );

    // The same background check is a metric, as at news, in OpenMetrics text (`_total`
    // counters, `# EOF`), labelled as such.
    let metrics = app.get("/metrics", None).await;
    let content_type = metrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    let metrics = metrics.text().await.unwrap();
    assert!(metrics.ends_with("# EOF\n"), "{metrics}");
    assert!(
        metrics.contains("lingo_db_pool_up{pool=\"primary\"} 1"),
        "{metrics}"
    );
}

/// Nothing listens on port 1: the service starts anyway and reports itself not ready. Once the
/// background check has found the database down, requests are answered 503
/// `database_unavailable` at once: with this long wait for a connection they would otherwise sit
/// until their deadline (and be a 503 `timeout`), holding their place in the service.
#[tokio::test]
async fn a_database_that_is_down_gives_503_problems_at_once_not_hangs() {
    let mut config = ServeConfig::new(
        local(),
        "postgres://lingo_app@127.0.0.1:1/lingo",
        auth_config(),
    );
    config.db_acquire_timeout_ms = 60_000;
    let address = serve(config).await;
    let client = reqwest::Client::new();

    let response = client
        .get(format!("{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the process is up");

    let response = client
        .get(format!("{address}/readyz"))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "database_unavailable").await;

    let response = client
        .get(format!("{address}/v1/lingo/me/xp"))
        .bearer_auth(token("someone"))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("retry-after"));
    let body = assert_problem(response, 503, "database_unavailable").await;
    assert!(
        !body.to_string().contains("127.0.0.1"),
        "no internals: {body}"
    );
}

/// A database whose migrations have not run yet (the first install, while the migration job is
/// pending) or that refuses the service's login cannot serve: the service is not ready and
/// answers 503 `database_unavailable`, never a 500. Once migrated, it serves without a restart.
#[tokio::test]
async fn an_unmigrated_database_or_a_refused_login_is_503_until_it_is_fixed() {
    let db = TestDatabase::create().await;
    let address = serve(ServeConfig::new(
        local(),
        db.url_for("lingo_app"),
        auth_config(),
    ))
    .await;
    let refused = ServeConfig::new(local(), db.url_for("no_such_role"), auth_config());
    let refused_address = serve(refused).await;
    let client = reqwest::Client::new();
    let get = |base: &str, path: &str| client.get(format!("{base}{path}")).send();

    for base in [&address, &refused_address] {
        assert_problem(
            get(base, "/readyz").await.unwrap(),
            503,
            "database_unavailable",
        )
        .await;
        let read = get(base, "/v1/lingo/languages").await.unwrap();
        assert!(read.headers().contains_key("retry-after"));
        assert_problem(read, 503, "database_unavailable").await;
    }

    lingo_service::migrate(&db.url_for("lingo_owner"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(&address, "/readyz").await.unwrap().status() != 200 {
        assert!(
            Instant::now() < deadline,
            "not ready 10 s after the migrations"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        get(&address, "/v1/lingo/languages").await.unwrap().status(),
        200
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems_with_request_ids() {
    let app = spawn_app().await;
    let response = app.get("/v1/lingo/nope", None).await;
    assert_problem(response, 404, "not_found").await;

    let response = app
        .client
        .delete(app.url("/v1/lingo/languages"))
        .header("x-request-id", "my-request-1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "my-request-1");
    let body = assert_problem(response, 405, "method_not_allowed").await;
    assert_eq!(body["request_id"], "my-request-1");
}
