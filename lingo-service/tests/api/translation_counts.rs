//! `translation_count`, stored on `phrases` (migration `20261129100001`) and set by the search
//! rows' refresh on every write of translations: exact after each kind of write the pipeline
//! makes, and under concurrent writers (docs/lingo.md, "Translation counts").

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use sqlx::PgConnection;

use crate::helpers::{TestApp, spawn_app_unseeded};
use crate::search::{add_languages, add_phrase, pipeline};

const PERMISSION_DENIED: &str = "42501";

/// Every phrase's `translation_count` as `GET /phrases` answers it (one page: ≤ 100 phrases).
async fn listed_counts(app: &TestApp) -> BTreeMap<String, i64> {
    let response = app.get("/v1/lingo/phrases?limit=100", None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|phrase| {
            let id = phrase["id"].as_str().unwrap().to_owned();
            (id, phrase["translation_count"].as_i64().unwrap())
        })
        .collect()
}

/// Asserts the listed counts are `expected` and that every stored count equals a count of the
/// phrase's translations.
async fn assert_counts(app: &TestApp, expected: &[(&str, i64)], after: &str) {
    let expected: BTreeMap<String, i64> = expected
        .iter()
        .map(|(id, count)| ((*id).to_owned(), *count))
        .collect();
    assert_eq!(listed_counts(app).await, expected, "after {after}");
    let mut admin = app.admin().await;
    let wrong: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM lingo.phrases p WHERE p.translation_count <> \
           (SELECT count(*) FROM lingo.phrase_translations t WHERE t.phrase_id = p.id)",
    )
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        wrong, 0,
        "stored counts that differ from a count, after {after}"
    );
}

async fn run(db: &mut PgConnection, sql: &str) {
    sqlx::raw_sql(sql).execute(db).await.unwrap();
}

async fn sqlstate(db: &mut PgConnection, sql: &str) -> Option<String> {
    let error = sqlx::raw_sql(sql).execute(db).await.err()?;
    error
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned())
}

#[tokio::test]
async fn stored_translation_counts_follow_every_write_of_the_pipeline() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    run(
        &mut db,
        "INSERT INTO languages (code, name) VALUES ('fr', 'French')",
    )
    .await;
    add_phrase(&mut db, "es-1", "es", "Hola", &[("en", "Hello")]).await;
    add_phrase(&mut db, "es-2", "es", "Gracias", &[]).await;
    add_phrase(
        &mut db,
        "es-3",
        "es",
        "Adiós",
        &[("en", "Bye"), ("de", "Tschüss")],
    )
    .await;
    assert_counts(
        &app,
        &[("es-1", 1), ("es-2", 0), ("es-3", 2)],
        "adding phrases",
    )
    .await;

    // One statement adding translations of several phrases.
    run(
        &mut db,
        "INSERT INTO phrase_translations (phrase_id, language_code, text) VALUES \
         ('es-1', 'de', 'Hallo'), ('es-1', 'fr', 'Salut'), ('es-2', 'en', 'Thanks')",
    )
    .await;
    assert_counts(&app, &[("es-1", 3), ("es-2", 1), ("es-3", 2)], "an insert").await;

    // An upsert that rewrites one translation and adds another.
    run(
        &mut db,
        "INSERT INTO phrase_translations (phrase_id, language_code, text) VALUES \
         ('es-2', 'en', 'Thank you'), ('es-2', 'de', 'Danke') \
         ON CONFLICT (phrase_id, language_code) DO UPDATE SET text = EXCLUDED.text",
    )
    .await;
    assert_counts(&app, &[("es-1", 3), ("es-2", 2), ("es-3", 2)], "an upsert").await;

    // An update that moves a translation to another phrase, and one that only edits a text.
    run(
        &mut db,
        "UPDATE phrase_translations SET phrase_id = 'es-3' \
         WHERE phrase_id = 'es-1' AND language_code = 'fr'",
    )
    .await;
    assert_counts(&app, &[("es-1", 2), ("es-2", 2), ("es-3", 3)], "a move").await;
    run(&mut db, "UPDATE phrase_translations SET text = upper(text)").await;
    assert_counts(&app, &[("es-1", 2), ("es-2", 2), ("es-3", 3)], "an edit").await;

    // A phrase's own text changes: its search row follows, its count stays.
    run(
        &mut db,
        "UPDATE phrases SET text = 'Muchas gracias' WHERE id = 'es-2'",
    )
    .await;
    assert_counts(&app, &[("es-1", 2), ("es-2", 2), ("es-3", 3)], "a new text").await;
    let found = app.get("/v1/lingo/phrases?q=muchas", None).await;
    let found: Value = found.json().await.unwrap();
    assert_eq!(found["data"][0]["id"], "es-2");
    assert_eq!(found["data"][0]["translation_count"], 2);

    run(
        &mut db,
        "DELETE FROM phrase_translations WHERE phrase_id = 'es-3' AND language_code <> 'fr'",
    )
    .await;
    assert_counts(&app, &[("es-1", 2), ("es-2", 2), ("es-3", 1)], "a delete").await;

    // Deleting a phrase deletes its translations by the cascade; the others keep their counts.
    run(&mut db, "DELETE FROM phrases WHERE id = 'es-1'").await;
    assert_counts(&app, &[("es-2", 2), ("es-3", 1)], "a cascade").await;

    // The pipeline may not write a count itself.
    for statement in [
        "UPDATE phrases SET translation_count = 9",
        "INSERT INTO phrases (id, text, language_code, translation_count) VALUES ('x', 'x', 'es', 9)",
    ] {
        assert_eq!(
            sqlstate(&mut db, statement).await.as_deref(),
            Some(PERMISSION_DENIED),
            "{statement}"
        );
    }

    // Only the schema's owner (or a superuser) may truncate.
    run(&mut app.admin().await, "TRUNCATE lingo.phrase_translations").await;
    assert_counts(&app, &[("es-2", 0), ("es-3", 0)], "a truncate").await;
}

/// `first_sql` in a transaction of `first` that stays open, then `second_sql` in one of
/// `second`, which waits for `first`'s lock; `first` commits, then `second`. Returns `second`.
async fn race(
    app: &TestApp,
    first: &mut PgConnection,
    first_sql: &str,
    mut second: PgConnection,
    second_sql: &'static str,
) -> PgConnection {
    run(first, "BEGIN").await;
    run(first, first_sql).await;
    run(&mut second, "BEGIN").await;
    let second_write = tokio::spawn(async move {
        // (A prepared statement: a raw one's future is not `Send` enough for a task.)
        sqlx::query(second_sql).execute(&mut second).await.unwrap();
        second
    });
    until_one_waits_for_a_lock(app).await;
    run(first, "COMMIT").await;
    let mut second = second_write.await.unwrap();
    run(&mut second, "COMMIT").await;
    second
}

/// Waits until some backend of this test's database waits for a lock.
async fn until_one_waits_for_a_lock(app: &TestApp) {
    let mut admin = app.admin().await;
    for _ in 0..1000 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no transaction waited for the other's lock within 10 s");
}

#[tokio::test]
async fn two_transactions_adding_translations_to_one_phrase_at_once_both_count() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    run(
        &mut db,
        "INSERT INTO languages (code, name) VALUES ('fr', 'French')",
    )
    .await;
    add_phrase(&mut db, "es-1", "es", "Hola", &[("es", "Hola")]).await;

    // The first adds a translation and stays open; the second adds another to the same phrase,
    // and its refresh waits for the first's. The first commits; the second, counting after it,
    // must count both new rows.
    let mut first = pipeline(&app).await;
    let second = pipeline(&app).await;
    let second = race(
        &app,
        &mut first,
        "INSERT INTO phrase_translations VALUES ('es-1', 'en', 'Hello')",
        second,
        "INSERT INTO phrase_translations VALUES ('es-1', 'de', 'Hallo')",
    )
    .await;
    assert_counts(&app, &[("es-1", 3)], "two concurrent inserts").await;

    // The same with a delete racing an insert.
    race(
        &app,
        &mut first,
        "DELETE FROM phrase_translations WHERE phrase_id = 'es-1' AND language_code = 'en'",
        second,
        "INSERT INTO phrase_translations VALUES ('es-1', 'fr', 'Salut')",
    )
    .await;
    assert_counts(&app, &[("es-1", 3)], "a delete racing an insert").await;
}

/// Many writers at once: each adds one translation of one of two phrases in a transaction that
/// stays open a moment (a fifth of them roll it back), and every third then moves its row to the
/// other phrase; whatever the interleaving, every count is exact. (A transaction that held one
/// phrase's refresh while moving into the other could deadlock with one doing the reverse, as
/// any two writers locking rows in opposite orders; that is the pipeline's to avoid.)
#[tokio::test]
async fn many_concurrent_writers_leave_every_count_exact() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    let languages: Vec<String> = (0..24).map(|n| format!("x{n:02}")).collect();
    for code in &languages {
        sqlx::query("INSERT INTO languages (code, name) VALUES ($1, $1)")
            .bind(code)
            .execute(&mut db)
            .await
            .unwrap();
    }
    add_phrase(&mut db, "es-1", "es", "Hola", &[]).await;
    add_phrase(&mut db, "es-2", "es", "Adiós", &[]).await;
    let committed = |n: usize| !n.is_multiple_of(5);
    let moved = |n: usize| n.is_multiple_of(3);
    let mut writers = Vec::new();
    for (n, code) in languages.iter().enumerate() {
        let mut connection = pipeline(&app).await;
        let code = code.clone();
        writers.push(tokio::spawn(async move {
            let (phrase, other) = if n.is_multiple_of(2) {
                ("es-1", "es-2")
            } else {
                ("es-2", "es-1")
            };
            let mut tx = sqlx::Connection::begin(&mut connection).await.unwrap();
            sqlx::query("INSERT INTO phrase_translations VALUES ($1, $2, 'text')")
                .bind(phrase)
                .bind(&code)
                .execute(&mut *tx)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            if !committed(n) {
                tx.rollback().await.unwrap();
                return;
            }
            tx.commit().await.unwrap();
            if moved(n) {
                sqlx::query(
                    "UPDATE phrase_translations SET phrase_id = $1 WHERE language_code = $2",
                )
                .bind(other)
                .bind(&code)
                .execute(&mut connection)
                .await
                .unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let on_one = (0..24)
        .filter(|&n| committed(n) && (n.is_multiple_of(2) != moved(n)))
        .count() as i64;
    let on_two = (0..24).filter(|&n| committed(n)).count() as i64 - on_one;
    assert_counts(
        &app,
        &[("es-1", on_one), ("es-2", on_two)],
        "24 concurrent writers",
    )
    .await;
}
