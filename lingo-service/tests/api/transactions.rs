//! Transactions of a request that is cancelled (its deadline passed, its client went away)
//! while the database has not yet answered its `BEGIN`.

use std::future::Future;
use std::task::{Context, Waker};
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;

use crate::helpers::spawn_app;

/// The read of `GET /me/progress` and the writes' `begin_within_deadline` begin their
/// transactions through `begin_to_completion`. Polled once, the `BEGIN` is on its way and its
/// answer not read (the pool hands out its idle connection without a round trip); dropped then,
/// as a cancelled request drops it. The pool's one connection must then be out of any
/// transaction for the next request: before, it stayed inside the server's open transaction,
/// and a write that got it after a `GET /me/progress` failed (`cannot execute SELECT in a
/// read-only transaction`, a 500).
#[tokio::test]
async fn a_request_cancelled_during_its_begin_leaves_no_transaction_open() {
    let app = spawn_app().await;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect(&app.db.url_for("lingo_app"))
        .await
        .unwrap();
    let statements = [
        None,
        Some("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"),
    ];
    // A round counts when the first poll left the `BEGIN` unanswered (the server may be faster).
    let mut cancelled = 0;
    for (round, statement) in statements.into_iter().cycle().take(400).enumerate() {
        wait_until_idle(&pool).await;
        {
            let mut begin =
                std::pin::pin!(shared_auth::pg::pool::begin_to_completion(&pool, statement));
            let first = begin.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            if first.is_ready() {
                continue;
            }
        }
        cancelled += 1;
        // Later than the abandoned BEGIN by far: inside its transaction, `now()` would be then.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let inside: bool =
            sqlx::query_scalar("SELECT statement_timestamp() - now() > interval '25 ms'")
                .fetch_one(&pool)
                .await
                .unwrap();
        assert!(
            !inside,
            "round {round}: the next request ran inside the abandoned transaction"
        );
        if cancelled == 20 {
            return;
        }
    }
    panic!("only {cancelled} of 400 BEGINs were still unanswered after one poll");
}

async fn wait_until_idle(pool: &sqlx::PgPool) {
    for _ in 0..500 {
        if pool.num_idle() == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the pool's connection never came back");
}
