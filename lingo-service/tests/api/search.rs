//! `GET /phrases?q=`: phrase search (docs/lingo.md, "Phrase search"), on a catalogue the test writes as the pipeline
//! does, so the search documents are the ones the pipeline's writes keep fresh.

use lingo_service::db::connect_one;
use serde_json::Value;
use shared_auth::testing::whitespace_class;
use sqlx::PgConnection;

use crate::helpers::{
    TestApp, assert_problem, cursor_page_keys, keys, phrase_item_keys, spawn_app_unseeded,
};

/// A connection as the upstream pipeline, the only writer of the catalogue.
pub async fn pipeline(app: &TestApp) -> PgConnection {
    connect_one(&app.db.url_for("lingo_pipeline"))
        .await
        .expect("pipeline connection")
}

pub async fn add_languages(db: &mut PgConnection) {
    sqlx::raw_sql(
        "INSERT INTO languages (code, name) VALUES \
         ('es', 'Spanish'), ('en', 'English'), ('de', 'German')",
    )
    .execute(db)
    .await
    .unwrap();
}

/// A phrase and its translations `(language, text)`.
pub async fn add_phrase(
    db: &mut PgConnection,
    id: &str,
    language: &str,
    text: &str,
    translations: &[(&str, &str)],
) {
    sqlx::query("INSERT INTO phrases (id, text, language_code) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(text)
        .bind(language)
        .execute(&mut *db)
        .await
        .unwrap();
    for (language, text) in translations {
        sqlx::query(
            "INSERT INTO phrase_translations (phrase_id, language_code, text) VALUES ($1, $2, $3)",
        )
        .bind(id)
        .bind(language)
        .bind(text)
        .execute(&mut *db)
        .await
        .unwrap();
    }
}

/// The ids of the first page (limit 100) of a search.
async fn found(app: &TestApp, query: &str) -> Vec<String> {
    let response = app
        .get(&format!("/v1/lingo/phrases?limit=100&{query}"), None)
        .await;
    assert_eq!(response.status(), 200, "{query}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["next_offset"], Value::Null, "{query}: one page");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|phrase| phrase["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn small_catalogue() -> TestApp {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    let where_station = [
        ("en", "Where is the station?"),
        ("de", "Wo ist der Bahnhof?"),
    ];
    add_phrase(
        &mut db,
        "es-1",
        "es",
        "¿Dónde está la estación?",
        &where_station,
    )
    .await;
    add_phrase(&mut db, "es-2", "es", "Está bien", &[("en", "It is fine")]).await;
    let closed = [("en", "The station is closed")];
    add_phrase(&mut db, "es-3", "es", "La estación está cerrada", &closed).await;
    let morning = [("en", "Good morning"), ("de", "Guten Morgen")];
    add_phrase(&mut db, "es-4", "es", "Buenos días", &morning).await;
    let bathroom = [("es", "¿Dónde está el baño?")];
    add_phrase(&mut db, "en-1", "en", "Where is the bathroom?", &bathroom).await;
    add_phrase(&mut db, "de-1", "de", "STRASSE", &[("en", "Street")]).await;
    add_phrase(&mut db, "de-2", "de", "Straße zum Bahnhof", &[]).await;
    app
}

#[tokio::test]
async fn search_ignores_case_and_accents_needs_every_word_and_types_ahead() {
    let app = small_catalogue().await;
    let cases: [(&str, &[&str]); 16] = [
        // Accents and case, both ways round.
        ("q=donde esta", &["es-1", "en-1"]),
        ("q=DÓNDE  ESTÁ", &["es-1", "en-1"]),
        ("q=%C2%BFd%C3%B3nde%20est%C3%A1%3F", &["es-1", "en-1"]),
        ("q=ESTACIÓN", &["es-1", "es-3"]),
        ("q=straße", &["de-1", "de-2"]),
        // Every word must match; the last one also as a prefix, the others only whole.
        ("q=donde xyz", &[]),
        ("q=estac", &["es-1", "es-3"]),
        ("q=est bien", &[]),
        ("q=bien est", &["es-2"]),
        ("q=  buenos   d  ", &["es-4"]),
        // Translations match too, and words may come from the text and a translation.
        ("q=station", &["es-1", "es-3"]),
        ("q=bahnhof", &["de-2", "es-1"]),
        ("q=donde bahnhof", &["es-1"]),
        ("q=good morn", &["es-4"]),
        // A `q` with no word in it matches nothing.
        ("q=%C2%BF%3F!", &[]),
        ("q=-", &[]),
    ];
    for (query, expected) in cases {
        assert_eq!(found(&app, query).await, expected, "{query}");
    }
}

/// "every word must match": a word ends at any white space, not only ASCII's (French text puts a
/// no-break space before `?`; a `q` may come with an ideographic space from an Asian keyboard),
/// and a word in guillemets (which unaccent writes as `<<` `>>`, markup to PostgreSQL's parser)
/// is a word.
#[tokio::test]
async fn every_white_space_ends_a_word_and_quoted_words_count() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    sqlx::raw_sql("INSERT INTO languages (code, name) VALUES ('fr', 'French')")
        .execute(&mut db)
        .await
        .unwrap();
    add_phrase(&mut db, "fr-1", "fr", "Comment ça va\u{A0}?", &[]).await;
    add_phrase(&mut db, "fr-2", "fr", "Où est la gare\u{202F}?", &[]).await;
    add_phrase(
        &mut db,
        "es-1",
        "es",
        "Él dijo «hola»",
        &[("en", "He said ‹hi›")],
    )
    .await;
    add_phrase(&mut db, "es-2", "es", "Buenos días", &[]).await;
    let cases: [(&str, &[&str]); 8] = [
        ("q=ca va comment", &["fr-1"]),
        ("q=va", &["fr-1"]),
        ("q=gare la", &["fr-2"]),
        ("q=hola", &["es-1"]),
        ("q=hi said", &["es-1"]),
        ("q=buenos%E3%80%80dias", &["es-2"]),
        ("q=buenos%C2%A0d", &["es-2"]),
        ("q=%C2%ABbuenos%C2%BB", &["es-2"]),
    ];
    for (query, expected) in cases {
        assert_eq!(found(&app, query).await, expected, "{query}");
    }
}

/// The row version (`xmin`) of `phrase_id`'s search document: unchanged when no statement wrote
/// it since.
async fn search_row_version(owner: &mut PgConnection, phrase_id: &str) -> String {
    sqlx::query_scalar("SELECT xmin::text FROM phrase_search WHERE phrase_id = $1")
        .bind(phrase_id)
        .fetch_one(owner)
        .await
        .unwrap()
}

/// Migration 20261130100001 computes again the stored documents its folding changes, and only
/// those: run over documents stored with the folding before it, a phrase with a no-break space
/// or guillemets (in its text or a translation) is found by its words afterwards.
#[tokio::test]
async fn the_unicode_spaces_migration_refolds_the_documents_it_changes() {
    let app = spawn_app_unseeded().await;
    let mut owner = connect_one(&app.db.url_for("lingo_owner")).await.unwrap();
    sqlx::raw_sql(
        "CREATE OR REPLACE FUNCTION search_fold(input text) RETURNS text \
             LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE \
             RETURN translate(lower(public.unaccent('public.unaccent'::regdictionary, input) \
                 COLLATE pg_catalog.\"und-x-icu\"), './@:', '    ')",
    )
    .execute(&mut owner)
    .await
    .unwrap();
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    add_phrase(&mut db, "es-1", "es", "Él dijo «hola»", &[]).await;
    add_phrase(
        &mut db,
        "es-2",
        "es",
        "Buenos días",
        &[("en", "Good\u{A0}morning")],
    )
    .await;
    add_phrase(&mut db, "es-3", "es", "Hasta luego", &[]).await;
    assert!(found(&app, "q=hola").await.is_empty(), "folded the old way");
    assert!(found(&app, "q=good morning").await.is_empty());
    // The row version of a document the folding leaves alone: not written again.
    let before = search_row_version(&mut owner, "es-3").await;

    let migration =
        include_str!("../../migrations/20261130100001_phrase_search_unicode_spaces.sql");
    sqlx::raw_sql(migration).execute(&mut owner).await.unwrap();

    assert_eq!(found(&app, "q=hola").await, ["es-1"]);
    assert_eq!(found(&app, "q=good morning").await, ["es-2"]);
    assert_eq!(
        search_row_version(&mut owner, "es-3").await,
        before,
        "a document the folding leaves alone is not written"
    );
}

async fn add_greek(db: &mut PgConnection) {
    sqlx::raw_sql("INSERT INTO languages (code, name) VALUES ('el', 'Greek')")
        .execute(db)
        .await
        .unwrap();
}

/// Greek's final sigma `ς` is the letter `σ`: lower-casing writes a capital `Σ` as `ς` at the end
/// of a word and as `σ` inside one, and a learner types a word's last `σ` as `ς` or not. "ΟΔΟΣ",
/// "οδός" and `οδοσ` are one word, in the text and in translations, whole and as the last word's
/// prefix (`οδος`, typed with its final letter, begins "ΟΔΟΣΤΡΩΜΑ").
#[tokio::test]
async fn a_final_sigma_is_a_sigma() {
    let app = spawn_app_unseeded().await;
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    add_greek(&mut db).await;
    add_phrase(&mut db, "el-1", "el", "ΟΔΟΣ", &[]).await;
    add_phrase(&mut db, "el-2", "el", "Η οδός", &[]).await;
    add_phrase(&mut db, "el-3", "el", "ΟΔΟΣΤΡΩΜΑ", &[]).await;
    let stadiou = [("el", "Οδός Σταδίου")];
    add_phrase(&mut db, "en-1", "en", "Stadiou Street", &stadiou).await;
    let every_spelling = ["el-1", "el-2", "el-3", "en-1"];
    let cases: [(&str, &[&str]); 8] = [
        ("q=οδοσ", &every_spelling),
        ("q=οδος", &every_spelling),
        ("q=οδός", &every_spelling),
        ("q=ΟΔΟΣ", &every_spelling),
        ("q=Οδός", &every_spelling),
        ("q=οδος σταδιου", &["en-1"]),
        ("q=ΟΔΟΣ ΣΤΑΔ", &["en-1"]),
        ("q=σταδιου οδος", &["en-1"]),
    ];
    for (query, expected) in cases {
        assert_eq!(found(&app, query).await, expected, "{query}");
    }
}

/// Migration 20261130200001 folds `ς` as `σ` and computes again the stored documents that
/// change, and only those: run over documents stored with the folding before it, a phrase whose
/// text or translation holds `Σ` or `ς` is found by `σ` afterwards.
#[tokio::test]
async fn the_final_sigma_migration_refolds_the_documents_it_changes() {
    let app = spawn_app_unseeded().await;
    let mut owner = connect_one(&app.db.url_for("lingo_owner")).await.unwrap();
    let folding_before =
        include_str!("../../migrations/20261130100001_phrase_search_unicode_spaces.sql");
    let definition_before = folding_before
        .split_once("CREATE OR REPLACE FUNCTION search_fold")
        .and_then(|(_, rest)| rest.split_once(";\n"))
        .map(|(body, _)| format!("CREATE OR REPLACE FUNCTION search_fold{body}"))
        .unwrap();
    sqlx::raw_sql(&definition_before)
        .execute(&mut owner)
        .await
        .unwrap();
    let mut db = pipeline(&app).await;
    add_languages(&mut db).await;
    add_greek(&mut db).await;
    add_phrase(&mut db, "el-1", "el", "ΟΔΟΣ", &[]).await;
    add_phrase(&mut db, "en-1", "en", "The street", &[("el", "Η οδός")]).await;
    add_phrase(&mut db, "es-3", "es", "Hasta luego", &[]).await;
    assert!(found(&app, "q=οδοσ").await.is_empty(), "folded the old way");
    let before = search_row_version(&mut owner, "es-3").await;

    let migration = include_str!("../../migrations/20261130200001_phrase_search_final_sigma.sql");
    sqlx::raw_sql(migration).execute(&mut owner).await.unwrap();

    assert_eq!(found(&app, "q=οδοσ").await, ["el-1", "en-1"]);
    assert_eq!(
        search_row_version(&mut owner, "es-3").await,
        before,
        "a document the folding leaves alone is not written"
    );
}

#[tokio::test]
async fn best_match_first_and_language_still_filters() {
    let app = small_catalogue().await;
    // Whole words of the phrase's own text first, shorter texts first (then by id), then a
    // match through a translation.
    assert_eq!(
        found(&app, "q=esta").await,
        ["es-2", "es-1", "es-3", "en-1"]
    );
    // "bahnhof" is a whole word of de-2's text, and only of es-1's translation.
    assert_eq!(found(&app, "q=bahnhof").await, ["de-2", "es-1"]);
    // A whole word of the text before a prefix of the text before a translation.
    let mut db = pipeline(&app).await;
    add_phrase(&mut db, "es-5", "es", "La estacionalidad", &[]).await;
    add_phrase(&mut db, "es-6", "es", "Hola", &[("en", "Estación hello")]).await;
    assert_eq!(
        found(&app, "q=estacion").await,
        ["es-1", "es-3", "es-5", "es-6"],
        "es-5 only by prefix, es-6 only through its translation"
    );
    assert_eq!(found(&app, "q=la estacion").await, ["es-1", "es-3", "es-5"]);

    assert_eq!(found(&app, "q=esta&language=en").await, ["en-1"]);
    assert_eq!(
        found(&app, "q=esta&language=de").await,
        Vec::<String>::new()
    );
    assert_eq!(
        found(&app, "q=esta&language=xx").await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn the_search_follows_the_pipelines_writes() {
    let app = small_catalogue().await;
    let mut db = pipeline(&app).await;
    assert_eq!(found(&app, "q=fahrkarte").await, Vec::<String>::new());
    sqlx::raw_sql(
        "INSERT INTO phrase_translations (phrase_id, language_code, text) \
         VALUES ('es-2', 'de', 'Eine Fahrkarte, bitte')",
    )
    .execute(&mut db)
    .await
    .unwrap();
    assert_eq!(found(&app, "q=fahrkarte").await, ["es-2"]);
    sqlx::raw_sql("UPDATE phrase_translations SET phrase_id = 'es-3' WHERE text LIKE 'Eine%'")
        .execute(&mut db)
        .await
        .unwrap();
    assert_eq!(found(&app, "q=fahrkarte").await, ["es-3"]);
    sqlx::raw_sql("DELETE FROM phrase_translations WHERE text LIKE 'Eine%'")
        .execute(&mut db)
        .await
        .unwrap();
    assert_eq!(found(&app, "q=fahrkarte").await, Vec::<String>::new());
    sqlx::raw_sql("UPDATE phrases SET text = 'Todo bien', language_code = 'de' WHERE id = 'es-2'")
        .execute(&mut db)
        .await
        .unwrap();
    assert_eq!(found(&app, "q=todo").await, ["es-2"]);
    assert_eq!(found(&app, "q=todo&language=de").await, ["es-2"]);
    assert_eq!(
        found(&app, "q=todo&language=es").await,
        Vec::<String>::new()
    );
    sqlx::raw_sql("DELETE FROM phrases WHERE id = 'es-2'")
        .execute(&mut db)
        .await
        .unwrap();
    assert_eq!(found(&app, "q=todo").await, Vec::<String>::new());
}

#[tokio::test]
async fn a_search_answers_a_page_and_refuses_an_empty_or_long_q() {
    let app = small_catalogue().await;
    let response = app.get("/v1/lingo/phrases?q=esta&limit=2", None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(keys(&body), cursor_page_keys());
    assert_eq!(
        (body["count"].as_i64(), body["next_offset"].as_i64()),
        (Some(2), Some(2))
    );
    assert_eq!(keys(&body["data"][0]), phrase_item_keys());
    assert_eq!(body["data"][0]["text"], "Está bien");
    assert_eq!(body["data"][0]["translation_count"], 1);
    let second: Value = app
        .get("/v1/lingo/phrases?q=esta&limit=2&offset=2", None)
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = second["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["es-3", "en-1"]);
    assert_eq!(second["next_offset"], Value::Null);

    let hundred = "é".repeat(100);
    assert_eq!(
        found(&app, &format!("q=%20{hundred}%20")).await,
        Vec::<String>::new()
    );
    for query in [
        "q=",
        "q=%20%20",
        "q=%09%0A",
        &format!("q={hundred}e"),
        "q=a%00b",
    ] {
        let response = app.get(&format!("/v1/lingo/phrases?{query}"), None).await;
        assert_problem(response, 400, "invalid_query").await;
    }
}

/// Contract fuzzing sent `q` values the document allowed (a white-space-only `q`, a `q` with a
/// NUL) and the service refused with 400: the document's `q` must refuse them too, as news
/// search's does, so a schema-valid search is never refused; and a `q` the service takes (100
/// characters with white space around) must be one the document admits.
#[tokio::test]
async fn the_document_refuses_the_q_the_search_refuses() {
    let app = small_catalogue().await;
    let document: Value = app
        .get("/v1/lingo/openapi.json", None)
        .await
        .json()
        .await
        .unwrap();
    let parameters = document["paths"]["/v1/lingo/phrases"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let q = parameters.iter().find(|p| p["name"] == "q").unwrap();
    let blank = whitespace_class();
    let expected =
        format!("^[{blank}]*[^\\u0000{blank}](?:[^\\u0000]{{0,98}}[^\\u0000{blank}])?[{blank}]*$");
    assert_eq!(q["schema"]["pattern"], expected.as_str());
    // The white space around `q` does not count: no `maxLength`, and the service agrees.
    assert!(q["schema"]["maxLength"].is_null());
    let longest = "a".repeat(100);
    let padded = app
        .get(&format!("/v1/lingo/phrases?q=%20%20{longest}%0A"), None)
        .await;
    assert_eq!(padded.status(), 200);
    let over = app
        .get(&format!("/v1/lingo/phrases?q={longest}a"), None)
        .await;
    assert_problem(over, 400, "invalid_query").await;
    // The pattern's class is what the service trims: a `q` of any one of them alone is refused.
    for blank in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
        if !blank.is_whitespace() {
            continue;
        }
        let mut bytes = [0; 4];
        let encoded: String = blank
            .encode_utf8(&mut bytes)
            .bytes()
            .map(|b| format!("%{b:02X}"))
            .collect();
        let response = app
            .get(&format!("/v1/lingo/phrases?q={encoded}"), None)
            .await;
        assert_problem(response, 400, "invalid_query").await;
    }
}
