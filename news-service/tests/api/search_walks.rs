//! Review of the bounded walks of `GET /v1/news/search` (docs/news.md, "Pages that stop
//! short"): every page walked by `next_cursor` gives exactly what PostgreSQL's own full-text
//! statement matches, each once, in order, whatever the walk bound and whatever writers do
//! between and during the pages.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use news_service::domain::search::{Filters, SearchCursor, SearchSpec, Sort};
use news_service::store::search::page_examining;
use sqlx::PgPool;

use crate::helpers::{pool_as, spawn_with_fixture};

/// Every page of a search through the store, walks examining at most `examine` articles:
/// the hits' ids, scores and (published_at, id), and the number of pages.
pub async fn walk(
    pool: &PgPool,
    first: SearchSpec,
    limit: i64,
    examine: i64,
    max_pages: usize,
) -> (Vec<(String, f64, chrono::DateTime<chrono::Utc>)>, usize) {
    let mut spec = first;
    let (mut seen, mut pages) = (Vec::new(), 0);
    loop {
        let page = page_examining(pool, &spec, limit, None, examine)
            .await
            .unwrap();
        pages += 1;
        assert!(
            pages <= max_pages,
            "the walk goes on past {max_pages} pages"
        );
        assert!(page.data.len() <= limit as usize);
        seen.extend(
            page.data
                .iter()
                .map(|h| (h.item.id.clone(), h.score, h.item.published_at)),
        );
        match page.next_cursor {
            Some(next) => {
                spec = SearchCursor::decode(&next)
                    .unwrap()
                    .resume(None, None, &Filters::default())
                    .unwrap();
            }
            None => return (seen, pages),
        }
    }
}

fn newest(q: &str) -> SearchSpec {
    SearchSpec {
        q: q.to_owned(),
        sort: Sort::Newest,
        filters: Filters::default(),
        after: None,
        window_end: None,
    }
}

/// Between each two steady articles of [`deletes_during_a_walk_skip_no_match`], a volatile one.
const VOLATILE: &str =
    "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
     SELECT 'v-' || lpad(i::text, 5, '0'), 'Volatile ' || i, 'Summary', 'Beta then alpha.',
            'u', timestamptz '2026-06-01' - i * interval '1 minute' + interval '30 seconds',
            'org-a', 'jrn-1'
       FROM generate_series(1, 1200) AS i";

/// Articles deleted (and written again) inside the stretch a page walks, while the pages are
/// read: an article present for the whole walk that matches is never skipped, and none is
/// served twice. The walk and the statement finding where it stopped must see the same
/// articles: with a delete between them, the end found was one article further than the walk
/// read, and the article after it was never read.
#[tokio::test]
async fn deletes_during_a_walk_skip_no_match() {
    let app = spawn_with_fixture().await;
    let admin = app.admin().await;
    // Steady articles a minute apart, every third holding the phrase `alpha beta`, the others
    // both words apart; between each two, a volatile article holding both words apart too.
    sqlx::raw_sql(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
         SELECT 'p-' || lpad(i::text, 5, '0'), 'Story ' || i, 'Summary',
                CASE WHEN i % 3 = 0 THEN 'It was alpha beta here.' ELSE 'Beta came before alpha.' END,
                'u', timestamptz '2026-06-01' - i * interval '1 minute', 'org-a', 'jrn-1'
           FROM generate_series(1, 1200) AS i;
",
    )
    .execute(&admin)
    .await
    .unwrap();
    sqlx::query(VOLATILE).execute(&admin).await.unwrap();
    let expected: Vec<String> = (1..=400).map(|i| format!("p-{:05}", i * 3)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    // One writer deletes every volatile article in one statement, then writes them all again,
    // over and over: a delete commits between some walk and the statement that found its end.
    let writer = {
        let (admin, stop) = (admin.clone(), stop.clone());
        tokio::spawn(async move {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                sqlx::query("DELETE FROM articles WHERE id LIKE 'v-%'")
                    .execute(&admin)
                    .await
                    .unwrap();
                sqlx::query(VOLATILE).execute(&admin).await.unwrap();
                rounds += 1;
            }
            rounds
        })
    };
    let runtime = pool_as(&app.db, "news_app").await;
    let mut failures = Vec::new();
    for round in 0..25 {
        let (seen, _) = walk(&runtime, newest("\"alpha beta\""), 100, 150, 1000).await;
        let seen: Vec<String> = seen.into_iter().map(|(id, _, _)| id).collect();
        if seen != expected {
            let got: HashSet<&String> = seen.iter().collect();
            let skipped: Vec<&String> = expected.iter().filter(|id| !got.contains(id)).collect();
            failures.push(format!(
                "round {round}: {} served for {} matches, skipped {skipped:?}",
                seen.len(),
                expected.len()
            ));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let toggles = writer.await.unwrap();
    assert!(toggles > 10, "{toggles} writes only");
    assert!(failures.is_empty(), "{toggles} writes: {failures:#?}");
}
