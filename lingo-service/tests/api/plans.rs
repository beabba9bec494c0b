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

/// 30,000 phrases: each text has a word all share, one of about a thousand words, and one of its
/// own, so the search's statistics look like a real catalogue's (many common words).
async fn fill(app: &TestApp) {
    let mut admin = app.admin().await;
    sqlx::raw_sql(
        "INSERT INTO lingo.phrases (id, text, language_code) \
           SELECT 'bulk-' || lpad(g::text, 6, '0'), 'frase w' || g % 997 || ' ' || md5(g::text), \
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
async fn every_list_reads_an_index_range_and_the_search_reads_its_tiers_by_index() {
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

    // The search reads one tier at a time, with a custom plan (the store sets
    // `force_custom_plan`): a frequent word walks a rank index in order (no sort) until the
    // page is full, a rare one is read from a GIN index; never a scan of every search row.
    let tiers = [
        statement("WHERE ps.own @@ search_query($1, false)"),
        statement("WHERE ps.own @@ search_query($1, true) AND NOT"),
        statement("WHERE ps.everything @@ search_query($1, false)"),
        statement("WHERE ps.everything @@ search_query($1, true)"),
    ];
    let walks = [
        // "fra" is the start of every phrase's first word ("frase"): tier 1.
        (1, "'fra', NULL, -1, '', 21", "phrase_search_rank_idx"),
        (
            1,
            "'fra', 'es', -1, '', 21",
            "phrase_search_language_rank_idx",
        ),
        // After a cursor in the tier: the keyset bound is the index range's start.
        (
            1,
            "'fra', NULL, 42, 'bulk-012345', 21",
            "phrase_search_rank_idx",
        ),
        // "phr" only through the translations ("phrase ..."): tier 3.
        (3, "'phr', NULL, -1, '', 21", "phrase_search_rank_idx"),
    ];
    for (tier, arguments, index) in walks {
        let plan = custom_plan(&mut runtime, &tiers[tier], arguments).await;
        assert!(plan.contains(&format!("Scan using {index}")), "{plan}");
        let condition = plan.lines().find(|line| line.contains("Index Cond"));
        assert!(
            condition.unwrap_or_default().contains("text_length"),
            "{plan}"
        );
        assert!(!plan.contains("Sort"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
    let phrase_7 = "'frase 8f14e45fceea167a5a36dedd4bea2543'"; // md5('7')
    let lookups = [
        (
            0,
            format!("{phrase_7}, NULL, -1, '', 21"),
            "phrase_search_own_idx",
        ),
        (
            1,
            format!("{phrase_7}, 'es', -1, '', 21"),
            "phrase_search_own_idx",
        ),
        (
            2,
            "'phrase 8f14e4', NULL, -1, '', 21".into(),
            "phrase_search_everything_idx",
        ),
        (
            3,
            "'phrase 8f14', NULL, -1, '', 21".into(),
            "phrase_search_everything_idx",
        ),
    ];
    for (tier, arguments, index) in lookups {
        let plan = custom_plan(&mut runtime, &tiers[tier], &arguments).await;
        assert!(
            plan.contains(&format!("Bitmap Index Scan on {index}")),
            "{plan}"
        );
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
    // The page's rows are then read by their ids.
    let items = statement("WHERE p.id = ANY($1::text[])");
    for plan in plans(&mut runtime, &items, "ARRAY['bulk-000001', 'bulk-000002']").await {
        assert!(plan.contains("phrases_pkey"), "{plan}");
        assert!(!plan.contains("Seq Scan on phrases "), "{plan}");
    }
}

/// The custom plan of `sql` run by the service's role with `arguments`.
async fn custom_plan(runtime: &mut PgConnection, sql: &str, arguments: &str) -> String {
    plans(runtime, sql, arguments).await.swap_remove(0)
}
