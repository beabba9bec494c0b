//! Every list statement keeps one plan on a connection: after its first five executions
//! PostgreSQL reuses the plan made without the values (generic) instead of planning each request
//! again with them (custom). Run as the service runs them (prepared, on one connection), with
//! data skewed as in production (an article with thousands of comments, a reader with thousands
//! of bookmarks, a directory of thousands) and the light values first, which is what tipped the
//! statements into planning every request while their values were visible to the planner.

use news_service::domain::cursor::{KeysetPaging, ListKind, ListPaging};
use news_service::store::articles::{self, ListSpec};
use news_service::store::comments::thread_page;
use news_service::store::directory::{self, DirectoryPage, JOURNALISTS, ORGANIZATIONS, Selection};
use shared_auth::Paging;
use sqlx::PgPool;
use sqlx::postgres::{PgPoolOptions, PgRow};

use crate::helpers::{TestApp, pool_as, spawn_with_fixture};

/// The fixture, plus: 3,000 comments on `art-1`; 3,000 articles by `jrn-1` (`jrn-2` and
/// `jrn-3` have one or two); 3,000 bookmarks of `heavy-reader`, 2 of `light-reader`, 5 of each
/// of 400 other readers; 3,000 organisations, and 3,000 journalists at `org-p1` besides 3,000
/// elsewhere; `heavy-reader` follows 3,000 journalists and 2,000 organisations, the 400 readers
/// 5 and 5. Analysed, so the planner knows the skew.
async fn spawn_skewed() -> TestApp {
    let app = spawn_with_fixture().await;
    let admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO comments (id, article_id, author_id, text, depth, path, created_at)
         SELECT gen_random_uuid(), 'art-1', 'reader', 'A comment.', 0, lpad(n::text, 8, '0'),
                timestamptz '2026-02-01' + n * interval '1 minute'
           FROM generate_series(1, 3000) n;
         INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id)
         SELECT 'art-p' || n, 'Title', 'Summary', 'Body', 'https://alpha.example/p',
                timestamptz '2025-12-01' - n * interval '1 minute', 'org-a', 'jrn-1'
           FROM generate_series(1, 3000) n;
         INSERT INTO bookmarks (article_id, user_id, created_at)
         SELECT 'art-p' || n, 'heavy-reader', timestamptz '2026-02-01' - n * interval '1 minute'
           FROM generate_series(1, 3000) n;
         INSERT INTO bookmarks (article_id, user_id) VALUES
           ('art-1', 'light-reader'), ('art-2', 'light-reader');
         INSERT INTO bookmarks (article_id, user_id)
         SELECT 'art-p' || n, 'reader-' || n % 400 FROM generate_series(1, 2000) n;
         INSERT INTO organizations (id, name, url)
         SELECT 'org-p' || n, 'Press ' || md5(n::text), 'https://p.example'
           FROM generate_series(1, 3000) n;
         INSERT INTO journalists (id, name, organization_id)
         SELECT 'jrn-p' || n, 'Writer ' || md5(n::text),
                CASE WHEN n <= 3000 THEN 'org-p1' ELSE 'org-p' || (n % 3000 + 1) END
           FROM generate_series(1, 6000) n;
         INSERT INTO journalist_follows (journalist_id, user_id)
         SELECT 'jrn-p' || n, 'heavy-reader' FROM generate_series(1, 3000) n
         UNION ALL SELECT 'jrn-p' || n, 'reader-' || n % 400 FROM generate_series(1, 2000) n;
         INSERT INTO organization_follows (organization_id, user_id)
         SELECT 'org-p' || n, 'heavy-reader' FROM generate_series(1, 2000) n
         UNION ALL SELECT 'org-p' || n, 'reader-' || n % 400 FROM generate_series(1, 2000) n;
         ANALYZE;",
    )
    .execute(&admin)
    .await
    .unwrap();
    app
}

/// A pool of one connection as the service's role, so every execution meets the same cache.
async fn one_connection(app: &TestApp) -> PgPool {
    let runtime = pool_as(&app.db, "news_app").await;
    PgPoolOptions::new()
        .max_connections(1)
        .connect_with(runtime.connect_options().as_ref().clone())
        .await
        .unwrap()
}

/// How many times the connection's prepared statement whose text contains `marker` was
/// planned with its values (custom) and without them (generic), `pg_prepared_statements`.
async fn plans_of(pool: &PgPool, marker: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT custom_plans, generic_plans FROM pg_prepared_statements \
         WHERE strpos(statement, $1) > 0 AND statement NOT LIKE '%pg_prepared_statements%'",
    )
    .bind(marker)
    .fetch_one(pool)
    .await
    .unwrap()
}

fn page_of(limit: i64) -> Paging {
    Paging::new(Some(limit), None).unwrap()
}

/// Eight executions: the first five are planned with their values, the next three must reuse
/// the generic plan.
const SETTLED: (i64, i64) = (5, 3);

#[tokio::test]
async fn a_long_thread_keeps_one_plan() {
    let app = spawn_skewed().await;
    let pool = one_connection(&app).await;
    let first = KeysetPaging {
        paging: page_of(20),
        after: None,
    };
    for _ in 0..8 {
        let page = thread_page(&pool, "art-1", &first).await.unwrap();
        assert_eq!(page.data.len(), 20);
    }
    assert_eq!(
        plans_of(&pool, "FROM comments WHERE article_id").await,
        SETTLED
    );
}

#[tokio::test]
async fn bookmarks_keep_one_plan_whoever_comes_first() {
    let app = spawn_skewed().await;
    let pool = one_connection(&app).await;
    let paging = KeysetPaging {
        paging: page_of(20),
        after: None,
    };
    for reader in ["light-reader"; 5].into_iter().chain(["heavy-reader"; 3]) {
        articles::bookmarked_by(&pool, reader, &paging)
            .await
            .unwrap();
    }
    assert_eq!(plans_of(&pool, "FROM bookmarks b WHERE").await, SETTLED);
}

#[tokio::test]
async fn a_journalists_articles_keep_one_plan_whoever_comes_first() {
    let app = spawn_skewed().await;
    let pool = one_connection(&app).await;
    let paging = ListPaging {
        paging: page_of(20),
        cursor: None,
    };
    for journalist in ["jrn-3"; 5].into_iter().chain(["jrn-1"; 3]) {
        let spec = ListSpec {
            journalist_id: Some(journalist.to_owned()),
            ..ListSpec::default()
        };
        articles::page(&pool, ListKind::Articles, spec, &paging)
            .await
            .unwrap();
    }
    assert_eq!(plans_of(&pool, "a.journalist_id =").await, SETTLED);
}

/// Page 1 of the organisations (with and without a viewer), a page after a cursor, and one
/// organisation's journalists, each on its own connection.
#[tokio::test]
async fn directory_pages_keep_one_plan() {
    let app = spawn_skewed().await;
    let first = Some(DirectoryPage {
        paging: page_of(20),
        after: None,
    });
    let after = Some(DirectoryPage {
        paging: page_of(20),
        after: Some(("Press 5", "org-p1")),
    });
    let cases = [
        (&ORGANIZATIONS, Selection::All, None, first),
        (&ORGANIZATIONS, Selection::All, Some("heavy-reader"), first),
        (&ORGANIZATIONS, Selection::All, None, after),
        (
            &JOURNALISTS,
            Selection::OfOrganization("org-a"),
            None,
            first,
        ),
    ];
    for (list, selection, viewer, page) in cases {
        let pool = one_connection(&app).await;
        for _ in 0..8 {
            let rows: Vec<PgRow> = directory::list_query("", list, selection, viewer, page)
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
            assert!(!rows.is_empty());
        }
        // A statement without values is kept generic from the first execution.
        let plans = plans_of(&pool, "ORDER BY").await;
        assert!(
            plans == SETTLED || plans == (0, 8),
            "{selection:?} {viewer:?}: {plans:?}"
        );
        pool.close().await;
    }
}

/// The plan a statement gets without its values (the one a connection keeps), as EXPLAIN text
/// (VERBOSE, which names a hashed subplan where the select list uses it): prepared with SQL on a
/// connection of its own that plans generically, run with NULLs.
async fn generic_plan(app: &TestApp, sql: &str) -> String {
    let pool = one_connection(app).await;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::raw_sql(&format!(
        "SET plan_cache_mode = force_generic_plan; PREPARE kept AS {sql}"
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    let params: i32 = sqlx::query_scalar(
        "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'kept'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let nulls = vec!["NULL"; params as usize].join(", ");
    let lines: Vec<String> =
        sqlx::query_scalar(&format!("EXPLAIN (VERBOSE) EXECUTE kept({nulls})"))
            .persistent(false)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    lines.join("\n")
}

/// The viewer's flags (liked, bookmarked, following) and the directory's `viewer` are looked
/// up for the page's rows: the plan kept for every viewer never hashes all of one viewer's
/// bookmarks or follows, which for a reader with thousands cost 2.6 ms a page.
#[tokio::test]
async fn the_plans_kept_for_every_viewer_look_the_flags_up_per_row() {
    let app = spawn_skewed().await;
    let paging = page_of(20);
    let statements = [
        articles::bookmarks_query("", "heavy-reader", None, paging).into_sql(),
        articles::list_query(
            "",
            &ListSpec {
                viewer: Some("heavy-reader".to_owned()),
                limit: 21,
                ..ListSpec::default()
            },
        )
        .into_sql(),
        directory::list_query(
            "",
            &ORGANIZATIONS,
            Selection::All,
            Some("heavy-reader"),
            Some(DirectoryPage {
                paging,
                after: None,
            }),
        )
        .into_sql(),
    ];
    for sql in statements {
        let plan = generic_plan(&app, &sql).await;
        assert!(plan.contains("SubPlan"), "{plan}");
        assert!(!plan.contains("hashed SubPlan"), "{plan}");
    }
}
