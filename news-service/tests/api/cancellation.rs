//! Requests whose transaction outlives the request deadline (found by
//! deploy/bench/news-conc-check.sh with `NEWS_REQUEST_TIMEOUT_MS=60` on a loaded machine).
//!
//! The pools end a transaction left idle as long as the request deadline
//! (`idle_in_transaction_session_timeout`), terminating its connection. A request whose task is
//! not scheduled for that long between two statements meets that at its next statement, as
//! SQLSTATE 25P03 (the server's message read after the statement went out) or as a broken pipe,
//! at the same poll as its deadline; the deadline middleware polls the handler first, so the
//! handler's answer went out: a 500 `internal_error`, or a 503 `database_unavailable` while the
//! database is fine. The request is past its deadline, and the contract says it then answers 503
//! `timeout` (docs/conventions.md, "Deadlines and overload").

use std::time::{Duration, Instant};

use axum::response::IntoResponse;
use news_service::db::{PoolTimeouts, lazy_pool};
use news_service::store::engagement::{self, Edge};
use shared_auth::http::load::answering_by;
use shared_auth::pg::pool::begin_within_deadline;

use crate::helpers::{TestApp, spawn_with_fixture};

const DEADLINE: Duration = Duration::from_millis(100);

/// The service's pool for `app`, its limits set to [`DEADLINE`] (one connection).
fn pool(app: &TestApp) -> sqlx::PgPool {
    let timeouts = PoolTimeouts {
        acquire: Duration::from_secs(5),
        statement: DEADLINE,
    };
    lazy_pool(
        &app.db.url_for("news_app"),
        1,
        "cancellation-test",
        timeouts,
    )
    .unwrap()
}

/// The answer `error` becomes, as (status, code).
async fn answer(error: news_service::Error) -> (u16, String) {
    let response = error.into_response();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    (
        status,
        problem["code"].as_str().unwrap_or_default().to_owned(),
    )
}

/// A like whose task sleeps past the deadline between two statements of its transaction.
#[tokio::test]
async fn a_transaction_ended_for_idling_past_the_deadline_answers_timeout() {
    let app = spawn_with_fixture().await;
    let pool = pool(&app);
    let answered = answering_by(Instant::now() + DEADLINE, async {
        let mut tx = begin_within_deadline(&pool).await.unwrap();
        engagement::take_turn(&mut *tx, Edge::Like, "art-1", "reader")
            .await
            .unwrap();
        tokio::time::sleep(DEADLINE * 4).await;
        let error = engagement::set(&mut *tx, Edge::Like, "art-1", "reader", true)
            .await
            .expect_err("the server ended the idle transaction");
        answer(error).await
    })
    .await;
    assert_eq!(answered, (503, "timeout".to_owned()));
    assert_eq!(app.count("SELECT count(*) FROM likes").await, 0);
}

/// The same when the server's message is read (SQLSTATE 25P03, raised here with its code so
/// that the test does not depend on when the server's timer fires): was a 500.
#[tokio::test]
async fn the_idle_in_transaction_timeout_error_answers_timeout() {
    let app = spawn_with_fixture().await;
    let pool = pool(&app);
    let answered = answering_by(Instant::now() + DEADLINE, async {
        tokio::time::sleep(DEADLINE).await;
        let error = sqlx::query(
            "DO $$ BEGIN RAISE EXCEPTION 'terminating connection due to idle-in-transaction \
             timeout' USING ERRCODE = '25P03'; END $$",
        )
        .execute(&pool)
        .await
        .expect_err("raised");
        answer(error.into()).await
    })
    .await;
    assert_eq!(answered, (503, "timeout".to_owned()));
}
