use crate::helpers::*;
use news_service::store::{articles, directory};
use shared_auth::Paging;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

#[tokio::test]
#[ignore]
async fn zz_make_db() {
    let app = spawn_seeded(200).await;
    println!("DBNAME {}", app.db.name);
}

async fn one() -> PgPool {
    let url = std::env::var("SCRATCH_URL").unwrap();
    PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap()
}

async fn report(pool: &PgPool, label: &str) {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT statement, custom_plans, generic_plans FROM pg_prepared_statements WHERE statement ~* 'limit'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (s, c, g) in rows {
        if s.contains("pg_prepared") {
            continue;
        }
        println!(
            "PLANS {label}: custom {c} generic {g} :: {}",
            &s.replace('\n', " ")[..60]
        );
        if std::env::var("FULL").is_ok() {
            println!("FULL {label}|{}", s.replace('\n', " "));
        }
    }
}

fn spec(
    viewer: Option<&str>,
    org: Option<&str>,
    jrn: Option<&str>,
    fol: Option<&str>,
    after: bool,
) -> articles::ListSpec {
    articles::ListSpec {
        viewer: viewer.map(str::to_owned),
        organization_id: org.map(str::to_owned),
        journalist_id: jrn.map(str::to_owned),
        followed_by: fol.map(str::to_owned),
        after: after.then(|| {
            (
                "2025-12-25T00:00:00Z".parse().unwrap(),
                "art-y5000".to_owned(),
            )
        }),
        limit: 21,
        offset: 0,
    }
}

#[tokio::test]
#[ignore]
async fn zz_measure() {
    let cases: Vec<(&str, articles::ListSpec, articles::ListSpec)> = vec![
        (
            "articles all anon",
            spec(None, None, None, None, false),
            spec(None, None, None, None, false),
        ),
        (
            "articles all viewer heavy",
            spec(Some("heavy"), None, None, None, false),
            spec(Some("u5"), None, None, None, false),
        ),
        (
            "articles all cursor",
            spec(None, None, None, None, true),
            spec(None, None, None, None, true),
        ),
        (
            "articles org-x1 (2000)",
            spec(None, Some("org-x1"), None, None, false),
            spec(None, Some("org-x9"), None, None, false),
        ),
        (
            "articles org-x1 cursor",
            spec(None, Some("org-x1"), None, None, true),
            spec(None, Some("org-x9"), None, None, true),
        ),
        (
            "articles jrn-x1 (2000)",
            spec(None, None, Some("jrn-x1"), None, false),
            spec(None, None, Some("jrn-x9"), None, false),
        ),
        (
            "articles jrn-x9 then jrn-x1",
            spec(None, None, Some("jrn-x9"), None, false),
            spec(None, None, Some("jrn-x1"), None, false),
        ),
        (
            "feed heavy",
            spec(Some("heavy"), None, None, Some("heavy"), false),
            spec(Some("u5"), None, None, Some("u5"), false),
        ),
        (
            "feed heavy cursor",
            spec(Some("heavy"), None, None, Some("heavy"), true),
            spec(Some("u5"), None, None, Some("u5"), true),
        ),
    ];
    for (label, first, then) in cases {
        let pool = one().await;
        for _ in 0..8 {
            articles::list_query("", &first)
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        for _ in 0..4 {
            articles::list_query("", &then)
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        report(&pool, label).await;
    }
    let p = Paging {
        limit: 20,
        offset: 0,
    };
    let at = Some(("2026-11-01T00:00:00Z".parse().unwrap(), "art-y9".to_owned()));
    for (label, first, then, after) in [
        ("bookmarks heavy", "heavy", "u5", None),
        ("bookmarks u5 then heavy", "u5", "heavy", None),
        ("bookmarks heavy cursor", "heavy", "u5", at.clone()),
    ] {
        let pool = one().await;
        for _ in 0..8 {
            articles::bookmarks_query("", first, after.clone(), p)
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        for _ in 0..4 {
            articles::bookmarks_query("", then, after.clone(), p)
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        report(&pool, label).await;
    }
    let page = |after| Some(directory::DirectoryPage { paging: p, after });
    for (label, sel, viewer, after) in [
        ("dir orgs anon", directory::Selection::All, None, None),
        (
            "dir orgs viewer",
            directory::Selection::All,
            Some("heavy"),
            None,
        ),
        (
            "dir orgs cursor",
            directory::Selection::All,
            None,
            Some(("Org 5", "x")),
        ),
    ] {
        let pool = one().await;
        for _ in 0..12 {
            directory::list_query("", &directory::ORGANIZATIONS, sel, viewer, page(after))
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        report(&pool, label).await;
    }
    for (label, sel, viewer, after) in [
        (
            "dir jrn of org-x1",
            directory::Selection::OfOrganization("org-x1"),
            None,
            None,
        ),
        (
            "dir jrn of org-x1 viewer cursor",
            directory::Selection::OfOrganization("org-x1"),
            Some("heavy"),
            Some(("Jrn 5", "x")),
        ),
        (
            "dir jrn all cursor",
            directory::Selection::All,
            None,
            Some(("Jrn 5", "x")),
        ),
    ] {
        let pool = one().await;
        for _ in 0..12 {
            directory::list_query("", &directory::JOURNALISTS, sel, viewer, page(after))
                .build()
                .fetch_all(&pool)
                .await
                .unwrap();
        }
        report(&pool, label).await;
    }
}
