//! `GET /v1/news/search` (docs/news.md, "GET /v1/news/search"): matching per language, ranking, filters, cursor paging,
//! highlights, suggestions, caching, and the plans PostgreSQL picks.

use std::collections::HashSet;

use news_service::db::MIGRATOR;
use news_service::domain::search::{
    Access, Filters, Position, RANKED_MATCHES, SearchCursor, SearchSpec, Sort, WALK_EXAMINES,
};
use news_service::store::search::{
    QueryParses, RankedPage, access, cached_language_queries, language_queries, newest_hits_query,
    page_examining, ranked_hits_query, walk_end_query, window_query,
};
use serde_json::Value;
use sqlx::{PgPool, Row};

use shared_auth::testing::TestDatabase;

use crate::helpers::{
    TestApp, assert_problem, database_before_migration, ids, pool_as, spawn_app_in,
    spawn_with_fixture, start, start_configured,
};

/// Articles in English and Spanish, with accents written precomposed (é) and decomposed
/// (e + U+0301), and emoji (one code point, or several joined).
fn search_fixture() -> String {
    format!(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, \
                               journalist_id, language) VALUES
  ('s-strike', 'Harbour strike ends after twelve days', 'Dock workers return on Monday.',
   'The union accepted the offer.', 'u', '2026-03-01T10:00:00Z', 'org-a', 'jrn-1', 'en'),
  ('s-budget', 'Council debates the budget', 'A vote on the election of a new chair.',
   'Elections are due in spring. A strike is possible, said the harbour authority.', 'u',
   '2026-03-02T10:00:00Z', 'org-b', 'jrn-3', 'en'),
  ('s-results', 'Election results announced', 'Turnout was high.', 'Voters queued for hours.',
   'u', '2026-02-01T10:00:00Z', 'org-a', 'jrn-2', 'en'),
  ('s-old', 'Election night memories', 'Looking back.', 'A long night.', 'u',
   '2025-11-01T10:00:00Z', 'org-b', 'jrn-3', 'en'),
  ('s-voters', 'Voters queue in the wet', 'Long lines everywhere.',
   'The election count continues overnight.', 'u', '2026-02-15T10:00:00Z', 'org-a', 'jrn-1', 'en'),
  ('s-festival', 'Harbour festival cancelled', 'Heavy rain forecast.', 'Organisers blamed the rain.',
   'u', '2026-03-05T10:00:00Z', 'org-b', 'jrn-3', 'en'),
  ('s-es', 'Las elecciones municipales', 'Resultados de la elección en la ciudad.',
   'El café del puerto cerró durante la huelga.', 'u', '2026-03-03T10:00:00Z', 'org-b', 'jrn-3', 'es'),
  ('s-cafe', '{CAFE_TITLE}', '{CAFE_SUMMARY}', '{CAFE_BODY}', 'u', '2026-03-04T10:00:00Z',
   'org-a', 'jrn-2', 'en');",
        CAFE_TITLE = CAFE_TITLE,
        CAFE_SUMMARY = CAFE_SUMMARY,
        CAFE_BODY = CAFE_BODY,
    )
}

const CAFE_TITLE: &str = "🎉 Cafe\u{301} culture returns";
const CAFE_SUMMARY: &str = "Reopened 👩\u{200d}👩\u{200d}👧 cafés downtown.";
const CAFE_BODY: &str = "A cafe\u{301} owner said: “the CAFÉ is full”.";

async fn spawn_search() -> TestApp {
    let app = spawn_with_fixture().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(&search_fixture())
        .execute(&pipeline)
        .await
        .unwrap();
    pipeline.close().await;
    app
}

fn encode(q: &str) -> String {
    let mut out = String::new();
    for b in q.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn search(app: &TestApp, query: &str) -> Value {
    app.get_json(&format!("/search?{query}"), None).await
}

async fn found(app: &TestApp, q: &str) -> Vec<String> {
    ids(&search(app, &format!("q={}", encode(q))).await)
}

fn set(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn words_are_stemmed_in_the_language_of_each_article() {
    let app = spawn_search().await;
    let english = found(&app, "elections").await;
    // Title matches first (the newer first among them), then summary, then body.
    assert_eq!(english, ["s-results", "s-old", "s-budget", "s-voters"]);
    for q in ["elecciones", "elección", "eleccion", "ELECCIÓN"] {
        assert_eq!(found(&app, q).await, ["s-es"], "{q}");
    }
    let newest = search(&app, "q=elections&sort=newest").await;
    assert_eq!(ids(&newest), ["s-budget", "s-voters", "s-results", "s-old"]);
    assert!(
        newest["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["score"] == 0.0)
    );
    let ranked = search(&app, "q=elections").await;
    let scores: Vec<f64> = ranked["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores, [3.0, 3.0, 2.0, 1.0]);
}

#[tokio::test]
async fn accents_case_phrases_or_and_exclusions() {
    let app = spawn_search().await;
    for q in ["cafe", "CAFÉ", "cafe\u{301}", "cafés"] {
        let hits: HashSet<String> = found(&app, q).await.into_iter().collect();
        assert_eq!(hits, set(&["s-cafe", "s-es"]), "{q}");
    }
    assert_eq!(found(&app, "\"harbour strike\"").await, ["s-strike"]);
    let both: HashSet<String> = found(&app, "harbour strike").await.into_iter().collect();
    assert_eq!(both, set(&["s-strike", "s-budget"]));
    let either: HashSet<String> = found(&app, "festival OR turnout")
        .await
        .into_iter()
        .collect();
    assert_eq!(either, set(&["s-festival", "s-results"]));
    let harbour: HashSet<String> = found(&app, "harbour").await.into_iter().collect();
    assert_eq!(harbour, set(&["s-strike", "s-budget", "s-festival"]));
    let dry: HashSet<String> = found(&app, "harbour -rain").await.into_iter().collect();
    assert_eq!(dry, set(&["s-strike", "s-budget"]));
    // Exclusions only, or stop words only: nothing to look for, so nothing matches. Also where
    // PostgreSQL reads `-` as "not" after a parenthesis or before a space (`(-rain)`,
    // `- rain`), which matched every article without the word.
    for q in [
        "the of and",
        "-rain",
        "(-rain)",
        "- rain",
        "the (-rain) -\"harbour strike\"",
    ] {
        let page = search(&app, &format!("q={}", encode(q))).await;
        assert_eq!(page["data"], serde_json::json!([]), "{q}");
        assert_eq!(page["count"], 0);
        assert_eq!(page["next_cursor"], Value::Null);
        assert_eq!(page["suggestion"], Value::Null, "{q}");
    }
}

#[tokio::test]
async fn bad_queries_are_400() {
    let app = spawn_search().await;
    let too_long = "a".repeat(201);
    let longest = "é".repeat(200);
    for query in [
        "".to_owned(),
        "q=".into(),
        "q=%20%20".into(),
        format!("q={too_long}"),
        "q=harbour&offset=0".into(),
        "q=harbour&limit=0".into(),
        "q=harbour&limit=101".into(),
        "q=harbour&sort=oldest".into(),
        "q=harbour&published_after=yesterday".into(),
        "q=harbour&published_before=2026-03-01".into(),
        "q=a%00b".into(),
    ] {
        let response = app.get(&format!("/search?{query}"), None).await;
        assert_problem(response, 400, "invalid_query").await;
    }
    let ok = app
        .get(&format!("/search?q={}", encode(&longest)), None)
        .await;
    assert_eq!(ok.status(), 200);
    let padded = app
        .get(&format!("/search?q=%20{}%20", encode(&longest)), None)
        .await;
    assert_eq!(padded.status(), 200, "length counts after trimming");
}

#[tokio::test]
async fn cursors_of_other_lists_or_searches_are_refused() {
    let app = spawn_search().await;
    let list = app.get_json("/articles?limit=1", None).await;
    let list_cursor = list["next_cursor"].as_str().unwrap().to_owned();
    let page = search(&app, "q=elections&limit=1").await;
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    for query in [
        "q=elections&cursor=abc".to_owned(),
        format!("q=elections&cursor={list_cursor}"),
        format!("q=election&cursor={cursor}"),
        format!("q=elections&sort=newest&cursor={cursor}"),
        format!("q=elections&organization_id=org-a&cursor={cursor}"),
    ] {
        let response = app.get(&format!("/search?{query}"), None).await;
        assert_problem(response, 400, "invalid_cursor").await;
    }
    // A search cursor is not an article-list cursor either.
    let response = app.get(&format!("/articles?cursor={cursor}"), None).await;
    assert_problem(response, 400, "invalid_cursor").await;
    // Offset and cursor together: offset is refused first.
    let response = app
        .get(
            &format!("/search?q=elections&offset=0&cursor={cursor}"),
            None,
        )
        .await;
    assert_problem(response, 400, "invalid_query").await;
    // The same q (with other spacing) and the cursor's own filters continue the search.
    let next = search(
        &app,
        &format!("q=%20elections&sort=relevance&limit=1&cursor={cursor}"),
    )
    .await;
    assert_eq!(ids(&next), ["s-old"]);
}

/// The cursor keeps `q` as it keeps the filters and the sort (docs/news.md, "Paging"): a next page asked
/// with the cursor alone continues the search (as `/v1/lingo/phrases?cursor=` continues a
/// phrase search), while `q` stays required without a cursor and is checked when given.
#[tokio::test]
async fn a_cursor_alone_continues_its_search() {
    let app = spawn_search().await;
    let first = search(
        &app,
        "q=elections&organization_id=org-b&sort=newest&limit=1",
    )
    .await;
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let with_q = search(
        &app,
        &format!("q=elections&organization_id=org-b&sort=newest&limit=1&cursor={cursor}"),
    )
    .await;
    let alone = search(&app, &format!("limit=1&cursor={cursor}")).await;
    assert_eq!(alone, with_q);
    assert!(!ids(&alone).is_empty() && ids(&alone) != ids(&first));
    for query in [format!("q=&cursor={cursor}"), "cursor=".to_owned()] {
        let response = app.get(&format!("/search?{query}"), None).await;
        assert_problem(response, 400, "invalid_query").await;
    }
}

#[tokio::test]
async fn filters_and_date_bounds() {
    let app = spawn_search().await;
    let q = |extra: &str| format!("q=harbour&sort=newest&{extra}");
    let cases: [(&str, &[&str]); 6] = [
        ("organization_id=org-b", &["s-festival", "s-budget"]),
        ("journalist_id=jrn-1", &["s-strike"]),
        ("organization_id=nobody", &[]),
        // Inclusive lower bound, exclusive upper bound.
        (
            "published_after=2026-03-02T10:00:00Z",
            &["s-festival", "s-budget"],
        ),
        ("published_before=2026-03-02T10:00:00Z", &["s-strike"]),
        (
            "published_after=2026-03-02T11:00:00%2B01:00&published_before=2026-03-05T10:00:00Z",
            &["s-budget"],
        ),
    ];
    for (extra, expected) in cases {
        assert_eq!(ids(&search(&app, &q(extra)).await), expected, "{extra}");
    }
}

/// Ids whose byte order is not their order in the `en-US` collation (case, `-`, `_`, `.`).
const TIED_IDS: [&str; 8] = [
    "tie-a", "tie-B", "tie_c", "tie-D", "tiee", "TIE-f", "Tie-h", "tie.i",
];

/// On a database whose collation is not `C` (the official PostgreSQL images default to
/// `en_US.utf8`), a walk by cursor still serves every match once, in the article list's order:
/// newest first, then ids descending as the database compares them (docs/news.md, "Order").
/// Sorting the page's rows again by bytes, after PostgreSQL picked and cut them in its
/// collation's order, skipped some tied articles and repeated others.
#[tokio::test]
async fn tied_articles_are_walked_once_in_any_collation() {
    let db = TestDatabase::create_with_icu_collation("en-US").await;
    let app = spawn_app_in(db).await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(&format!(
        "INSERT INTO organizations (id, name, url) VALUES ('org-a', 'Alpha', 'u');
         INSERT INTO journalists (id, name, organization_id) VALUES ('jrn-1', 'Ann', 'org-a');
         INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id)
         SELECT id, 'Harbour news', 'Summary', 'Body', 'u', '2026-03-01T10:00:00Z', 'org-a',
                'jrn-1'
           FROM unnest(ARRAY['{}']) AS id;",
        TIED_IDS.join("','")
    ))
    .execute(&pipeline)
    .await
    .unwrap();
    let list = app.get_json("/articles?limit=100", None).await;
    let expected = ids(&list);
    let mut by_bytes = TIED_IDS.map(str::to_owned).to_vec();
    by_bytes.sort_by(|a, b| b.cmp(a));
    assert_eq!(expected.len(), TIED_IDS.len());
    assert_ne!(
        expected, by_bytes,
        "the collation orders the ids otherwise than bytes"
    );
    for sort in ["newest", "relevance"] {
        for limit in 1..=3 {
            let query = format!("q=harbour&sort={sort}&limit={limit}");
            let (walked, _, _) = all_pages(&app, &query).await;
            assert_eq!(walked, expected, "{query}");
        }
    }
}

/// RFC 3339 allows any fraction of a second, PostgreSQL keeps microseconds: a finer bound keeps
/// its meaning (compared with the exact instant, inclusive after, exclusive before), and the
/// same bounds repeated with the cursor continue the search (docs/news.md, "Paging").
#[tokio::test]
async fn date_bounds_finer_than_a_microsecond() {
    let app = spawn_search().await;
    let q = |extra: &str| format!("q=harbour&sort=newest&{extra}");
    // s-budget is published at 10:00:00 exactly: 100 ns before these bounds.
    let just_after = "2026-03-02T10:00:00.0000001Z";
    let after = search(&app, &q(&format!("published_after={just_after}"))).await;
    assert_eq!(ids(&after), ["s-festival"]);
    let before = search(&app, &q(&format!("published_before={just_after}"))).await;
    assert_eq!(ids(&before), ["s-budget", "s-strike"]);
    // Past the ninth digit too (chrono reads nanoseconds and drops the rest): 0.1 ns after
    // s-budget is still after it.
    let a_tenth_of_a_nanosecond_after = "2026-03-02T10:00:00.0000000001Z";
    let after = search(
        &app,
        &q(&format!("published_after={a_tenth_of_a_nanosecond_after}")),
    )
    .await;
    assert_eq!(ids(&after), ["s-festival"]);
    let before = search(
        &app,
        &q(&format!("published_before={a_tenth_of_a_nanosecond_after}")),
    )
    .await;
    assert_eq!(ids(&before), ["s-budget", "s-strike"]);
    // s-strike (03-01 10:00) lies before the lower bound, s-festival (03-05 10:00) before the
    // upper one.
    let bounds = q("limit=1&published_after=2026-03-01T10:00:00.000000001Z\
                    &published_before=2026-03-05T10:00:00.000000001Z");
    let mut walked = Vec::new();
    let mut page = search(&app, &bounds).await;
    loop {
        walked.extend(ids(&page));
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        page = search(&app, &format!("{bounds}&cursor={cursor}")).await;
    }
    assert_eq!(walked, ["s-festival", "s-budget"]);
}

fn highlight<'a>(hit: &'a Value, field: &str) -> &'a Value {
    hit["highlights"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["field"] == field)
        .unwrap_or_else(|| panic!("no {field} highlight in {hit}"))
}

/// The marked pieces of a highlight's text, cut by code point.
fn marked(highlight: &Value) -> Vec<String> {
    let chars: Vec<char> = highlight["text"].as_str().unwrap().chars().collect();
    highlight["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let (s, e) = (
                m[0].as_u64().unwrap() as usize,
                m[1].as_u64().unwrap() as usize,
            );
            chars[s..e].iter().collect()
        })
        .collect()
}

#[tokio::test]
async fn highlights_mark_the_matched_words_in_code_points() {
    let app = spawn_search().await;
    let page = search(&app, "q=cafe").await;
    let hit = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "s-cafe")
        .unwrap();
    let title = highlight(hit, "title");
    assert_eq!(title["text"], CAFE_TITLE);
    // 🎉 is one code point (two UTF-16 units); the accent is a code point of its own.
    assert_eq!(title["marks"], serde_json::json!([[2, 7]]));
    assert_eq!(marked(title), ["Cafe\u{301}"]);
    let summary = highlight(hit, "summary");
    assert_eq!(summary["text"], CAFE_SUMMARY);
    assert_eq!(summary["marks"], serde_json::json!([[15, 20]]));
    assert_eq!(marked(summary), ["cafés"]);
    let body = highlight(hit, "body");
    assert_eq!(body["text"], CAFE_BODY);
    assert_eq!(body["marks"], serde_json::json!([[2, 7], [25, 29]]));
    assert_eq!(marked(body), ["cafe\u{301}", "CAFÉ"]);
    let fields: Vec<&Value> = hit["highlights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["field"])
        .collect();
    assert_eq!(fields, ["title", "summary", "body"]);

    // Stemmed and folded matches are marked as written; unmatched fields have no highlight.
    let page = search(&app, "q=elecciones").await;
    let hit = &page["data"][0];
    assert_eq!(marked(highlight(hit, "title")), ["elecciones"]);
    assert_eq!(marked(highlight(hit, "summary")), ["elección"]);
    assert_eq!(hit["highlights"].as_array().unwrap().len(), 2);
    // A phrase marks its words.
    let page = search(&app, &format!("q={}", encode("\"harbour strike\""))).await;
    assert_eq!(
        marked(highlight(&page["data"][0], "title")),
        ["Harbour", "strike"]
    );
}

#[tokio::test]
async fn long_bodies_give_a_short_fragment_around_the_match() {
    let app = spawn_search().await;
    let body = format!(
        "{}The lighthouse 🎉 keeper spoke. {}",
        "Filler words about nothing in particular, é\u{301}. ".repeat(30),
        "More filler text follows here. ".repeat(30)
    );
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, \
         journalist_id) VALUES ('s-long', 'Coast news', 'Nothing here.', $1, 'u', now(), 'org-a', 'jrn-1')",
    )
    .bind(&body)
    .execute(&pipeline)
    .await
    .unwrap();
    let page = search(&app, "q=lighthouse").await;
    let hit = &page["data"][0];
    assert_eq!(hit["highlights"].as_array().unwrap().len(), 1);
    let fragment = highlight(hit, "body");
    let text = fragment["text"].as_str().unwrap();
    assert!(text.chars().count() <= 200, "{text}");
    assert!(
        body.contains(text),
        "a fragment is a piece of the body: {text}"
    );
    assert_eq!(marked(fragment), ["lighthouse"]);
}

/// Fields the service's model of the configurations does not cover (a URL and a decimal number,
/// another language) are highlighted by `ts_headline`, with the same marks.
#[tokio::test]
async fn fields_the_model_leaves_out_are_highlighted_by_postgresql() {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, \
                               journalist_id, language) VALUES
  ('s-url', 'Lighthouses reopen', 'See lighthouse.example.com for 3.5 more lighthouses.',
   'No match here.', 'u', now(), 'org-a', 'jrn-1', 'en'),
  ('s-de', 'Leuchttürme öffnen', 'Der Leuchtturm ist offen.', 'Nichts.', 'u', now(), 'org-a', 'jrn-1', 'de');",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let page = search(&app, "q=lighthouse").await;
    let hit = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "s-url")
        .unwrap();
    assert_eq!(marked(highlight(hit, "title")), ["Lighthouses"]);
    // The host is one token (`lighthouse.example.com`), so only the last word is marked.
    assert_eq!(marked(highlight(hit, "summary")), ["lighthouses"]);
    let page = search(&app, "q=leuchtturm").await;
    let hit = &page["data"][0];
    assert_eq!(hit["id"], "s-de");
    assert_eq!(marked(highlight(hit, "title")), ["Leuchttürme"]);
    assert_eq!(marked(highlight(hit, "summary")), ["Leuchtturm"]);
}

/// Articles whose words have capitals beyond ASCII: a Russian one, Greek words in an English
/// one, a Greek one, and an English one in ASCII only.
const CAPITALS: &str = "INSERT INTO articles (id, title, summary, body, url, published_at, \
                                              organization_id, journalist_id, language) VALUES
  ('c-ru', 'МОСКВА ГОТОВИТСЯ К ВЫБОРАМ', 'Москва и выборы', 'Выборы пройдут в декабре.', 'u',
   '2026-03-01T10:00:00Z', 'org-a', 'jrn-1', 'ru'),
  ('c-en', 'Athens: ΟΔΟΣ ΣΤΑΔΙΟΥ closed', 'Roadworks downtown.', 'Reopens on Monday.', 'u',
   '2026-03-02T10:00:00Z', 'org-a', 'jrn-1', 'en'),
  ('c-el', 'Κλειστός ο δρόμος', 'Η οδός είναι κλειστή.', 'Έργα.', 'u',
   '2026-03-03T10:00:00Z', 'org-a', 'jrn-1', 'el'),
  ('c-ascii', 'Harbour strike ends', 'Dock workers return.', 'The union agreed.', 'u',
   '2026-03-04T10:00:00Z', 'org-a', 'jrn-1', 'en'),
  ('c-quotes', 'Ferry queues at the harbour', 'He said—quietly—that “the quay is full”.',
   'L’eau monte à «Marseille»\u{A0}!', 'u', '2026-03-05T10:00:00Z', 'org-a', 'jrn-1', 'en');";

/// Case is ignored in every script, as for Latin letters: a Russian article's "МОСКВА" and
/// "Москва" are `москва`, the Greek words of an English article are found in lower case and
/// with a final sigma typed either way, and the highlights mark the words as written.
#[tokio::test]
async fn case_is_ignored_in_every_script() {
    let app = spawn_with_fixture().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(CAPITALS).execute(&pipeline).await.unwrap();
    for q in ["москва", "МОСКВА", "Москва", "выборы", "ВЫБОРЫ"] {
        assert_eq!(found(&app, q).await, ["c-ru"], "{q}");
    }
    for q in ["οδος", "οδοσ", "ΟΔΟΣ", "οδός", "σταδιου"] {
        let hits: HashSet<String> = found(&app, q).await.into_iter().collect();
        let expected: &[&str] = if q == "σταδιου" {
            &["c-en"]
        } else {
            &["c-en", "c-el"]
        };
        assert_eq!(hits, set(expected), "{q}");
    }
    let page = search(&app, &format!("q={}", encode("москва"))).await;
    let hit = &page["data"][0];
    assert_eq!(marked(highlight(hit, "title")), ["МОСКВА"]);
    assert_eq!(
        highlight(hit, "title")["text"],
        "МОСКВА ГОТОВИТСЯ К ВЫБОРАМ"
    );
    assert_eq!(marked(highlight(hit, "summary")), ["Москва"]);
    let page = search(&app, &format!("q={}", encode("οδοσ σταδιου"))).await;
    let hit = &page["data"][0];
    assert_eq!(hit["id"], "c-en");
    assert_eq!(marked(highlight(hit, "title")), ["ΟΔΟΣ", "ΣΤΑΔΙΟΥ"]);
}

/// A word ends at any punctuation or white space, not only ASCII's: curly quotes, dashes,
/// guillemets, a curly apostrophe and a no-break space (to PostgreSQL's parser in the `C` locale
/// they were letters, so "“the quay is full”" held the word `full"`), and a `q` typed with them
/// is read the same way. The highlights mark the words as written.
#[tokio::test]
async fn punctuation_beyond_ascii_ends_a_word() {
    let app = spawn_with_fixture().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(CAPITALS).execute(&pipeline).await.unwrap();
    for q in [
        "full",
        "quietly",
        "quay",
        "eau",
        "marseille",
        "“full”",
        "l’eau",
        "«quietly»",
        "said—quietly",
    ] {
        assert_eq!(found(&app, q).await, ["c-quotes"], "{q}");
    }
    let page = search(&app, &format!("q={}", encode("quietly full"))).await;
    let hit = &page["data"][0];
    assert_eq!(marked(highlight(hit, "summary")), ["quietly", "full"]);
    assert_eq!(
        highlight(hit, "summary")["text"],
        "He said—quietly—that “the quay is full”."
    );
    let page = search(&app, &format!("q={}", encode("marseille"))).await;
    assert_eq!(marked(highlight(&page["data"][0], "body")), ["Marseille"]);
    // The word list that suggestions respell from holds the words, not the punctuation.
    let listed = "SELECT count(*) FROM search_words WHERE word IN ('full', 'quietly', 'москва')";
    assert_eq!(app.count(listed).await, 3);
    let joined = "SELECT count(*) FROM search_words WHERE word ~ '[“”—«»’]'";
    assert_eq!(app.count(joined).await, 0);
}

/// Migration `search_fold` with its backfill, over vectors computed before it: the
/// articles with capitals or punctuation beyond ASCII are found in lower case and by the words
/// next to the punctuation afterwards, their vectors and
/// lexeme counts are what the triggers give, and an article in ASCII only is not written.
#[tokio::test]
async fn the_fold_migration_recomputes_the_vectors_it_changes() {
    let (db, owner, pipeline) = database_before_migration(20261130200001).await;
    sqlx::raw_sql(CAPITALS).execute(&pipeline).await.unwrap();
    let admin = pool_as(&db, "admin").await;
    let moscow = "SELECT count(*) FROM news.articles WHERE search_vector @@ 'москв'::tsquery";
    let found_before: i64 = sqlx::query_scalar(moscow).fetch_one(&admin).await.unwrap();
    assert_eq!(found_before, 0, "capitals kept the old way");
    let version_of_ascii = "SELECT xmin::text FROM news.articles WHERE id = 'c-ascii'";
    let before: String = sqlx::query_scalar(version_of_ascii)
        .fetch_one(&admin)
        .await
        .unwrap();
    MIGRATOR.run(&owner).await.unwrap();
    let after: String = sqlx::query_scalar(version_of_ascii)
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(
        after, before,
        "an article the lowering leaves alone is not written"
    );
    let found_after: i64 = sqlx::query_scalar(moscow).fetch_one(&admin).await.unwrap();
    assert_eq!(found_after, 1);
    let stale: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM news.articles WHERE search_vector IS DISTINCT FROM \
         news.article_search_vector(language, title, summary, body)",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(stale, 0);
    let miscounted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT a.language, l.lexeme, count(*) AS n \
                                 FROM news.articles a, \
                                      unnest(tsvector_to_array(a.search_vector)) AS l (lexeme) \
                                GROUP BY 1, 2) c \
           FULL JOIN (SELECT * FROM news.search_lexemes WHERE lexeme <> '' AND articles <> 0) s \
             ON s.language = c.language AND s.lexeme = c.lexeme \
          WHERE s.articles IS DISTINCT FROM c.n",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(miscounted, 0, "the lexeme counts follow the vectors");
    let app = start(db, None).await;
    assert_eq!(found(&app, "москва").await, ["c-ru"]);
    assert_eq!(found(&app, "οδοσ").await.len(), 2);
    assert_eq!(found(&app, "strike").await, ["c-ascii"]);
    assert_eq!(found(&app, "full").await, ["c-quotes"]);
}

#[tokio::test]
async fn a_misspelt_query_gets_a_suggestion() {
    let app = spawn_search().await;
    let page = search(&app, "q=electon").await;
    assert_eq!(page["data"], serde_json::json!([]));
    assert_eq!(page["suggestion"], "election");
    let page = search(&app, &format!("q={}", encode("harbur strke -rain"))).await;
    assert_eq!(page["suggestion"], "harbour strike -rain");
    // The suggestion finds what the misspelling did not.
    assert_eq!(found(&app, "harbour strike -rain").await.len(), 2);
    // Matches, or nothing close: no suggestion.
    assert_eq!(search(&app, "q=harbour").await["suggestion"], Value::Null);
    assert_eq!(search(&app, "q=zzzzqqq").await["suggestion"], Value::Null);
    // An exclusion is not respelt: the query would still find nothing.
    assert_eq!(search(&app, "q=strke").await["suggestion"], "strike");
    assert_eq!(search(&app, "q=-strke").await["suggestion"], Value::Null);
    // Nor respelt into a stop word, which matches nothing either (`the` is among the
    // articles' words, and the closest to `thw`).
    assert_eq!(search(&app, "q=thw").await["suggestion"], Value::Null);
}

#[tokio::test]
async fn viewer_and_caching_as_the_article_list() {
    let app = spawn_search().await;
    let anonymous = app.get("/search?q=harbour", None).await;
    assert_eq!(anonymous.headers()["cache-control"], "public, max-age=30");
    let etag = anonymous.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = anonymous.json().await.unwrap();
    assert!(
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["viewer"].is_null())
    );
    let again = app
        .client
        .get(app.url("/search?q=harbour"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);

    assert_eq!(
        app.post("/articles/s-strike/like", "reader").await.status(),
        200
    );
    let signed_in = app.get("/search?q=harbour", Some("reader")).await;
    assert_eq!(signed_in.headers()["cache-control"], "private, no-store");
    assert!(signed_in.headers().get("etag").is_none());
    let body: Value = signed_in.json().await.unwrap();
    let hit = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "s-strike")
        .unwrap();
    assert_eq!(hit["viewer"]["liked"], true);
    assert_eq!(hit["like_count"], 1);
    assert_eq!(hit["organization"]["name"], "Alpha News");
}

#[tokio::test]
async fn the_vector_follows_every_writer() {
    let app = spawn_search().await;
    let admin = app.admin().await;
    sqlx::query(
        "UPDATE articles SET title = 'Lighthouse keeper retires', search_vector = NULL \
         WHERE id = 's-strike'",
    )
    .execute(&admin)
    .await
    .unwrap();
    assert_eq!(found(&app, "lighthouse").await, ["s-strike"]);
    assert!(found(&app, "twelve").await.is_empty());
    // A language change re-stems the article.
    sqlx::query("UPDATE articles SET language = 'es' WHERE id = 's-results'")
        .execute(&admin)
        .await
        .unwrap();
    assert!(
        !found(&app, "elections")
            .await
            .contains(&"s-results".to_owned())
    );
    let refused = sqlx::query("UPDATE articles SET language = 'english' WHERE id = 's-old'")
        .execute(&admin)
        .await;
    assert!(refused.is_err(), "language is an ISO 639-1 code");
    // A vector written with the texts unchanged is recomputed all the same; an update that
    // leaves texts and vector alone keeps the vector (migration search_vector_inline).
    for update in [
        "UPDATE articles SET search_vector = to_tsvector('simple', 'bogus') WHERE id = 's-strike'",
        "UPDATE articles SET url = 'https://example.com/strike' WHERE id = 's-strike'",
        "UPDATE articles SET search_vector = search_vector || ''::tsvector WHERE id = 's-strike'",
    ] {
        sqlx::query(update).execute(&admin).await.unwrap();
        assert_eq!(found(&app, "lighthouse").await, ["s-strike"], "{update}");
        assert!(found(&app, "bogus").await.is_empty(), "{update}");
    }
    assert_eq!(
        app.count(
            "SELECT count(*) FROM articles WHERE search_vector IS DISTINCT FROM \
             article_search_vector(language, title, summary, body)"
        )
        .await,
        0
    );
    // The word list learns the words of changed texts.
    assert_eq!(
        app.count("SELECT count(*) FROM search_words WHERE word IN ('lighthouse', 'keeper')")
            .await,
        2
    );
}

/// Inserts `n` articles `t-001`... whose bodies are 120 words of hex digits (barely
/// compressible): each row is over 2 kB, and its vector alone too, the value the default
/// storage moves out of line first.
async fn insert_wide(pool: &PgPool, n: i32) {
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
         SELECT 't-' || lpad(i::text, 3, '0'), 'Wide ' || i, 'About it',
                (SELECT string_agg(md5(i || '-' || w), ' ') FROM generate_series(1, 120) AS w),
                'u', timestamptz '2026-06-01' - i * interval '1 hour', 'org-a', 'jrn-1'
           FROM generate_series(1, $1) AS i",
    )
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
}

/// Bytes in the articles' TOAST table (live rows), and the articles' vectors' and bodies' bytes.
async fn toast_vector_body_bytes(admin: &PgPool) -> (i64, i64, i64) {
    let toast: String = sqlx::query_scalar(
        "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'news.articles'::regclass",
    )
    .fetch_one(admin)
    .await
    .unwrap();
    let toast_bytes: i64 = sqlx::query_scalar(&format!(
        "SELECT coalesce(sum(octet_length(chunk_data)), 0)::bigint FROM {toast}"
    ))
    .fetch_one(admin)
    .await
    .unwrap();
    let (vector_bytes, body_bytes): (i64, i64) = sqlx::query_as(
        "SELECT sum(pg_column_size(search_vector))::bigint, sum(pg_column_size(body))::bigint \
           FROM news.articles",
    )
    .fetch_one(admin)
    .await
    .unwrap();
    (toast_bytes, vector_bytes, body_bytes)
}

#[tokio::test]
async fn vectors_are_kept_in_the_rows_of_old_and_new_articles() {
    let (db, owner, pipeline) = database_before_migration(20261128300001).await;
    insert_wide(&pipeline, 20).await;
    let admin = pool_as(&db, "admin").await;
    let (toast, vectors, _) = toast_vector_body_bytes(&admin).await;
    assert!(
        toast >= vectors,
        "the old storage moves the vectors out: {toast} < {vectors}"
    );
    MIGRATOR.run(&owner).await.unwrap();
    let storage: String = sqlx::query_scalar(
        "SELECT attstorage::text FROM pg_attribute \
          WHERE attrelid = 'news.articles'::regclass AND attname = 'search_vector'",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(storage, "m");
    let (toast, _, bodies) = toast_vector_body_bytes(&admin).await;
    assert!(
        toast <= bodies,
        "only the bodies are out of line: {toast} > {bodies}"
    );
    // New rows too, and the vectors are the reference function's.
    sqlx::query("DELETE FROM articles")
        .execute(&admin)
        .await
        .unwrap();
    insert_wide(&pipeline, 20).await;
    let (toast, _, bodies) = toast_vector_body_bytes(&admin).await;
    assert!(toast <= bodies, "{toast} > {bodies}");
    let wrong: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM news.articles WHERE search_vector IS DISTINCT FROM \
         news.article_search_vector(language, title, summary, body)",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(wrong, 0);
}

/// Inserts `n` articles `p-00001`... whose word `beacon` is in the title, summary or body by
/// turns, many sharing a `published_at`.
async fn insert_many(pool: &PgPool, n: i32) {
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
         SELECT 'p-' || lpad(i::text, 5, '0'),
                CASE WHEN i % 3 = 0 THEN 'The beacon ' || i ELSE 'Story ' || i END,
                CASE WHEN i % 3 = 1 THEN 'About the beacon' ELSE 'About it' END,
                CASE WHEN i % 3 = 2 THEN 'The beacon shone.' ELSE 'Nothing else.' END,
                'u', timestamptz '2026-06-01' - (i / 4) * interval '1 hour', 'org-a', 'jrn-1'
           FROM generate_series(1, $1) AS i",
    )
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
}

/// Every page of a search by cursor, with the scores of its hits.
async fn all_pages(app: &TestApp, query: &str) -> (Vec<String>, Vec<f64>, usize) {
    let (mut seen, mut scores, mut pages) = (Vec::new(), Vec::new(), 0);
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("{query}&cursor={c}"),
            None => query.to_owned(),
        };
        let page = search(app, &path).await;
        pages += 1;
        seen.extend(ids(&page));
        scores.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["score"].as_f64().unwrap()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (seen, scores, pages),
        }
    }
}

#[tokio::test]
async fn cursor_pages_neither_repeat_nor_skip() {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    insert_many(&pipeline, 40).await;
    for sort in ["relevance", "newest"] {
        let whole = ids(&search(&app, &format!("q=beacon&sort={sort}&limit=100")).await);
        assert_eq!(whole.len(), 40);
        let (paged, _, pages) = all_pages(&app, &format!("q=beacon&sort={sort}&limit=6")).await;
        assert_eq!(paged, whole, "{sort}");
        assert_eq!(pages, 7);
    }
}

#[tokio::test]
async fn relevance_ranks_a_bounded_window_then_lists_older_matches() {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    let n = RANKED_MATCHES as i32 + 50;
    insert_many(&pipeline, n).await;
    let (paged, scores, _) = all_pages(&app, "q=beacon&limit=100").await;
    let unique: HashSet<&String> = paged.iter().collect();
    assert_eq!(unique.len(), paged.len(), "no article twice");
    assert_eq!(
        paged.len(),
        n as usize,
        "every match, the window and after it"
    );
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "scores never rise");
    let ranked = scores.iter().filter(|s| **s > 0.0).count();
    assert_eq!(ranked, RANKED_MATCHES as usize);
    // The window holds the newest matches: the unranked tail is the oldest ones, newest first.
    // (insert_many's rows in list order: hour i / 4 ascending, then id descending.)
    let mut newest_first: Vec<(i32, String)> =
        (1..=n).map(|i| (i / 4, format!("p-{i:05}"))).collect();
    newest_first.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let expected: Vec<String> = newest_first
        .into_iter()
        .skip(RANKED_MATCHES as usize)
        .map(|(_, id)| id)
        .collect();
    assert_eq!(paged[ranked..], expected[..]);
}

/// The search fixture plus 20,000 articles, `common` in every other one and `lighthouse` in one
/// (`x-777`), analysed as autovacuum leaves them (statistics, the GIN index's pending list
/// merged): the planner then sees a frequent and a rare word.
async fn spawn_with_common_and_lighthouse() -> TestApp {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
         SELECT 'x-' || i, 'Story ' || i || CASE WHEN i % 2 = 0 THEN ' common' ELSE '' END,
                'Summary ' || (i % 97), 'Body about topic ' || (i % 1013)
                || CASE WHEN i = 777 THEN ' lighthouse' ELSE '' END,
                'u', timestamptz '2026-01-01' - i * interval '1 minute', 'org-a', 'jrn-1'
           FROM generate_series(1, 20000) AS i",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE articles")
        .execute(&app.admin().await)
        .await
        .unwrap();
    app
}

/// The plan of a statement, as text.
async fn plan(pool: &PgPool, mut qb: sqlx::QueryBuilder<'static, sqlx::Postgres>) -> String {
    let rows = qb.build().persistent(false).fetch_all(pool).await.unwrap();
    rows.iter()
        .map(|r| r.get::<String, _>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn selective_and_frequent_words_use_an_index() {
    let app = spawn_with_common_and_lighthouse().await;
    let runtime = pool_as(&app.db, "news_app").await;
    // A Spanish article holding `lighthouse` too: both languages are asked.
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id, language)
         VALUES ('x-faro', 'El faro', 'Resumen', 'Un lighthouse', 'u', '2026-01-02', 'org-a',
                 'jrn-1', 'es')",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let filters = Filters::default();
    // Where a later relevance page starts: its window's end, and the last row served.
    let end_at = chrono::DateTime::parse_from_rfc3339("2025-12-31T00:00:00Z")
        .unwrap()
        .to_utc();
    let later = (
        (end_at, "x-1440".to_owned()),
        Position {
            score: 3,
            published_at: end_at,
            id: "x-1440".to_owned(),
        },
    );
    for word in ["lighthouse", "common"] {
        let languages = language_queries(&runtime, word).await.unwrap();
        assert!(!languages.is_empty());
        // The test server (PostgreSQL 15, UTF-8, LC_CTYPE C) is the one the highlights model
        // copies: the service marks highlights itself here, not through ts_headline.
        assert!(languages.iter().all(|l| l.modelled_server), "{languages:?}");
        // The service's choice: the GIN index for the rare word, the newest-first walk for
        // the word in every other article, for a page as for the ranked window.
        let page = access(&languages, 21, WALK_EXAMINES);
        let window = access(&languages, RANKED_MATCHES, WALK_EXAMINES);
        let expected = if word == "lighthouse" {
            Access::Index
        } else {
            Access::Walk(WALK_EXAMINES)
        };
        assert_eq!((page, window), (expected, expected), "{word}");
        let plans = [
            plan(
                &runtime,
                window_query("EXPLAIN ", &languages, &filters, None, window),
            )
            .await,
            // The statements a sort=relevance page runs: page 1, and a later page.
            plan(
                &runtime,
                ranked_hits_query(
                    "EXPLAIN ",
                    &languages,
                    &filters,
                    RankedPage {
                        window_end: None,
                        after: None,
                        wanted: 21,
                    },
                    None,
                    window,
                ),
            )
            .await,
            plan(
                &runtime,
                ranked_hits_query(
                    "EXPLAIN ",
                    &languages,
                    &filters,
                    RankedPage {
                        window_end: Some(&later.0),
                        after: Some(&later.1),
                        wanted: 21,
                    },
                    Some("usr-1"),
                    window,
                ),
            )
            .await,
            // The statement a sort=newest page runs: the same rows with their items.
            plan(
                &runtime,
                newest_hits_query("EXPLAIN ", &languages, &filters, None, 21, None, page),
            )
            .await,
        ];
        for plan in plans {
            assert!(!plan.contains("Seq Scan"), "{word}:\n{plan}");
            if word == "lighthouse" {
                assert!(plan.contains("articles_search_idx"), "{word}:\n{plan}");
                // Both languages read `lighthouse` alike: one test, one scan of the index.
                assert_eq!(languages.len(), 2);
                assert_eq!(languages[0].query, languages[1].query);
                assert!(!plan.contains("BitmapOr"), "{word}:\n{plan}");
            } else {
                assert!(plan.contains("articles_published_idx"), "{word}:\n{plan}");
            }
        }
    }
    // Where a walk stopped: the newest-first index, not a sort of every article.
    let plan = plan(
        &runtime,
        walk_end_query("EXPLAIN ", &filters, Some(&later.0), 100, Some(&later.0)),
    )
    .await;
    assert!(plan.contains("articles_published_idx"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

/// The plan PostgreSQL makes of a statement without the values bound to it (a generic plan,
/// which PostgreSQL may switch a statement kept prepared to after five runs): the statement is
/// prepared with SQL and explained with NULL for every value on a connection that plans
/// generically, so no value reaches the plan.
async fn generic_plan(pool: &PgPool, qb: sqlx::QueryBuilder<'static, sqlx::Postgres>) -> String {
    // A connection of its own (closed after), so neither setting nor statement is left behind.
    let mut conn = pool.acquire().await.unwrap().detach();
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::raw_sql(&format!("PREPARE kept AS {}", qb.sql()))
        .execute(&mut conn)
        .await
        .unwrap();
    let params: i32 = sqlx::query_scalar(
        "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'kept'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let nulls = vec!["NULL"; params as usize].join(", ");
    let rows = sqlx::query(&format!("EXPLAIN EXECUTE kept({nulls})"))
        .persistent(false)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    rows.iter()
        .map(|r| r.get::<String, _>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many times PostgreSQL planned a statement kept prepared on a connection, with its
/// values and without them (`pg_prepared_statements`).
async fn plans_of(conn: &mut sqlx::PgConnection, like: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT custom_plans, generic_plans FROM pg_prepared_statements WHERE statement LIKE $1",
    )
    .bind(like)
    .fetch_one(conn)
    .await
    .unwrap()
}

/// A walk's statement is kept prepared (docs/news.md): its plan without the values is the walk
/// of the newest-first index as with them, for a page, a later page, a date range and the
/// ranked window.
#[tokio::test]
async fn a_walk_kept_prepared_walks_without_its_values() {
    let app = spawn_with_common_and_lighthouse().await;
    let runtime = pool_as(&app.db, "news_app").await;
    let languages = language_queries(&runtime, "common").await.unwrap();
    let page = access(&languages, 21, WALK_EXAMINES);
    let window = access(&languages, RANKED_MATCHES, WALK_EXAMINES);
    assert_eq!(
        (page, window),
        (Access::Walk(WALK_EXAMINES), Access::Walk(WALK_EXAMINES))
    );
    let at = chrono::DateTime::parse_from_rfc3339("2025-12-31T00:00:00Z")
        .unwrap()
        .to_utc();
    let before = (at, "x-1440".to_owned());
    let dated = Filters {
        published_after: Some(at - chrono::Duration::days(3)),
        published_before: Some(at),
        ..Filters::default()
    };
    let none = Filters::default();
    let plans = [
        generic_plan(
            &runtime,
            newest_hits_query("", &languages, &none, None, 21, None, page),
        )
        .await,
        generic_plan(
            &runtime,
            newest_hits_query(
                "",
                &languages,
                &none,
                Some(&before),
                21,
                Some("usr-1"),
                page,
            ),
        )
        .await,
        generic_plan(
            &runtime,
            newest_hits_query("", &languages, &dated, None, 21, None, page),
        )
        .await,
        generic_plan(
            &runtime,
            ranked_hits_query(
                "",
                &languages,
                &none,
                RankedPage {
                    window_end: None,
                    after: None,
                    wanted: 21,
                },
                None,
                window,
            ),
        )
        .await,
    ];
    for plan in plans {
        assert!(plan.contains("articles_published_idx"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
        assert!(!plan.contains("articles_search_idx"), "{plan}");
    }
    // Run as the service runs them, PostgreSQL keeps the plan made without the values after
    // five runs with them: the page statement, and the statement reading the counts.
    let one = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(runtime.connect_options().as_ref().clone())
        .await
        .unwrap();
    let parses = QueryParses::default();
    let spec = SearchSpec {
        q: "common".to_owned(),
        sort: Sort::Newest,
        filters: Filters::default(),
        after: None,
        window_end: None,
    };
    for _ in 0..8 {
        let page = page_examining(&one, &parses, &spec, 20, None, WALK_EXAMINES)
            .await
            .unwrap();
        assert_eq!(page.count, 20);
    }
    let mut conn = one.acquire().await.unwrap();
    let walk = plans_of(&mut conn, "%LIMIT 50000) a WHERE%").await;
    let counts = plans_of(&mut conn, "%unnest((SELECT $1::text[]))%").await;
    assert_eq!((walk, counts), ((5, 3), (5, 2)));
}

/// 20,000 articles, 6,000 of them Spanish with `carrera` (whose Spanish stem is `carrer`), the
/// others English, 5 of which (`c-5`, `c-4005`, ...) hold the word `carrer`, analysed: the
/// column's statistics, over both languages, then hold `carrer` as a lexeme of 30% of the
/// articles.
async fn spawn_with_a_spanish_stem() -> TestApp {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id, language)
         SELECT 'c-' || i, 'Story ' || i, 'Summary ' || (i % 97),
                CASE WHEN i % 10 < 3 THEN 'La carrera del día '
                     WHEN i % 4000 = 5 THEN 'A day at the carrer office '
                     ELSE 'A day at the office ' END
                || (i % 1013),
                'u', timestamptz '2026-01-01' - i * interval '1 minute', 'org-a', 'jrn-1',
                CASE WHEN i % 10 < 3 THEN 'es' ELSE 'en' END
           FROM generate_series(1, 20000) AS i",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    sqlx::query("VACUUM ANALYZE articles")
        .execute(&app.admin().await)
        .await
        .unwrap();
    app
}

/// `carrer` is in 5 English articles: the English query is `carrer`, and the Spanish one
/// `carr`, which no Spanish article holds. PostgreSQL, estimating `carrer` from the statistics
/// of every language, walked the newest-first index through the articles looking for English
/// ones (3-5 s on a million when none has it); the service counts the lexeme per language,
/// leaves out the Spanish query, and reads the GIN index.
#[tokio::test]
async fn a_stem_frequent_in_another_language_is_read_from_the_index() {
    let app = spawn_with_a_spanish_stem().await;
    let runtime = pool_as(&app.db, "news_app").await;
    let languages = language_queries(&runtime, "carrer").await.unwrap();
    let expected: Vec<(&str, u64)> = languages
        .iter()
        .map(|l| (l.language.as_str(), l.expected_matches))
        .collect();
    assert_eq!(expected, [("en", 5)]);
    // A Spanish word: its count in Spanish articles; no English article holds its English
    // reading. A word no article of any language holds is not asked at all.
    let carrera = language_queries(&runtime, "carrera").await.unwrap();
    let expected: Vec<(&str, u64)> = carrera
        .iter()
        .map(|l| (l.language.as_str(), l.expected_matches))
        .collect();
    assert_eq!(expected, [("es", 6_000)]);
    let admin = app.admin().await;
    let spanish: i64 = sqlx::query_scalar("SELECT count(*) FROM articles WHERE language = 'es'")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert_eq!(carrera[0].articles, spanish as u64);
    assert!(
        language_queries(&runtime, "carrer zzyzx")
            .await
            .unwrap()
            .is_empty()
    );
    // What PostgreSQL chose by itself for the page's rows (the statement before the service
    // chose): the walk, expecting an English match in every few articles.
    let own: Vec<String> = sqlx::query_scalar(
        "EXPLAIN SELECT a.id FROM articles a
          WHERE (a.language = 'en' AND a.search_vector @@ 'carrer'::tsquery)
             OR (a.language = 'es' AND a.search_vector @@ 'carr'::tsquery)
          ORDER BY a.published_at DESC, a.id DESC LIMIT 21",
    )
    .fetch_all(&runtime)
    .await
    .unwrap();
    let own = own.join("\n");
    assert!(own.contains("articles_published_idx"), "{own}");
    let filters = Filters::default();
    for wanted in [21, RANKED_MATCHES] {
        assert_eq!(access(&languages, wanted, WALK_EXAMINES), Access::Index);
    }
    let plans = [
        plan(
            &runtime,
            newest_hits_query(
                "EXPLAIN ",
                &languages,
                &filters,
                None,
                21,
                None,
                Access::Index,
            ),
        )
        .await,
        plan(
            &runtime,
            ranked_hits_query(
                "EXPLAIN ",
                &languages,
                &filters,
                RankedPage {
                    window_end: None,
                    after: None,
                    wanted: 21,
                },
                None,
                Access::Index,
            ),
        )
        .await,
    ];
    for plan in plans {
        assert!(plan.contains("articles_search_idx"), "{plan}");
        assert!(!plan.contains("articles_published_idx"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
    for sort in ["newest", "relevance"] {
        let page = search(&app, &format!("q=carrer&sort={sort}")).await;
        assert_eq!(
            ids(&page),
            ["c-5", "c-4005", "c-8005", "c-12005", "c-16005"]
        );
        assert_eq!(page["next_cursor"], Value::Null);
        let page = search(&app, &format!("q=carrera&sort={sort}&limit=5")).await;
        assert_eq!(page["count"], 5);
    }
}

/// 3,000 articles holding `said`, a minute apart; the body of every 250th (`q-00250`, ...)
/// holds `said said`.
async fn insert_said(pool: &PgPool) {
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id)
         SELECT 'q-' || lpad(i::text, 5, '0'), 'Story ' || i, 'Summary',
                CASE WHEN i % 250 = 0 THEN 'He said said it.' ELSE 'He said it, she said.' END,
                'u', timestamptz '2026-06-01' - i * interval '1 minute', 'org-a', 'jrn-1'
           FROM generate_series(1, 3000) AS i",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// Every page of a search through the store, with walks that examine at most `examine`
/// articles: the hits' ids and scores, and the number of pages.
async fn all_pages_examining(
    pool: &PgPool,
    q: &str,
    sort: Sort,
    limit: i64,
    examine: i64,
) -> (Vec<String>, Vec<f64>, usize) {
    let mut spec = SearchSpec {
        q: q.to_owned(),
        sort,
        filters: Filters::default(),
        after: None,
        window_end: None,
    };
    let (mut seen, mut scores, mut pages) = (Vec::new(), Vec::new(), 0);
    loop {
        let page = page_examining(pool, &Default::default(), &spec, limit, None, examine)
            .await
            .unwrap();
        pages += 1;
        assert!(pages < 1000, "the walk goes on");
        seen.extend(page.data.iter().map(|h| h.item.id.clone()));
        scores.extend(page.data.iter().map(|h| h.score));
        match page.next_cursor {
            Some(next) => {
                spec = SearchCursor::decode(&next)
                    .unwrap()
                    .resume(None, None, &Filters::default())
                    .unwrap();
            }
            None => return (seen, scores, pages),
        }
    }
}

/// A phrase whose words are in every article but side by side in few: the walk stops after
/// examining its limit of articles, answers the matches it found (maybe none) and a cursor
/// that goes on from there, so each page costs at most the limit and the pages still give
/// every match once, in order.
#[tokio::test]
async fn a_rare_phrase_of_frequent_words_is_walked_a_bounded_stretch_at_a_time() {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    insert_said(&pipeline).await;
    let runtime = pool_as(&app.db, "news_app").await;
    let languages = language_queries(&runtime, "\"said said\"").await.unwrap();
    assert_eq!(access(&languages, 21, 400), Access::Walk(400));
    // Newest first: q-00250, q-00500, ... q-03000.
    let expected: Vec<String> = (1..=12).map(|i| format!("q-{:05}", i * 250)).collect();
    for sort in [Sort::Newest, Sort::Relevance] {
        let (seen, scores, pages) =
            all_pages_examining(&runtime, "\"said said\"", sort, 5, 400).await;
        assert_eq!(seen, expected, "{sort:?}");
        // 3,000 articles at 400 a walk: at least 8 walks, whatever the page size.
        assert!(pages >= 8, "{sort:?}: {pages} pages");
        if sort == Sort::Relevance {
            // The window is the matches among the articles page 1's walk examined (the
            // first 400: q-00250), ranked; the rest follow newest first with score 0.
            assert_eq!(scores[0], 1.0, "{scores:?}");
            assert!(scores[1..].iter().all(|s| *s == 0.0), "{scores:?}");
        }
        // Unbounded (the walk examines everything), the same matches.
        let (whole, _, _) =
            all_pages_examining(&runtime, "\"said said\"", sort, 5, 1_000_000).await;
        assert_eq!(whole, expected, "{sort:?}");
    }
    // A page that stopped short has a cursor and no suggestion; the walk's limit is the
    // service's, far above these 3,000 articles, over HTTP.
    let page = search(&app, "q=%22said%20said%22&sort=newest&limit=100").await;
    assert_eq!(ids(&page), expected);
    assert_eq!(page["next_cursor"], Value::Null);
}

/// `search_lexemes` counts, per language, the articles holding each lexeme (and, as lexeme '',
/// all the language's articles), whatever writes them: inserts, updates of the text or the
/// language, deletes.
#[tokio::test]
async fn the_lexeme_counts_follow_every_writer() {
    let app = spawn_search().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    insert_said(&pipeline).await;
    let admin = app.admin().await;
    let recount = "SELECT count(*) FROM (
            SELECT a.language, l.lexeme, count(*) AS n
              FROM articles a, unnest(array_prepend('', tsvector_to_array(a.search_vector))) AS l (lexeme)
             GROUP BY 1, 2) c
          FULL JOIN (SELECT * FROM search_lexemes WHERE articles <> 0) s
            ON s.language = c.language AND s.lexeme = c.lexeme
         WHERE s.articles IS DISTINCT FROM c.n";
    let wrong = || async {
        sqlx::query_scalar::<_, i64>(recount)
            .fetch_one(&admin)
            .await
            .unwrap()
    };
    assert_eq!(wrong().await, 0);
    let (said, holding): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT articles FROM search_lexemes WHERE language = 'en' AND lexeme = 'said'),
                (SELECT count(*) FROM articles
                  WHERE language = 'en' AND search_vector @@ 'said'::tsquery)",
    )
    .fetch_one(&admin)
    .await
    .unwrap();
    assert_eq!(said, holding);
    assert!(said > 3_000);
    for statement in [
        "UPDATE articles SET body = 'Nothing here.' WHERE id IN ('q-00001', 'q-00002')",
        "UPDATE articles SET language = 'es' WHERE id = 'q-00003'",
        "UPDATE articles SET title = title WHERE id LIKE 'q-001%'",
        "DELETE FROM articles WHERE id IN ('q-00004', 's-es')",
    ] {
        sqlx::query(statement).execute(&admin).await.unwrap();
        assert_eq!(wrong().await, 0, "{statement}");
    }
}

/// The parses a search keeps per query give the queries a fresh parse gives, with the counts
/// of the articles as they are now, and a language that appears since is read with its own
/// configuration.
#[tokio::test]
async fn kept_parses_read_the_articles_as_they_are_now() {
    let app = spawn_search().await;
    let runtime = pool_as(&app.db, "news_app").await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    let parses = QueryParses::default();
    let queries = [
        "election",
        "elecciones",
        "harbour strike -rain",
        "\"harbour strike\" OR café",
        "the",
        "zzyzx",
        "lighthouse",
        "lighthouse keeper",
    ];
    let same = |label: &'static str| {
        let (runtime, parses) = (&runtime, &parses);
        async move {
            for q in queries {
                let fresh = language_queries(runtime, q).await.unwrap();
                let kept = cached_language_queries(runtime, parses, q).await.unwrap();
                assert_eq!(kept, fresh, "{label}: {q}");
            }
        }
    };
    same("first, parsed").await;
    assert_eq!(parses.len(), queries.len());
    same("kept").await;
    // New articles change the counts (a lexeme none held: `lighthous`), and bring a language
    // with no configuration of its own (read with `search_simple`).
    sqlx::raw_sql(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id, language)
         VALUES ('x-light', 'Lighthouse keeper retires', 'After forty years.', 'The election
                  of a new keeper.', 'u', '2026-03-06', 'org-a', 'jrn-1', 'en'),
                ('x-fr', 'Le phare', 'Lighthouse', 'Une élection.', 'u', '2026-03-06',
                 'org-a', 'jrn-1', 'fr')",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let lighthouse = cached_language_queries(&runtime, &parses, "lighthouse")
        .await
        .unwrap();
    let asked: Vec<(&str, u64)> = lighthouse
        .iter()
        .map(|l| (l.language.as_str(), l.expected_matches))
        .collect();
    assert_eq!(asked, [("en", 1), ("fr", 1)]);
    same("after new articles").await;
    let admin = app.admin().await;
    let removed = "DELETE FROM articles WHERE id IN ('x-light', 's-strike')";
    sqlx::query(removed).execute(&admin).await.unwrap();
    same("after deletes").await;
}

/// A query that excludes a word it requires matches nothing, but PostgreSQL estimates it as
/// frequent as the word and walks the newest-first index through every article looking for a
/// match (7.5 s on a million articles): such a query is not asked, and an alternative that
/// cannot match is left out of the query the planner sees.
#[tokio::test]
async fn a_word_both_required_and_excluded_is_not_searched_for() {
    let app = spawn_with_common_and_lighthouse().await;
    let runtime = pool_as(&app.db, "news_app").await;
    for q in ["common -common", "\"story common\" -common"] {
        assert!(
            language_queries(&runtime, q).await.unwrap().is_empty(),
            "{q}"
        );
        let page = search(&app, &format!("q={}", encode(q))).await;
        assert_eq!(page["count"], 0, "{q}");
        assert_eq!(page["suggestion"], Value::Null, "{q}");
    }
    // Compared after stemming, per language: English stems `commons` as `common`, Spanish
    // does not, so only the Spanish query is asked (once a Spanish article holds `commons`:
    // a query requiring a word no article of a language holds is not asked there either).
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::query(
        "INSERT INTO articles (id, title, summary, body, url, published_at, organization_id,
                               journalist_id, language)
         VALUES ('x-commons', 'Los commons del puerto', 'Resumen', 'Texto', 'u',
                 '2026-01-02', 'org-a', 'jrn-1', 'es')",
    )
    .execute(&pipeline)
    .await
    .unwrap();
    let languages = language_queries(&runtime, "commons -common").await.unwrap();
    let asked: Vec<&str> = languages.iter().map(|l| l.language.as_str()).collect();
    assert_eq!(asked, ["es"]);
    assert_eq!(found(&app, "commons -common").await, ["x-commons"]);
    // `lighthouse OR (common -common)`: the planner is asked for `lighthouse` alone, and reads
    // it from the GIN index instead of walking the articles for the frequent word.
    let q = "lighthouse OR common -common";
    let languages = language_queries(&runtime, q).await.unwrap();
    assert!(!languages.is_empty());
    for l in &languages {
        assert!(!l.query.contains("common"), "{l:?}");
    }
    let plan = plan(
        &runtime,
        window_query(
            "EXPLAIN ",
            &languages,
            &Filters::default(),
            None,
            access(&languages, RANKED_MATCHES, WALK_EXAMINES),
        ),
    )
    .await;
    assert!(plan.contains("articles_search_idx"), "{plan}");
    assert_eq!(found(&app, q).await, vec!["x-777".to_owned()]);
}

/// The query asked without its contradictions matches exactly the documents PostgreSQL's own
/// query matches, over generated web-search queries (words, exclusions, phrases, `OR`, words
/// that stem alike) and every short sequence of their words.
#[tokio::test]
async fn queries_without_contradictions_match_what_postgresql_matches() {
    let app = spawn_search().await;
    let runtime = pool_as(&app.db, "news_app").await;
    let words = ["strike", "strikes", "harbour", "port"];
    // Every sequence of 1 to 3 of the words: phrases depend on order and adjacency.
    let mut documents: Vec<String> = Vec::new();
    let mut frontier = vec![String::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for prefix in &frontier {
            for word in words {
                let text = format!("{prefix} {word}").trim().to_owned();
                documents.push(text.clone());
                next.push(text);
            }
        }
        frontier = next;
    }
    // Queries of 1 to 4 terms, drawn by a fixed linear congruential sequence.
    let terms = |i: usize| -> String {
        let (a, b) = (words[i % 4], words[(i / 4) % 4]);
        match (i / 16) % 6 {
            0 => a.to_owned(),
            1 => format!("-{a}"),
            2 => format!("\"{a} {b}\""),
            3 => format!("-\"{a} {b}\""),
            4 => format!("{a} OR {b}"),
            _ => format!("{a} OR -{b}"),
        }
    };
    let mut seed: usize = 7;
    let mut changed = 0;
    for _ in 0..300 {
        let mut q = Vec::new();
        for _ in 0..=(seed % 4) {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345) % (1 << 31);
            q.push(terms(seed % 96));
        }
        let q = q.join(" ");
        let original: String =
            sqlx::query_scalar("SELECT websearch_to_tsquery(search_config('en'), $1)::text")
                .bind(&q)
                .fetch_one(&runtime)
                .await
                .unwrap();
        let simplified = news_service::domain::tsquery::without_contradictions(&original);
        if simplified.as_deref() != Some(original.as_str()) {
            changed += 1;
        }
        let (matched, matched_simplified): (Vec<bool>, Vec<bool>) = {
            let rows: Vec<(bool, bool)> = sqlx::query_as(
                "SELECT to_tsvector(search_config('en'), d) @@ $2::tsquery,
                        coalesce(to_tsvector(search_config('en'), d) @@ $3::tsquery, false)
                   FROM unnest($1::text[]) WITH ORDINALITY AS t (d, n) ORDER BY n",
            )
            .bind(&documents)
            .bind(&original)
            .bind(simplified.as_deref())
            .fetch_all(&runtime)
            .await
            .unwrap();
            rows.into_iter().unzip()
        };
        assert_eq!(
            matched, matched_simplified,
            "{q}: {original} asked as {simplified:?}"
        );
    }
    // The generator does make contradictions.
    assert!(changed >= 20, "{changed}");
}

/// A search can hold a connection for seconds (a phrase of very frequent words, up to the
/// deadline): searches get at most half the pool, and one past that waits for a turn only as long
/// as for a pooled connection, then is refused, so the other endpoints keep their connections
/// however many expensive searches arrive.
#[tokio::test]
async fn searches_leave_connections_for_the_other_endpoints() {
    let db = TestDatabase::create().await;
    news_service::migrate(&db.url_for("news_owner"))
        .await
        .unwrap();
    let app = start_configured(db, |config| {
        config.db_max_connections = 4;
        config.db_acquire_timeout_ms = 500;
    })
    .await;
    // Every search waits on this lock (its first statement reads `search_languages`), holding
    // its connection, as a slow one would; the article list does not read that table.
    let admin = app.admin().await;
    let mut lock = admin.begin().await.unwrap();
    sqlx::query("LOCK TABLE search_languages IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let waiting = || async {
        app.count(
            "SELECT count(*) FROM pg_stat_activity
              WHERE usename = 'news_app' AND wait_event_type = 'Lock'",
        )
        .await
    };
    // The statuses in the order the searches end.
    let (ended, mut statuses) = tokio::sync::mpsc::unbounded_channel();
    let url = app.url("/search?q=harbour");
    for _ in 0..4 {
        let (request, ended) = (app.client.get(&url), ended.clone());
        tokio::spawn(async move {
            let response = request.send().await.unwrap();
            ended.send(response).unwrap();
        });
    }
    // Two hold connections (half of 4); the other two wait for a turn.
    let started = std::time::Instant::now();
    while waiting().await < 2 {
        assert!(started.elapsed().as_secs() < 4, "searches never started");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let list = app.get("/articles", None).await;
    assert_eq!(list.status(), 200);
    assert_eq!(waiting().await, 2);
    // No turn comes free while the lock is held: the two that waited are refused, after their
    // wait, and the two that hold connections are still waiting on the lock.
    for _ in 0..2 {
        let refused = statuses.recv().await.unwrap();
        assert!(refused.headers().contains_key("retry-after"));
        assert_problem(refused, 503, "overloaded").await;
    }
    assert_eq!(waiting().await, 2);
    lock.rollback().await.unwrap();
    for _ in 0..2 {
        assert_eq!(statuses.recv().await.unwrap().status(), 200);
    }
}

/// Searches past the limit that find a turn within the wait are served, not refused: a burst
/// of ordinary searches larger than the limit all succeed.
#[tokio::test]
async fn a_burst_of_searches_past_the_limit_is_served() {
    let db = TestDatabase::create().await;
    news_service::migrate(&db.url_for("news_owner"))
        .await
        .unwrap();
    let app = start_configured(db, |config| config.db_max_connections = 2).await;
    let url = app.url("/search?q=harbour");
    let searches: Vec<_> = (0..12)
        .map(|_| tokio::spawn(app.client.get(&url).send()))
        .collect();
    for search in searches {
        assert_eq!(search.await.unwrap().unwrap().status(), 200);
    }
}

#[tokio::test]
async fn the_migration_fills_articles_that_were_there_before_it() {
    let (db, owner, pipeline) = database_before_migration(20261127000001).await;
    insert_many(&pipeline, 2500).await;
    MIGRATOR.run(&owner).await.unwrap();
    let empty: i64 =
        sqlx::query_scalar("SELECT count(*) FROM articles WHERE search_vector IS NULL")
            .fetch_one(&owner)
            .await
            .unwrap();
    assert_eq!(empty, 0);
    let valid: bool = sqlx::query_scalar(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = 'articles_search_idx'::regclass",
    )
    .fetch_one(&owner)
    .await
    .unwrap();
    assert!(valid);
    // The lexeme counts are filled from the articles already there.
    let counted: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT articles FROM search_lexemes WHERE language = 'en' AND lexeme = ''),
                (SELECT count(*) FROM articles),
                (SELECT articles FROM search_lexemes WHERE language = 'en' AND lexeme = 'beacon')",
    )
    .fetch_one(&owner)
    .await
    .unwrap();
    assert_eq!(counted, (counted.1, counted.1, 2500));
    let app = start(db, None).await;
    let page = search(&app, "q=beacon&sort=newest&limit=100").await;
    assert_eq!(page["count"], 100);
    assert_eq!(search(&app, "q=beacn").await["suggestion"], "beacon");
}

#[tokio::test]
async fn the_document_describes_the_search() {
    let app = spawn_search().await;
    let document = app.get_json("/openapi.json", None).await;
    let operation = &document["paths"]["/v1/news/search"]["get"];
    let parameters = operation["parameters"].as_array().unwrap();
    let parameter = |name: &str| {
        parameters
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no parameter {name}"))
    };
    let q = parameter("q");
    // Required without a cursor only: a cursor keeps its search's q.
    assert_ne!(q["required"], true);
    assert!(q["description"].as_str().unwrap().contains("cursor"));
    assert_eq!(q["schema"]["minLength"], 1);
    // 1 to 200 characters between the white space the server trims, no U+0000; the white space
    // around does not count, so there is no `maxLength`.
    assert!(q["schema"]["maxLength"].is_null());
    let blank = shared_auth::testing::whitespace_class();
    let expected =
        format!("^[{blank}]*[^\\u0000{blank}](?:[^\\u0000]{{0,198}}[^\\u0000{blank}])?[{blank}]*$");
    assert_eq!(q["schema"]["pattern"], expected.as_str());
    assert_eq!(
        parameter("sort")["schema"]["enum"],
        serde_json::json!(["relevance", "newest"])
    );
    assert_eq!(
        parameter("published_after")["schema"]["format"],
        "date-time"
    );
    assert!(
        parameters.iter().all(|p| p["name"] != "offset"),
        "offset is not a parameter"
    );
    let responses = &operation["responses"];
    assert!(responses["304"].is_object() && responses["400"].is_object());
    let hit = &document["components"]["schemas"]["SearchHit"];
    assert!(hit.is_object(), "SearchHit is a named schema");
}

#[tokio::test]
async fn the_import_sets_the_language() {
    let app = spawn_search().await;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let article = |id: &str, title: &str, language: Option<&str>| {
        let mut line = serde_json::json!({"type": "article", "id": id, "title": title,
            "summary": "", "body": "", "url": "u", "published_at": "2026-04-01T00:00:00Z",
            "organization_id": "org-a", "journalist_id": "jrn-1"});
        if let Some(language) = language {
            line["language"] = language.into();
        }
        line.to_string()
    };
    let lines = [
        article("imp-es", "Nuevas elecciones en el puerto", Some("es")),
        article("imp-en", "Harbour elections next year", None),
        article("imp-bad", "Elecciones", Some("spanish")),
    ];
    std::io::Write::write_all(&mut file, lines.join("\n").as_bytes()).unwrap();
    let summary = news_service::import(&app.db.url_for("news_pipeline"), file.path(), false)
        .await
        .unwrap();
    assert_eq!(summary.articles.inserted, 2);
    assert_eq!(summary.bad_lines.len(), 1);
    assert_eq!(summary.bad_lines[0].line, 3);
    assert!(
        summary.bad_lines[0].reason.contains("language"),
        "{:?}",
        summary.bad_lines
    );
    // Stemmed as Spanish: `elección` finds it; as English, `election` finds the other.
    let spanish = found(&app, "elección").await;
    assert!(spanish.contains(&"imp-es".to_owned()) && !spanish.contains(&"imp-en".to_owned()));
    assert!(found(&app, "election").await.contains(&"imp-en".to_owned()));
}
