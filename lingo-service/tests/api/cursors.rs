//! Cursor paging of the phrase catalogue (plain and searched), the caller's study sessions and
//! recommendations: every item exactly once in the documented order, also while items are
//! added during the walk; and every cursor that is not this list's is refused.

use std::cmp::Ordering;

use serde_json::Value;
use shared_auth::testing::token;

use crate::helpers::{TestApp, assert_problem, session, spawn_app, spawn_app_unseeded};
use crate::search::{add_languages, add_phrase, pipeline};

const PHRASES: &str = "/v1/lingo/phrases";
const SESSIONS: &str = "/v1/lingo/me/study-sessions";
const RECOMMENDATIONS: &str = "/v1/lingo/me/recommendations";

async fn page(app: &TestApp, path: &str, bearer: Option<&str>) -> Value {
    let response = app.get(path, bearer).await;
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

/// Walks a list from `first` (a path with its query) by `next_cursor`, calling `between` with
/// the number of pages read after each page; returns the items' `key`s in order.
async fn walk(
    app: &TestApp,
    first: &str,
    bearer: Option<&str>,
    key: fn(&Value) -> String,
    mut between: impl AsyncFnMut(usize),
) -> Vec<String> {
    let mut items = Vec::new();
    let mut body = page(app, first, bearer).await;
    let mut pages = 1;
    loop {
        items.extend(body["data"].as_array().unwrap().iter().map(key));
        between(pages).await;
        let Some(cursor) = body["next_cursor"].as_str() else {
            assert_eq!(body["next_offset"], Value::Null);
            return items;
        };
        body = page(app, &format!("{first}&cursor={cursor}"), bearer).await;
        assert_eq!(body["offset"], 0);
        assert_eq!(
            body["next_offset"],
            Value::Null,
            "a cursor page has no offset"
        );
        pages += 1;
    }
}

/// A phrase's translations, `(language, text)`.
type Translations<'a> = &'a [(&'a str, &'a str)];

fn id(item: &Value) -> String {
    item["id"].as_str().unwrap().to_owned()
}

fn phrase_id(item: &Value) -> String {
    item["phrase"]["id"].as_str().unwrap().to_owned()
}

fn assert_each_once(walked: &[String]) {
    let mut unique = walked.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), walked.len(), "an item repeats: {walked:?}");
}

#[tokio::test]
async fn the_catalogue_is_walked_by_id_to_its_end_while_phrases_are_added() {
    let app = spawn_app().await;
    let mut admin = app.admin().await;
    let mut ids: Vec<String> = sqlx::query_scalar("SELECT id FROM lingo.phrases")
        .fetch_all(&mut admin)
        .await
        .unwrap();
    ids.sort();
    let mut db = pipeline(&app).await;
    let walked = walk(
        &app,
        &format!("{PHRASES}?limit=13"),
        None,
        id,
        async |pages| {
            if pages == 2 {
                // One behind the walk (never shown), one ahead of it (shown once).
                add_phrase(&mut db, "aaa-new", "es", "Nuevo", &[]).await;
                add_phrase(&mut db, "zzz-new", "es", "Nuevo", &[]).await;
            }
        },
    )
    .await;
    ids.push("zzz-new".into());
    assert_eq!(walked, ids);

    // The language filter is kept by the cursor, whether the next request repeats it or not.
    let spanish = walk(
        &app,
        &format!("{PHRASES}?limit=7&language=es"),
        None,
        id,
        async |_| {},
    )
    .await;
    assert_eq!(spanish.len(), 48 + 2);
    let first = page(&app, &format!("{PHRASES}?limit=7&language=es"), None).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let next = page(&app, &format!("{PHRASES}?limit=7&cursor={cursor}"), None).await;
    let next_ids: Vec<String> = next["data"].as_array().unwrap().iter().map(id).collect();
    assert_eq!(next_ids, spanish[7..14]);
}

/// Matches of `q=hola` in every tier, with ties of tier and length, and phrases that do not
/// match; returns the matches' ids best first: (tier, text length, id).
async fn tiered_catalogue(app: &TestApp) -> Vec<String> {
    let mut db = pipeline(app).await;
    add_languages(&mut db).await;
    let mut expected: Vec<(i32, usize, String)> = Vec::new();
    for k in 0..12 {
        let pad = "x".repeat(k % 5);
        let cases: [(i32, String, Translations); 4] = [
            (0, format!("Hola {pad}"), &[]),
            (1, format!("Holanda {pad}"), &[]),
            (2, format!("Adiós {pad}"), &[("en", "Hola amigo")]),
            (3, format!("Chau {pad}"), &[("de", "Holanda")]),
        ];
        for (tier, text, translations) in cases {
            let id = format!("t{tier}-{k:02}");
            add_phrase(&mut db, &id, "es", text.trim_end(), translations).await;
            expected.push((tier, text.trim_end().chars().count(), id));
        }
        add_phrase(&mut db, &format!("other-{k:02}"), "es", "Buenas", &[]).await;
    }
    expected.sort();
    expected.into_iter().map(|(_, _, id)| id).collect()
}

#[tokio::test]
async fn a_search_is_walked_best_first_to_its_end_while_phrases_are_added() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    let mut expected = tiered_catalogue(&app).await;

    // By offset, the same order.
    let by_offset = page(&app, &format!("{PHRASES}?q=hola&limit=100"), None).await;
    let by_offset: Vec<String> = by_offset["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect();
    assert_eq!(by_offset, expected);

    let walked = walk(
        &app,
        &format!("{PHRASES}?q=hola&limit=5"),
        None,
        id,
        async |pages| {
            if pages == 3 {
                // Ranked before the walk's position (never shown), and after it (shown once).
                add_phrase(&mut db, "t0-new", "es", "Hola", &[]).await;
                add_phrase(
                    &mut db,
                    "t3-new",
                    "es",
                    "Chau chau chau",
                    &[("de", "Holanda")],
                )
                .await;
            }
        },
    )
    .await;
    expected.push("t3-new".into());
    assert_each_once(&walked);
    assert_eq!(walked, expected);

    // The cursor keeps `q`: the next request may leave it out, or repeat it trimmed otherwise.
    let first = page(&app, &format!("{PHRASES}?q=hola&limit=5"), None).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = page(&app, &format!("{PHRASES}?q=hola&limit=5&offset=5"), None).await;
    let second: Vec<String> = second["data"].as_array().unwrap().iter().map(id).collect();
    for next in [
        format!("{PHRASES}?limit=5&cursor={cursor}"),
        format!("{PHRASES}?limit=5&q=%20hola%20&cursor={cursor}"),
    ] {
        let body = page(&app, &next, None).await;
        let ids: Vec<String> = body["data"].as_array().unwrap().iter().map(id).collect();
        assert_eq!(ids, second, "{next}");
    }
}

#[tokio::test]
async fn a_search_pages_across_tiers_and_ties_by_cursor_and_by_offset_at_every_page_size() {
    let app = spawn_app_unseeded().await;
    let expected = tiered_catalogue(&app).await;
    // Page boundaries fall inside ties and on each tier's first and last match: the tiers are
    // read one after the other, from the cursor's row in its own tier.
    for limit in 1..=7 {
        let walked = walk(
            &app,
            &format!("{PHRASES}?q=hola&limit={limit}"),
            None,
            id,
            async |_| {},
        )
        .await;
        assert_eq!(walked, expected, "limit {limit}");
    }
    // An offset skips rows of the earlier tiers too.
    for offset in [0, 1, 11, 12, 13, 23, 24, 25, 35, 36, 47, 48] {
        let body = page(
            &app,
            &format!("{PHRASES}?q=hola&limit=3&offset={offset}"),
            None,
        )
        .await;
        let ids: Vec<String> = body["data"].as_array().unwrap().iter().map(id).collect();
        let end = (offset + 3).min(expected.len());
        assert_eq!(ids, expected[offset..end], "offset {offset}");
        let next = (end < expected.len()).then_some(end);
        assert_eq!(body["next_offset"].as_u64(), next.map(|n| n as u64));
    }
    // Within a language, and with a cursor from the middle of a tier.
    let spanish = walk(
        &app,
        &format!("{PHRASES}?q=hola&language=es&limit=5"),
        None,
        id,
        async |_| {},
    )
    .await;
    assert_eq!(spanish, expected);
    let english = page(&app, &format!("{PHRASES}?q=hola&language=en"), None).await;
    assert_eq!(english["count"], 0);
}

#[tokio::test]
async fn the_callers_sessions_are_walked_newest_first_while_sessions_are_added() {
    let app = spawn_app().await;
    let walker = token("walker");
    for seen in 0..23 {
        let response = app.post_session(&walker, &session("es", 60, seen, 0)).await;
        assert_eq!(response.status(), 201);
    }
    app.post_session(&token("someone-else"), &session("es", 60, 1, 1))
        .await;
    // Ties of `created_at`, so the order needs its tie-breaker (`id` descending).
    let mut admin = app.admin().await;
    sqlx::raw_sql(
        "UPDATE lingo.study_sessions \
         SET created_at = created_at - (phrases_seen % 4) * interval '1 microsecond' \
                                     - (phrases_seen % 3) * interval '1 minute' \
         WHERE learner_id = 'walker'; \
         UPDATE lingo.study_sessions SET created_at = date_trunc('minute', created_at) \
         WHERE learner_id = 'walker' AND phrases_seen % 2 = 0",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let rows: Vec<(chrono::DateTime<chrono::Utc>, uuid::Uuid)> = sqlx::query_as(
        "SELECT created_at, id FROM lingo.study_sessions WHERE learner_id = 'walker'",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let mut rows = rows;
    rows.sort_by(|a, b| b.cmp(a));
    let ties = rows.windows(2).filter(|w| w[0].0 == w[1].0).count();
    assert!(ties > 3, "the data has ties of created_at");
    let expected: Vec<String> = rows.iter().map(|(_, id)| id.to_string()).collect();

    let walked = walk(
        &app,
        &format!("{SESSIONS}?limit=4"),
        Some(&walker),
        id,
        async |pages| {
            if pages == 2 {
                // Newer than every session the walk has not reached: never shown.
                app.post_session(&walker, &session("es", 60, 1, 1)).await;
            }
        },
    )
    .await;
    assert_each_once(&walked);
    assert_eq!(walked, expected);
}

#[tokio::test]
async fn recommendations_are_walked_best_first_while_the_pipeline_adds_some() {
    let app = spawn_app().await;
    let mut admin = app.admin().await;
    // Scores with ties, and the values a float column also holds (NaN sorts above all).
    sqlx::raw_sql(
        "INSERT INTO lingo.phrase_recommendations (learner_id, phrase_id, score, generated_at) \
         SELECT 'walker', id, \
                CASE WHEN n = 1 THEN 'NaN'::float8 WHEN n = 2 THEN 'Infinity' \
                     WHEN n = 3 THEN '-Infinity' ELSE (n % 7) / 4.0 END, now() \
         FROM (SELECT id, row_number() OVER (ORDER BY md5(id)) AS n FROM lingo.phrases) p \
         WHERE n <= 40",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let rows: Vec<(f64, String)> = sqlx::query_as(
        "SELECT score, phrase_id FROM lingo.phrase_recommendations WHERE learner_id = 'walker'",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    let mut rows = rows;
    rows.sort_by(|a, b| match b.0.total_cmp(&a.0) {
        Ordering::Equal => a.1.cmp(&b.1),
        other => other,
    });
    let mut expected: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
    let unused: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM lingo.phrases WHERE id NOT IN \
           (SELECT phrase_id FROM lingo.phrase_recommendations WHERE learner_id = 'walker') \
         ORDER BY id LIMIT 2",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();

    let walker = token("walker");
    let walked = walk(
        &app,
        &format!("{RECOMMENDATIONS}?limit=3"),
        Some(&walker),
        phrase_id,
        async |pages| {
            if pages == 4 {
                // Better than the walk's position (never shown), and worse (shown once, last).
                for (phrase, score) in [(&unused[0], 1e9), (&unused[1], -1e9)] {
                    sqlx::query(
                        "INSERT INTO lingo.phrase_recommendations \
                         (learner_id, phrase_id, score, generated_at) VALUES ('walker', $1, $2, now())",
                    )
                    .bind(phrase)
                    .bind(score)
                    .execute(&mut admin)
                    .await
                    .unwrap();
                }
            }
        },
    )
    .await;
    let infinity_last = expected.pop().unwrap();
    expected.push(unused[1].clone());
    expected.push(infinity_last);
    assert_each_once(&walked);
    assert_eq!(walked, expected);
}

#[tokio::test]
async fn cursors_of_other_lists_or_filters_forged_or_truncated_are_refused() {
    let app = spawn_app().await;
    let learner = token("demo-learner");
    app.post_session(&learner, &session("es", 60, 1, 1)).await;
    app.post_session(&learner, &session("es", 60, 1, 1)).await;
    let bearer = Some(learner.as_str());
    let cursor_of = async |path: &str| {
        let body = page(&app, path, bearer).await;
        body["next_cursor"]
            .as_str()
            .expect("a next page")
            .to_owned()
    };
    let phrases = cursor_of(&format!("{PHRASES}?limit=1")).await;
    let spanish = cursor_of(&format!("{PHRASES}?limit=1&language=es")).await;
    let search = cursor_of(&format!("{PHRASES}?limit=1&q=a")).await;
    let sessions = cursor_of(&format!("{SESSIONS}?limit=1")).await;
    let recommendations = cursor_of(&format!("{RECOMMENDATIONS}?limit=1")).await;

    let mut refused = vec![
        format!("{PHRASES}?cursor=!!!"),
        format!("{PHRASES}?cursor={}", &phrases[..phrases.len() - 4]),
        format!("{PHRASES}?cursor=e30"),
        format!("{PHRASES}?cursor={sessions}"),
        format!("{PHRASES}?cursor={recommendations}"),
        // The same list with other filters, or a search's cursor on the list and back.
        format!("{PHRASES}?cursor={spanish}&language=de"),
        format!("{PHRASES}?cursor={phrases}&language=es"),
        format!("{PHRASES}?cursor={phrases}&q=a"),
        format!("{PHRASES}?cursor={search}&q=b"),
        format!("{SESSIONS}?cursor={phrases}"),
        format!("{SESSIONS}?cursor={recommendations}"),
        format!("{SESSIONS}?cursor={}", &sessions[..sessions.len() - 4]),
        format!("{RECOMMENDATIONS}?cursor={sessions}"),
        format!("{RECOMMENDATIONS}?cursor={search}"),
        format!(
            "{RECOMMENDATIONS}?cursor={}",
            &recommendations[..recommendations.len() - 4]
        ),
    ];
    for list in [PHRASES, SESSIONS, RECOMMENDATIONS] {
        refused.push(format!("{list}?cursor=bm90IGpzb24"));
    }
    for path in refused {
        let response = app.get(&path, bearer).await;
        let body = assert_problem(response, 400, "invalid_cursor").await;
        assert!(body["detail"].is_string(), "{path}");
    }

    for (list, cursor) in [
        (PHRASES, &phrases),
        (SESSIONS, &sessions),
        (RECOMMENDATIONS, &recommendations),
    ] {
        for offset in ["0", "5"] {
            let response = app
                .get(&format!("{list}?cursor={cursor}&offset={offset}"), bearer)
                .await;
            assert_problem(response, 400, "invalid_query").await;
        }
        // An empty `cursor=` is no cursor: the first page, offsets allowed.
        let first = page(&app, &format!("{list}?limit=1"), bearer).await;
        let empty = page(&app, &format!("{list}?limit=1&cursor=&offset=0"), bearer).await;
        assert_eq!(first, empty, "{list}");
    }
}
