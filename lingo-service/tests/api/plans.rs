//! The paged lists and the phrase search read a range of an index, never sort the whole set: the
//! plans of the statements the service runs (their text taken from the checked-query data in
//! `.sqlx/`, which CI keeps equal to the source), with custom and with generic plans, on tables
//! large enough for the planner to choose.

use lingo_service::db::connect_one;
use sqlx::PgConnection;

use crate::helpers::{TestApp, spawn_app};

/// The text of the one checked statement that contains `marker`.
fn statement(marker: &str) -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/.sqlx");
    let found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .map(|text| serde_json::from_str::<serde_json::Value>(&text).unwrap())
        .filter_map(|data| data["query"].as_str().map(str::to_owned))
        .filter(|query| query.contains(marker))
        .collect();
    assert_eq!(found.len(), 1, "one statement contains {marker:?}");
    found.into_iter().next().unwrap()
}

async fn fill(app: &TestApp) {
    let mut admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO lingo.phrases (id, text, language_code) \
           SELECT 'bulk-' || lpad(g::text, 6, '0'), 'frase ' || md5(g::text), \
                  (ARRAY['es', 'fr', 'de'])[g % 3 + 1] \
           FROM generate_series(1, 30000) g; \
         INSERT INTO lingo.phrase_translations (phrase_id, language_code, text) \
           SELECT id, 'en', 'phrase ' || substr(md5(id), 1, 6) FROM lingo.phrases \
           WHERE id LIKE 'bulk-%'; \
         INSERT INTO lingo.study_sessions (id, learner_id, language_code, duration_seconds, \
             phrases_seen, phrases_correct, xp_awarded, created_at, studied_at) \
           SELECT gen_random_uuid(), 'learner-' || (g % 300), 'es', 60, 1, 1, 11, \
                  now() - g * interval '1 minute', now() - g * interval '1 minute' \
           FROM generate_series(1, 30000) g; \
         INSERT INTO lingo.phrase_recommendations (learner_id, phrase_id, score, generated_at) \
           SELECT 'learner-' || (g % 300), 'bulk-' || lpad(g::text, 6, '0'), (g % 97) / 97.0, \
                  now() \
           FROM generate_series(1, 30000) g; \
         ANALYZE lingo.phrases, lingo.phrase_translations, lingo.phrase_search, \
           lingo.study_sessions, lingo.phrase_recommendations, lingo.phrase_stats_cache;",
    )
    .execute(&mut admin)
    .await
    .unwrap();
}

/// The plan of `sql` run by the service's role with `arguments`, with a custom and with a
/// generic plan.
async fn plans(runtime: &mut PgConnection, sql: &str, arguments: &str) -> Vec<String> {
    sqlx::raw_sql(&format!("DEALLOCATE ALL; PREPARE listed AS {sql}"))
        .execute(&mut *runtime)
        .await
        .unwrap();
    let mut plans = Vec::new();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        sqlx::raw_sql(&format!("SET plan_cache_mode = {mode}"))
            .execute(&mut *runtime)
            .await
            .unwrap();
        let lines: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN EXECUTE listed({arguments})"))
                .fetch_all(&mut *runtime)
                .await
                .unwrap();
        plans.push(lines.join("\n"));
    }
    plans
}

/// The plan reads one of `indexes` with a condition on `key` (the keyset bound is part of the
/// range, not a filter over rows read), reads no table whole, and sorts nothing.
fn assert_range_scan(plan: &str, indexes: &[&str], key: &str) {
    let index = indexes
        .iter()
        .find(|index| plan.contains(&format!("Index Scan using {index}")))
        .unwrap_or_else(|| panic!("none of {indexes:?} is read: {plan}"));
    let condition = plan
        .lines()
        .skip_while(|line| !line.contains(index))
        .find(|line| line.contains("Index Cond"))
        .unwrap_or_default();
    assert!(
        condition.contains(key),
        "{key} in the index condition: {plan}"
    );
    assert!(!plan.contains("Sort"), "{plan}");
    for table in ["phrases", "study_sessions", "phrase_recommendations"] {
        assert!(!plan.contains(&format!("Seq Scan on {table} ")), "{plan}");
    }
}

#[tokio::test]
async fn every_list_reads_an_index_range_and_the_search_its_gin_index() {
    let app = spawn_app().await;
    fill(&app).await;
    let mut runtime = connect_one(&app.db.url_for("lingo_app")).await.unwrap();

    let phrases = statement("WHERE p.id > $1");
    for plan in plans(&mut runtime, &phrases, "'bulk-012345', 21, 0").await {
        assert_range_scan(&plan, &["phrases_pkey"], "id");
    }
    let phrases_in = statement("WHERE p.language_code = $1 AND p.id > $2");
    // Either index keeps the order: which one is the planner's choice of the filter's selectivity.
    for plan in plans(&mut runtime, &phrases_in, "'es', 'bulk-012345', 21, 0").await {
        assert_range_scan(
            &plan,
            &["phrases_language_code_id_idx", "phrases_pkey"],
            "id",
        );
    }
    let sessions = statement("(created_at, id) < (coalesce(");
    let arguments = "'learner-7', now() - interval '1 week', \
                     'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid, 21, 0";
    for plan in plans(&mut runtime, &sessions, arguments).await {
        assert_range_scan(&plan, &["study_sessions_learner_idx"], "created_at");
    }
    let first_page = "'learner-7', NULL::timestamptz, NULL::uuid, 21, 0";
    for plan in plans(&mut runtime, &sessions, first_page).await {
        assert_range_scan(&plan, &["study_sessions_learner_idx"], "learner_id");
    }
    let recommendations = statement("(r.score < $2 OR r.phrase_id > $3)");
    for arguments in [
        "'learner-7', 0.5, 'bulk-000100', 21, 0",
        "'learner-7', 'NaN', '', 21, 0",
    ] {
        for plan in plans(&mut runtime, &recommendations, arguments).await {
            assert_range_scan(&plan, &["phrase_recommendations_rank_idx"], "score");
        }
    }

    // The search reads its matches from the GIN index (then ranks those, and only those).
    let search = statement("FROM phrase_search ps");
    for arguments in [
        "'phrase abc', NULL, -1, -1, '', 21, 0",
        "'fra', 'es', 1, 20, 'bulk-000003', 21, 0",
    ] {
        for plan in plans(&mut runtime, &search, arguments).await {
            assert!(
                plan.contains("Bitmap Index Scan on phrase_search_everything_idx"),
                "{plan}"
            );
            assert!(!plan.contains("Seq Scan on phrase_search"), "{plan}");
            assert!(!plan.contains("Seq Scan on phrases "), "{plan}");
        }
    }
}
