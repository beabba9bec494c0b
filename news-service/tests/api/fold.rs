//! Folding counter slots back into one row (migration `fold_counter_slots`, `counter_fold`):
//! under concurrent likes, unlikes, follows and folds every snapshot's counts equal the rows, a
//! hot target ends with one counter row, `recount` is unaffected, and the fold never loses an
//! increment committed beside it, whichever of the two holds a slot first.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use news_service::counter_fold;
use news_service::store::counters::{self, CounterTable, Fold};
use reqwest::Method;
use shared_auth::testing::TestDatabase;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

use crate::helpers::{TestApp, pool_of, spawn_with_fixture_configured};

/// The fixture's catalogue and the service, its folder sweeping every `fold_every_ms` (0: off).
async fn spawn(fold_every_ms: u64) -> TestApp {
    spawn_with_fixture_configured(|config| config.counter_fold_interval_ms = fold_every_ms).await
}

async fn connection(db: &TestDatabase, role: &str) -> PgConnection {
    let options = PgConnectOptions::from_str(&db.url_for(role))
        .unwrap()
        .options([("search_path", "news")]);
    PgConnection::connect_with(&options).await.unwrap()
}

/// For each hot target: (rows counted, sum of its counter slots, number of slot rows), all
/// read in ONE statement, so one snapshot.
const SNAPSHOT: &str = "
SELECT 'like_count', (SELECT count(*) FROM likes WHERE article_id = 'art-1'),
       (SELECT coalesce(sum(like_count), 0)::bigint FROM article_stats WHERE article_id = 'art-1'),
       (SELECT count(*) FROM article_stats WHERE article_id = 'art-1')
UNION ALL
SELECT 'bookmark_count', (SELECT count(*) FROM bookmarks WHERE article_id = 'art-1'),
       (SELECT coalesce(sum(bookmark_count), 0)::bigint FROM article_stats WHERE article_id = 'art-1'),
       (SELECT count(*) FROM article_stats WHERE article_id = 'art-1')
UNION ALL
SELECT 'journalist follower_count',
       (SELECT count(*) FROM journalist_follows WHERE journalist_id = 'jrn-1'),
       (SELECT coalesce(sum(follower_count), 0)::bigint FROM journalist_stats WHERE journalist_id = 'jrn-1'),
       (SELECT count(*) FROM journalist_stats WHERE journalist_id = 'jrn-1')
UNION ALL
SELECT 'organization follower_count',
       (SELECT count(*) FROM organization_follows WHERE organization_id = 'org-a'),
       (SELECT coalesce(sum(follower_count), 0)::bigint FROM organization_stats WHERE organization_id = 'org-a'),
       (SELECT count(*) FROM organization_stats WHERE organization_id = 'org-a')";

type Snapshot = Vec<(String, i64, i64, i64)>;

async fn snapshot(db: &PgPool) -> Snapshot {
    sqlx::query_as(SNAPSHOT).fetch_all(db).await.unwrap()
}

fn assert_exact(snapshot: &Snapshot, when: &str) {
    for (counter, rows, sum, _) in snapshot {
        assert_eq!(sum, rows, "{counter}: counter sum against count(*) {when}");
    }
}

/// Counts as the API shows them: (like_count, bookmark_count) of art-1, follower_count of
/// jrn-1 and of org-a.
async fn api_counts(app: &TestApp) -> [i64; 4] {
    let article = app.get_json("/articles/art-1", None).await;
    let journalists = app.get_json("/journalists?limit=100", None).await;
    let organizations = app.get_json("/organizations?limit=100", None).await;
    let followers = |page: &serde_json::Value, id: &str| {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["id"] == id)
            .unwrap()["follower_count"]
            .as_i64()
            .unwrap()
    };
    [
        article["like_count"].as_i64().unwrap(),
        article["bookmark_count"].as_i64().unwrap(),
        followers(&journalists, "jrn-1"),
        followers(&organizations, "org-a"),
    ]
}

/// One reader's calls on every hot edge: like, unlike, like again (a third of readers end
/// without), and the same for a bookmark and both follows.
async fn reader(app: &TestApp, n: usize) {
    let edges = [
        "/articles/art-1/like",
        "/articles/art-1/bookmark",
        "/journalists/jrn-1/follow",
        "/organizations/org-a/follow",
    ];
    let user = format!("reader-{n}");
    let mut methods = vec![Method::POST, Method::DELETE, Method::POST];
    if n.is_multiple_of(3) {
        methods.push(Method::DELETE);
    }
    for method in methods {
        for edge in edges {
            let response = app.request(method.clone(), edge, Some(&user)).await;
            assert_eq!(response.status(), 200, "{method} {edge} as {user}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hot_targets_written_by_many_readers_while_folding_stay_exact_and_end_in_one_row() {
    // The folder here is the test's own sweeps, back to back from two tasks (the service's is
    // off), so that what was folded is known.
    let app = spawn(0).await;
    let runtime = pool_of(&app.db, "news_app", 4).await;
    let admin = pool_of(&app.db, "admin", 2).await;
    let done = Arc::new(AtomicBool::new(false));

    // Every snapshot read meanwhile must show counts equal to the rows.
    let checker = {
        let (admin, done) = (admin.clone(), done.clone());
        tokio::spawn(async move {
            let (mut checks, mut most_slots) = (0_u64, 0_i64);
            while !done.load(Ordering::Relaxed) {
                let now = snapshot(&admin).await;
                assert_exact(&now, "while readers write and folds run");
                most_slots = most_slots.max(now.iter().map(|s| s.3).max().unwrap_or(0));
                checks += 1;
            }
            (checks, most_slots)
        })
    };
    let folded = Arc::new(AtomicU64::new(0));
    let folders: Vec<_> = (0..2)
        .map(|_| {
            let (runtime, done, folded) = (runtime.clone(), done.clone(), folded.clone());
            tokio::spawn(async move {
                let mut sweeps = 0_u64;
                while !done.load(Ordering::Relaxed) {
                    let summary = counter_fold::sweep(&runtime).await.unwrap();
                    folded.fetch_add(summary.slots_folded, Ordering::Relaxed);
                    sweeps += 1;
                }
                sweeps
            })
        })
        .collect();
    // `recount` alongside: the folds never show it a drift.
    let recounts = {
        let (url, done) = (app.db.url_for("news_pipeline"), done.clone());
        tokio::spawn(async move {
            let mut runs = 0;
            while !done.load(Ordering::Relaxed) {
                let summary = news_service::recount(&url).await.unwrap();
                assert_eq!(summary.total_drift(), 0, "recount during folds:\n{summary}");
                runs += 1;
            }
            runs
        })
    };

    join_all((0..60).map(|n| reader(&app, n))).await;
    done.store(true, Ordering::Relaxed);
    let (checks, most_slots) = checker.await.unwrap();
    let mut sweeps = 0;
    for folder in folders {
        sweeps += folder.await.unwrap();
    }
    let recount_runs = recounts.await.unwrap();
    assert!(
        checks >= 10 && sweeps >= 10 && recount_runs >= 1,
        "too little overlap: {checks} checks, {sweeps} sweeps, {recount_runs} recounts"
    );
    // The scenario must have spread slots and folded them, or it proves nothing.
    assert!(most_slots > 1, "the writers never used a second slot");
    assert!(folded.load(Ordering::Relaxed) > 0, "nothing was folded");

    // Writers gone: one sweep leaves each hot target one counter row, in slot 0.
    counter_fold::sweep(&runtime).await.unwrap();
    let end = snapshot(&admin).await;
    assert_exact(&end, "at the end");
    for (counter, _, _, slots) in &end {
        assert_eq!(*slots, 1, "{counter}: slot rows left after the last sweep");
    }
    let extra: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM article_stats WHERE slot <> 0)
              + (SELECT count(*) FROM journalist_stats WHERE slot <> 0)
              + (SELECT count(*) FROM organization_stats WHERE slot <> 0)",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(extra, 0, "rows outside slot 0");
    // 60 readers, 20 of whom end without the edge: 40 on each.
    let rows: Vec<i64> = end.iter().map(|s| s.1).collect();
    assert_eq!(rows, vec![40; 4]);
    assert_eq!(api_counts(&app).await, [40; 4]);
    let summary = news_service::recount(&app.db.url_for("news_pipeline"))
        .await
        .unwrap();
    assert_eq!(summary.total_drift(), 0, "{summary}");
}

#[tokio::test]
async fn the_service_folds_in_the_background() {
    let app = spawn(20).await;
    let admin = pool_of(&app.db, "admin", 1).await;
    spread_art_2(&admin, 12).await;
    // The service's folder runs every 20 ms: it may already have folded some of the 10 slot
    // rows by now, so only the count is checked here.
    let spread = art_2(&admin).await;
    assert_eq!((spread.0, spread.1), (12, 12));
    // A loose bound: the fold runs every few hundred milliseconds, but a loaded test machine can
    // starve the service's background task for seconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut now = art_2(&admin).await;
    while now.2 != 1 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        now = art_2(&admin).await;
        assert_eq!(now.0, now.1, "count while the service folds");
    }
    assert_eq!(now, (12, 12, 1), "not folded within 30 s");
    let like_count = app.get_json("/articles/art-2", None).await["like_count"].clone();
    assert_eq!(like_count, 12);
}

/// Spreads art-2's like count (its `likes` rows) over slots 0..=9, as concurrent writers leave
/// it: the sum is unchanged, so the counts stay exact.
async fn spread_art_2(admin: &PgPool, likes: usize) {
    for n in 0..likes {
        sqlx::query("INSERT INTO likes (article_id, user_id) VALUES ('art-2', $1)")
            .bind(format!("early-{n}"))
            .execute(admin)
            .await
            .unwrap();
    }
    // The lock keeps a fold of the service in between out: it could insert slot 0 after the
    // DELETE and before the INSERT (a unique violation), or fold rows this is replacing.
    sqlx::raw_sql(
        "BEGIN;
         LOCK TABLE article_stats IN EXCLUSIVE MODE;
         DELETE FROM article_stats WHERE article_id = 'art-2';
         INSERT INTO article_stats (article_id, slot, like_count)
           SELECT 'art-2', s, CASE WHEN s = 0 THEN (SELECT count(*) FROM likes WHERE article_id = 'art-2') - 9 ELSE 1 END
           FROM generate_series(0, 9) s;
         COMMIT;",
    )
    .execute(admin)
    .await
    .unwrap();
}

/// (count(*) of art-2's likes, the sum of its like slots, its slot rows), in one snapshot.
async fn art_2(db: &PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM likes WHERE article_id = 'art-2'),
                (SELECT coalesce(sum(like_count), 0)::bigint FROM article_stats WHERE article_id = 'art-2'),
                (SELECT count(*) FROM article_stats WHERE article_id = 'art-2')",
    )
    .fetch_one(db)
    .await
    .unwrap()
}

/// Likes art-2 as `user` in the open transaction of `tx`; returns the slot the trigger added it
/// to (the one that differs, in this transaction's view, from the layout of `spread_art_2`
/// with `likes` likes).
async fn like_in(tx: &mut PgConnection, user: &str, likes: i64) -> i16 {
    sqlx::query("INSERT INTO likes (article_id, user_id) VALUES ('art-2', $1)")
        .bind(user)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query_scalar(
        "SELECT slot FROM article_stats WHERE article_id = 'art-2'
           AND like_count <> CASE WHEN slot = 0 THEN $1 - 9 ELSE 1 END",
    )
    .bind(likes)
    .fetch_one(tx)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fold_skips_slots_held_by_writers_and_loses_none_of_their_increments() {
    let app = spawn(0).await;
    let admin = pool_of(&app.db, "admin", 2).await;
    let runtime = pool_of(&app.db, "news_app", 2).await;
    spread_art_2(&admin, 20).await;
    assert_eq!(art_2(&admin).await, (20, 20, 10));

    // Two readers' likes in flight: the trigger gives each the first slot nobody holds, in
    // slot order when it reads through the primary key (so the first holds slot 0, the
    // second slot 1).
    let mut first = connection(&app.db, "news_app").await;
    let mut second = connection(&app.db, "news_app").await;
    for writer in [&mut first, &mut second] {
        sqlx::raw_sql("SET enable_seqscan = off; BEGIN")
            .execute(writer)
            .await
            .unwrap();
    }
    assert_eq!(like_in(&mut first, "writer-1", 20).await, 0);
    assert_eq!(like_in(&mut second, "writer-2", 20).await, 1);

    // Slot 0 is held: the fold waits its short lock_timeout and gives up, changing nothing.
    let outcome = counters::fold(&runtime, CounterTable::Articles, "art-2")
        .await
        .unwrap();
    assert_eq!(outcome, Fold::Busy);
    assert_eq!(art_2(&admin).await, (20, 20, 10));

    // Slot 0 free again: it folds every slot but the one the second writer holds.
    sqlx::raw_sql("COMMIT").execute(&mut first).await.unwrap();
    let outcome = counters::fold(&runtime, CounterTable::Articles, "art-2")
        .await
        .unwrap();
    assert_eq!(outcome, Fold::Folded(8));
    assert_eq!(art_2(&admin).await, (21, 21, 2));

    // The held slot keeps its increment; it is folded once its writer commits.
    sqlx::raw_sql("COMMIT").execute(&mut second).await.unwrap();
    assert_eq!(art_2(&admin).await, (22, 22, 2));
    let outcome = counters::fold(&runtime, CounterTable::Articles, "art-2")
        .await
        .unwrap();
    assert_eq!(outcome, Fold::Folded(1));
    assert_eq!(art_2(&admin).await, (22, 22, 1));
    let slot: i16 = sqlx::query_scalar("SELECT slot FROM article_stats WHERE article_id = 'art-2'")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(slot, 0);
    // Nothing left to do.
    assert_eq!(
        counters::fold(&runtime, CounterTable::Articles, "art-2")
            .await
            .unwrap(),
        Fold::Folded(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writers_and_recount_that_meet_an_uncommitted_fold_lose_nothing() {
    let app = spawn(0).await;
    let admin = pool_of(&app.db, "admin", 2).await;
    let writers = pool_of(&app.db, "news_app", 20).await;
    for round in 0..5 {
        spread_art_2(&admin, 20 + round).await;
        let before = art_2(&admin).await;
        assert_eq!(before.0, before.1);

        // A fold holding its rows (slot 0 and the nine it deletes), not yet committed.
        let mut fold = connection(&app.db, "news_app").await;
        sqlx::raw_sql("BEGIN").execute(&mut fold).await.unwrap();
        let folded: i32 = sqlx::query_scalar("SELECT fold_counter_slots('article_stats', 'art-2')")
            .fetch_one(&mut fold)
            .await
            .unwrap();
        assert_eq!(folded, 9);

        // Writers arrive: they find every slot held, so they upsert a random one, and wait when
        // it is one the fold holds (the row they wait on is gone when it commits).
        let likes: Vec<_> = (0..12)
            .map(|n| {
                let writers = writers.clone();
                tokio::spawn(async move {
                    sqlx::query("INSERT INTO likes (article_id, user_id) VALUES ('art-2', $1)")
                        .bind(format!("late-{round}-{n}"))
                        .execute(&writers)
                        .await
                        .unwrap();
                })
            })
            .collect();
        // And a recount: its snapshot has the fold's rows on one side of the commit or the
        // other, with the same sum either way.
        let url = app.db.url_for("news_pipeline");
        let recount = tokio::spawn(async move { news_service::recount(&url).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        // Meanwhile every snapshot still shows the rows' count.
        let during = art_2(&admin).await;
        assert_eq!(during.0, during.1, "round {round}, fold uncommitted");

        sqlx::raw_sql("COMMIT").execute(&mut fold).await.unwrap();
        for like in likes {
            like.await.unwrap();
        }
        let drift = recount.await.unwrap().unwrap().total_drift();
        assert_eq!(drift, 0, "round {round}: recount after the fold");
        let after = art_2(&admin).await;
        assert_eq!(after.0, before.0 + 12, "round {round}");
        assert_eq!(after.1, after.0, "round {round}: an increment was lost");

        // And folding it all leaves one row with the whole count.
        while !matches!(
            counters::fold(&writers, CounterTable::Articles, "art-2")
                .await
                .unwrap(),
            Fold::Folded(0)
        ) {}
        assert_eq!(art_2(&admin).await, (after.0, after.0, 1), "round {round}");
        sqlx::query("DELETE FROM likes WHERE article_id = 'art-2'")
            .execute(&admin)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn recount_fixes_drift_the_same_before_and_after_folding() {
    let app = spawn(0).await;
    let admin = pool_of(&app.db, "admin", 2).await;
    let runtime = pool_of(&app.db, "news_app", 2).await;
    spread_art_2(&admin, 15).await;
    // Damage behind the triggers' back (only a superuser can): 5 too many, in slot 7.
    sqlx::query("UPDATE article_stats SET like_count = like_count + 5 WHERE article_id = 'art-2' AND slot = 7")
        .execute(&admin)
        .await
        .unwrap();
    // A fold moves the wrong total as it is: the drift stays exactly 5.
    let summary = counter_fold::sweep(&runtime).await.unwrap();
    assert_eq!(summary.slots_folded, 9, "{summary}");
    assert_eq!(art_2(&admin).await, (15, 20, 1));
    let fixed = news_service::recount(&app.db.url_for("news_pipeline"))
        .await
        .unwrap();
    assert_eq!(fixed.total_drift(), 5, "{fixed}");
    assert_eq!(art_2(&admin).await, (15, 15, 1));
    // Recount adds to slot 0, which is where the fold keeps the count: still one row.
    assert_eq!(counter_fold::sweep(&runtime).await.unwrap().slots_folded, 0);
    let again = news_service::recount(&app.db.url_for("news_pipeline"))
        .await
        .unwrap();
    assert_eq!(again.total_drift(), 0, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_never_overlaps_a_fold_that_creates_slot_0() {
    let app = spawn(0).await;
    let admin = pool_of(&app.db, "admin", 2).await;
    let owner = pool_of(&app.db, "news_owner", 1).await;
    // art-3's likes all in slot 5 (as a bulk statement leaves them): a fold creates slot 0.
    sqlx::raw_sql(
        "INSERT INTO likes (article_id, user_id) SELECT 'art-3', 'u' || i FROM generate_series(1, 7) i;
         UPDATE article_stats SET slot = 5 WHERE article_id = 'art-3';",
    )
    .execute(&admin)
    .await
    .unwrap();
    let mut fold = connection(&app.db, "news_app").await;
    sqlx::raw_sql("BEGIN").execute(&mut fold).await.unwrap();
    let folded: i32 = sqlx::query_scalar("SELECT fold_counter_slots('article_stats', 'art-3')")
        .fetch_one(&mut fold)
        .await
        .unwrap();
    assert_eq!(folded, 1);
    // TRUNCATE zeroes the counters by an UPDATE that could not see the new slot 0 if it ran
    // now; it waits for the fold instead.
    let truncate = tokio::spawn(async move {
        sqlx::raw_sql("TRUNCATE likes")
            .execute(&owner)
            .await
            .unwrap();
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!truncate.is_finished(), "TRUNCATE ran alongside the fold");
    sqlx::raw_sql("COMMIT").execute(&mut fold).await.unwrap();
    truncate.await.unwrap();
    let likes: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(like_count), 0)::bigint FROM article_stats WHERE article_id = 'art-3'",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(likes, 0);
}

#[tokio::test]
async fn the_runtime_role_may_fold_but_still_not_write_counters() {
    let app = spawn(0).await;
    let runtime = pool_of(&app.db, "news_app", 1).await;
    let error = sqlx::query("SELECT fold_counter_slots('likes', 'art-1')")
        .execute(&runtime)
        .await
        .unwrap_err();
    let code = error.as_database_error().unwrap().code();
    assert_eq!(code.as_deref(), Some("22023"), "{error}");
    let error = sqlx::query("DELETE FROM article_stats")
        .execute(&runtime)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("permission denied"), "{error}");
    // Nobody else may call it.
    let admin = pool_of(&app.db, "admin", 1).await;
    let public: bool = sqlx::query_scalar(
        "SELECT has_function_privilege('public', 'news.fold_counter_slots(text, text)', 'EXECUTE')",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert!(!public);
}
