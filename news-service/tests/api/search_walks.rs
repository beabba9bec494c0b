//! Review of the bounded walks of `GET /v1/news/search` (docs/news.md, "Pages that stop
//! short"): every page walked by `next_cursor` gives exactly what PostgreSQL's own full-text
//! statement matches, each once, in order, whatever the walk bound and whatever writers do
//! between and during the pages.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use news_service::domain::search::{
    Access, Filters, RANKED_MATCHES, SearchCursor, SearchSpec, Sort,
};
use news_service::store::search::{access, language_queries, newest_hits_query, page_examining};
use sqlx::{PgPool, Row};

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
        let page = page_examining(pool, &Default::default(), &spec, limit, None, examine)
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

/// Articles deleted (and written again), their words and times changed, inside the stretch a
/// page walks, while the pages are read: an article present for the whole walk that matches is never skipped, and none is
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
    let rounds = Arc::new(AtomicU64::new(0));
    // One writer deletes every volatile article in one statement, then writes them all again
    // and changes some, over and over: a delete commits between some walk and the statement
    // that found its end.
    let writer = {
        let (admin, stop, rounds) = (admin.clone(), stop.clone(), rounds.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                sqlx::query("DELETE FROM articles WHERE id LIKE 'v-%'")
                    .execute(&admin)
                    .await
                    .unwrap();
                sqlx::query(VOLATILE).execute(&admin).await.unwrap();
                // Their words changed (other lexemes) and their times moved within the walk.
                for statement in [
                    "UPDATE articles SET body = 'Gamma only.' WHERE id LIKE 'v-%1'",
                    "UPDATE articles SET published_at = published_at - interval '7 minutes'
                      WHERE id LIKE 'v-%2'",
                ] {
                    sqlx::query(statement).execute(&admin).await.unwrap();
                }
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let runtime = pool_as(&app.db, "news_app").await;
    let mut failures = Vec::new();
    // At least 25 walks, while the writer writes 20 rounds.
    let mut round = 0;
    while round < 25 || (rounds.load(Ordering::Relaxed) < 20 && round < 500) {
        round += 1;
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
    writer.await.unwrap();
    let rounds = rounds.load(Ordering::Relaxed);
    assert!(rounds >= 20, "{rounds} rounds of writes only");
    assert!(
        failures.is_empty(),
        "{rounds} rounds of writes: {failures:#?}"
    );
}

/// Articles in English, Spanish and a language without a configuration (`xx`, matched word
/// for word), words drawn from a small vocabulary so that phrases, alternatives and exclusions
/// match some; three articles to each `published_at`, three authors.
const CORPUS: &str = "
SELECT setseed(0.25);
INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id, language)
SELECT 'r-' || lpad(i::text, 5, '0'),
       (SELECT string_agg(w[1 + floor(random() * array_length(w, 1))::int + 0 * g], ' ') FROM generate_series(1, 3 + (i % 2)) g),
       (SELECT string_agg(w[1 + floor(random() * array_length(w, 1))::int + 0 * g], ' ') FROM generate_series(1, 4 + (i % 3)) g),
       (SELECT string_agg(w[1 + floor(random() * array_length(w, 1))::int + 0 * g], ' ') FROM generate_series(1, 6 + (i % 5)) g),
       'u', timestamptz '2026-06-01' - (i / 3) * interval '1 minute',
       (ARRAY['org-a', 'org-a', 'org-b'])[1 + i % 3], (ARRAY['jrn-1', 'jrn-2', 'jrn-3'])[1 + i % 3],
       lang
  FROM generate_series(1, 1500) AS i
 CROSS JOIN LATERAL (SELECT CASE WHEN i % 10 < 6 THEN 'en' WHEN i % 10 < 9 THEN 'es' ELSE 'xx' END AS lang) l
 CROSS JOIN LATERAL (SELECT CASE lang
       WHEN 'es' THEN ARRAY['huelga', 'puerto', 'elección', 'votación', 'lluvia', 'ciudad', 'el', 'la',
                            'de', 'dijo', 'café', 'strike', 'noche', 'consejo', 'puertos']
       ELSE ARRAY['strike', 'strikes', 'harbour', 'election', 'vote', 'rain', 'city', 'the', 'of',
                  'said', 'café', 'night', 'council', 'port', 'huelga', 'elections', 'x' || i] END AS w
       WHERE i > 0) v;
";

/// Terms a generated query is made of.
const WORDS: [&str; 14] = [
    "strike", "harbour", "election", "eleccion", "rain", "city", "said", "cafe", "huelga",
    "puerto", "night", "council", "port", "strikes",
];
const STOP: [&str; 4] = ["the", "of", "el", "de"];

/// A small linear congruential generator: the same queries on every run.
struct Draw(u64);

impl Draw {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.next(WORDS.len())]
    }
    /// A web-search query whose first term asks for a word in every language.
    fn query(&mut self) -> String {
        let mut terms = vec![match self.next(3) {
            0 => self.word().to_owned(),
            1 => format!("\"{} {}\"", self.word(), self.word()),
            _ => format!("{} OR {}", self.word(), self.word()),
        }];
        for _ in 0..self.next(4) {
            terms.push(match self.next(7) {
                0 | 1 => self.word().to_owned(),
                2 => format!("-{}", self.word()),
                3 => format!("\"{} {}\"", self.word(), STOP[self.next(STOP.len())]),
                4 => format!("{} OR {}", self.word(), self.word()),
                5 => STOP[self.next(STOP.len())].to_owned(),
                _ => format!("-\"{} {}\"", self.word(), self.word()),
            });
        }
        terms.join(" ")
    }
    fn filters(&mut self) -> Filters {
        let at = |minutes: i64| {
            chrono::DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
                .unwrap()
                .to_utc()
                - chrono::Duration::minutes(minutes)
        };
        let mut filters = Filters::default();
        match self.next(6) {
            0 => filters.organization_id = Some("org-a".to_owned()),
            1 => filters.journalist_id = Some("jrn-3".to_owned()),
            2 => filters.published_after = Some(at(300)),
            3 => filters.published_before = Some(at(100)),
            4 => {
                filters.published_after = Some(at(400));
                filters.published_before = Some(at(37));
                filters.organization_id = Some("org-a".to_owned());
            }
            _ => {}
        }
        filters
    }
}

/// What PostgreSQL itself matches (each article with its own language's configuration),
/// newest first, and how many articles the filters leave.
async fn reference(pool: &PgPool, q: &str, filters: &Filters) -> (Vec<String>, i64) {
    let filtered = "FROM articles a
        WHERE ($2::text IS NULL OR a.organization_id = $2) AND ($3::text IS NULL OR a.journalist_id = $3)
          AND ($4::timestamptz IS NULL OR a.published_at >= $4)
          AND ($5::timestamptz IS NULL OR a.published_at < $5)";
    let matches: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT a.id {filtered}
            AND a.search_vector @@ websearch_to_tsquery(search_config(a.language), $1)
          ORDER BY a.published_at DESC, a.id DESC"
    ))
    .bind(q)
    .bind(&filters.organization_id)
    .bind(&filters.journalist_id)
    .bind(filters.published_after)
    .bind(filters.published_before)
    .fetch_all(pool)
    .await
    .unwrap();
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) {filtered} AND $1::text IS NOT NULL"
    ))
    .bind(q)
    .bind(&filters.organization_id)
    .bind(&filters.journalist_id)
    .bind(filters.published_after)
    .bind(filters.published_before)
    .fetch_one(pool)
    .await
    .unwrap();
    (matches, n)
}

/// Generated queries (words, phrases, `OR`, exclusions, stop words, accents) with every filter,
/// both sorts, limits of 1 to 100 and walks examining 13 to all articles: walking the pages by
/// `next_cursor` gives exactly what PostgreSQL matches, each once, newest first (`sort=newest`)
/// or the ranked window first, in score order, then the older matches newest first
/// (`sort=relevance`), in at most one page per walk bound plus one per page of matches.
#[tokio::test]
async fn walked_pages_give_what_postgresql_matches() {
    let app = spawn_with_fixture().await;
    let admin = app.admin().await;
    sqlx::raw_sql("DELETE FROM articles")
        .execute(&admin)
        .await
        .unwrap();
    sqlx::raw_sql(CORPUS).execute(&admin).await.unwrap();
    let runtime = pool_as(&app.db, "news_app").await;
    let mut draw = Draw(11);
    let (mut searches, mut matched, mut short, mut walked) = (0, 0, 0, 0);
    for _ in 0..120 {
        let q = draw.query();
        let filters = draw.filters();
        let (expected, articles) = reference(&runtime, &q, &filters).await;
        matched += usize::from(!expected.is_empty());
        // Both accesses, unbounded, read the same matches.
        let languages = language_queries(&runtime, &q).await.unwrap();
        walked += usize::from(matches!(access(&languages, 21, 400), Access::Walk(_)));
        for how in [Access::Index, Access::Walk(1_000_000)] {
            let read: Vec<String> = if languages.is_empty() {
                Vec::new()
            } else {
                newest_hits_query("", &languages, &filters, None, 100_000, None, how)
                    .build()
                    .fetch_all(&runtime)
                    .await
                    .unwrap()
                    .iter()
                    .map(|row| row.get("id"))
                    .collect()
            };
            assert_eq!(read, expected, "{q:?} {filters:?} {how:?}");
        }
        for sort in [Sort::Newest, Sort::Relevance] {
            let limit = 1 + draw.next(100) as i64;
            let examine = [13, 97, 400, 1_000_000][draw.next(4)];
            let spec = SearchSpec {
                q: q.clone(),
                sort,
                filters: filters.clone(),
                after: None,
                window_end: None,
            };
            let walks = (articles as usize).div_ceil(examine as usize);
            let pages_of_matches = expected.len().div_ceil(limit as usize);
            let (seen, pages) =
                walk(&runtime, spec, limit, examine, walks + pages_of_matches + 2).await;
            searches += 1;
            short += usize::from(pages > pages_of_matches.max(1));
            let context = format!("{q:?} {filters:?} {sort:?} limit {limit} examine {examine}");
            let ids: Vec<&String> = seen.iter().map(|(id, _, _)| id).collect();
            if sort == Sort::Newest {
                assert_eq!(ids, expected.iter().collect::<Vec<_>>(), "{context}");
                continue;
            }
            // Relevance: the same matches once each; the scored ones (the window) are the
            // newest matches, ranked by score then newest first; the rest follow newest first.
            let mut sorted: Vec<&String> = ids.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), ids.len(), "served twice: {context}");
            let mut want: Vec<&String> = expected.iter().collect();
            want.sort();
            assert_eq!(sorted, want, "{context}");
            let place = |id: &String| expected.iter().position(|e| e == id).unwrap();
            let window = seen.iter().take_while(|(_, score, _)| *score > 0.0).count();
            assert!(
                seen[window..].iter().all(|(_, s, _)| *s == 0.0),
                "{context}"
            );
            let mut places: Vec<usize> =
                seen[..window].iter().map(|(id, _, _)| place(id)).collect();
            for pair in seen[..window].windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                assert!(
                    a.1 > b.1 || (a.1 == b.1 && place(&a.0) < place(&b.0)),
                    "window order: {context}"
                );
            }
            places.sort_unstable();
            assert_eq!(places, (0..window).collect::<Vec<_>>(), "window: {context}");
            let rest: Vec<usize> = seen[window..].iter().map(|(id, _, _)| place(id)).collect();
            assert_eq!(
                rest,
                (window..expected.len()).collect::<Vec<_>>(),
                "{context}"
            );
            assert!(window <= 500);
        }
    }
    // The generator makes queries that match, read from the index or walked, and walks that
    // stop short.
    assert!(
        (20..120).contains(&walked),
        "{walked} of 120 queries walked"
    );
    assert!(matched >= 60, "{matched} of 120 queries match");
    assert!(
        short >= 20,
        "{short} of {searches} searches had pages cut short"
    );
}

/// Rows of `search_lexemes` that differ from a recount of the articles.
pub(crate) async fn wrong_counts(admin: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (
            SELECT a.language, l.lexeme, count(*) AS n
              FROM articles a, unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)
             GROUP BY 1, 2) c
          FULL JOIN (SELECT * FROM search_lexemes WHERE articles <> 0) s
            ON s.language = c.language AND s.lexeme = c.lexeme
         WHERE s.articles IS DISTINCT FROM c.n",
    )
    .fetch_one(admin)
    .await
    .unwrap()
}

/// One writer's statement `n` on articles `c-00000` to `c-00199` (shared with the other
/// writers): an upsert of several articles of several languages (as the pipeline writes), an
/// update of the text or the language, an update that keeps the vector, or a delete. Every
/// statement takes its articles' rows in id order (the upsert reads its ids sorted, the others
/// lock them first, as a careful pipeline does): two statements that lock the same rows in
/// opposite orders deadlock in PostgreSQL whatever the triggers do, which is not what this tests.
fn write_statement(draw: &mut Draw) -> (String, Vec<String>) {
    const IN_ID_ORDER: &str = "SELECT id FROM articles WHERE id = ANY($1) ORDER BY id FOR UPDATE";
    let ids: Vec<String> = (0..1 + draw.next(6))
        .map(|_| format!("c-{:05}", draw.next(200)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let sql = match draw.next(5) {
        0 | 1 => format!(
            "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                                   journalist_id, language)
             SELECT id, '{} ' || id, '{}', '{} {}', 'u', timestamptz '2026-07-01',
                    'org-a', 'jrn-1', (ARRAY['en', 'es', 'xx'])[1 + abs(hashtext(id)) % 3]
               FROM unnest($1::text[]) AS id
             ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, language = EXCLUDED.language",
            draw.word(),
            draw.word(),
            draw.word(),
            draw.word()
        ),
        2 => format!(
            "UPDATE articles SET body = body || ' {}', language = (ARRAY['en', 'es'])[1 + {}]
              WHERE id IN ({IN_ID_ORDER})",
            draw.word(),
            draw.next(2)
        ),
        3 => format!("UPDATE articles SET title = title WHERE id IN ({IN_ID_ORDER})"),
        _ => format!("DELETE FROM articles WHERE id IN ({IN_ID_ORDER})"),
    };
    (sql, ids)
}

/// Several writers at once, each statement alone (as the pipeline and the import write):
/// no deadlock, and the counts equal a recount of the articles after every kind of write,
/// truncate included.
#[tokio::test]
async fn the_lexeme_counts_stay_exact_under_concurrent_writers() {
    let app = spawn_with_fixture().await;
    let admin = app.admin().await;
    sqlx::raw_sql(CORPUS).execute(&admin).await.unwrap();
    let mut writers = Vec::new();
    for w in 0..4 {
        // The owner: the pipeline's role may not delete articles.
        let pool = app.admin().await;
        writers.push(tokio::spawn(async move {
            let mut draw = Draw(100 + w);
            for _ in 0..150 {
                let (sql, ids) = write_statement(&mut draw);
                sqlx::query(&sql).bind(&ids).execute(&pool).await.unwrap();
            }
        }));
    }
    // Meanwhile, a delete of many articles and a multi-row update in one statement each.
    sqlx::query("DELETE FROM articles WHERE id LIKE 'r-0%5'")
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query("UPDATE articles SET body = 'strike ' || body WHERE id LIKE 'r-01%'")
        .execute(&admin)
        .await
        .unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    assert_eq!(wrong_counts(&admin).await, 0);
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM articles WHERE id LIKE 'c-%'")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(written > 20, "{written}");
    sqlx::raw_sql("TRUNCATE articles CASCADE")
        .execute(&admin)
        .await
        .unwrap();
    assert_eq!(wrong_counts(&admin).await, 0);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM search_lexemes WHERE articles <> 0")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// An article of `language`, for [`writers_of_two_languages_take_turns`].
fn one_article(id: &str, language: &str) -> String {
    format!(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id, language)
         VALUES ('{id}', 'Harbour strike', 'Summary', 'Body', 'u', '2026-07-01', 'org-a',
                 'jrn-1', '{language}')"
    )
}

/// Two transactions writing articles of two languages in opposite orders: the second waits for
/// the first's commit instead of the two deadlocking on the counts (each language's row ''),
/// and the counts stay exact.
#[tokio::test]
async fn writers_of_two_languages_take_turns() {
    let app = spawn_with_fixture().await;
    let admin = app.admin().await;
    let mut first = admin.begin().await.unwrap();
    sqlx::query(&one_article("t-1", "en"))
        .execute(&mut *first)
        .await
        .unwrap();
    let second = {
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut second = admin.begin().await.unwrap();
            for (id, language) in [("t-2", "es"), ("t-3", "en")] {
                sqlx::query(&one_article(id, language))
                    .execute(&mut *second)
                    .await?;
            }
            second.commit().await
        })
    };
    // The second has written (or waits to write) its Spanish article.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let first_result = async {
        sqlx::query(&one_article("t-4", "es"))
            .execute(&mut *first)
            .await?;
        first.commit().await
    }
    .await;
    let second_result = second.await.unwrap();
    assert!(
        first_result.is_ok() && second_result.is_ok(),
        "{first_result:?} {second_result:?}"
    );
    assert_eq!(wrong_counts(&admin).await, 0);
}

/// `count` articles from minute `from` on (newest first), every `every`-th holding the phrase
/// `alpha beta`, the others `other`; ids `prefix-00001`, ...
async fn insert_phrases(
    pool: &PgPool,
    prefix: &str,
    count: i32,
    from: i32,
    every: i32,
    other: &str,
) {
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
         SELECT $1 || '-' || lpad(i::text, 5, '0'), 'Story ' || i, 'Summary',
                CASE WHEN i % $4 = 0 THEN 'It was alpha beta here.' ELSE $5 END,
                'u', timestamptz '2026-06-01' - ($3 + i) * interval '1 minute', 'org-a', 'jrn-1'
           FROM generate_series(1, $2) AS i",
    )
    .bind(prefix)
    .bind(count)
    .bind(from)
    .bind(every)
    .bind(other)
    .execute(pool)
    .await
    .unwrap();
}

/// Later pages of `sort=relevance` rank the window page 1 ranked, plus articles published
/// since: more articles published since than a walk examines, or more matches than the window
/// holds, do not push the window's own matches out of it (they were never served).
#[tokio::test]
async fn articles_published_since_page_one_push_no_match_out_of_the_window() {
    let app = spawn_with_fixture().await;
    let admin = app.admin().await;
    let runtime = pool_as(&app.db, "news_app").await;
    // (the articles, every how many a match, the others' text, older articles without the
    // words, then newer articles published, every how many a match): page 1 walks 50 articles
    // (5 matches) and the walks go on with 120 newer articles of the words, none a match; or
    // page 1 reads the GIN index (the words are rare) and 1,000 newer matches follow.
    let cases = [
        (1_500, 10, "Beta came before alpha.", 0, 120, 1_000_000),
        (300, 10, "Gamma only.", 4_000, 1_000, 1),
    ];
    for (count, every, other, padding, flood, flood_every) in cases {
        sqlx::query("DELETE FROM articles")
            .execute(&admin)
            .await
            .unwrap();
        insert_phrases(&admin, "o", count, 0, every, other).await;
        insert_phrases(&admin, "p", padding, count, 1_000_000, "Gamma only.").await;
        let expected: HashSet<String> = (1..=count / every)
            .map(|i| format!("o-{:05}", i * every))
            .collect();
        let first = SearchSpec {
            q: "\"alpha beta\"".to_owned(),
            sort: Sort::Relevance,
            filters: Filters::default(),
            after: None,
            window_end: None,
        };
        let walks = async || {
            let languages = language_queries(&runtime, &first.q).await.unwrap();
            matches!(access(&languages, RANKED_MATCHES, 50), Access::Walk(_))
        };
        assert_eq!(walks().await, padding == 0);
        let page = page_examining(&runtime, &Default::default(), &first, 2, None, 50)
            .await
            .unwrap();
        let mut seen: Vec<String> = page.data.iter().map(|h| h.item.id.clone()).collect();
        assert_eq!(page.data[0].score, 1.0);
        insert_phrases(&admin, "n", flood, -5_000, flood_every, other).await;
        assert_eq!(walks().await, padding == 0);
        let next = SearchCursor::decode(&page.next_cursor.unwrap())
            .unwrap()
            .resume(None, None, &Filters::default())
            .unwrap();
        let (rest, _) = walk(&runtime, next, 2, 50, 10_000).await;
        seen.extend(rest.into_iter().map(|(id, _, _)| id));
        let old: Vec<&String> = seen.iter().filter(|id| id.starts_with("o-")).collect();
        let distinct: HashSet<String> = old.iter().map(|id| (*id).clone()).collect();
        assert_eq!(
            distinct.len(),
            old.len(),
            "served twice after {flood}: {old:?}"
        );
        assert_eq!(distinct, expected, "after {flood} newer articles");
    }
}
