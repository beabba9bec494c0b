//! The paged lists and the phrase search read a range of an index, never sort the whole set: the
//! plans of the statements the service runs (their text taken from the checked-query data in
//! `.sqlx/`, which CI keeps equal to the source), with custom and with generic plans, on tables
//! large enough for the planner to choose.

use lingo_service::db::connect_one;
use lingo_service::store::phrases::SEARCH;
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

    search_reads_its_tiers_in_order_by_index(&mut runtime).await;
}

/// The search statement, planned with its values as the store runs it (an unnamed statement:
/// a custom plan): the tiers are the `Append`'s branches in order; a frequent word walks a rank
/// index in order (no sort) and the tiers after the full page are never executed, a rare one is
/// read from a GIN index; never a scan of every search row, and the page's rows by their ids.
async fn search_reads_its_tiers_in_order_by_index(runtime: &mut PgConnection) {
    // "fra" is the start of every phrase's first word ("frase"): tier 1, after an empty tier 0.
    let walks = [
        ("'fra', NULL, 0, -1, '', 21, 0", "phrase_search_rank_idx"),
        (
            "'fra', 'es', 0, -1, '', 21, 0",
            "phrase_search_language_rank_idx",
        ),
        // After a cursor in the tier: the keyset bound is the index range's start.
        (
            "'fra', NULL, 1, 42, 'bulk-012345', 21, 0",
            "phrase_search_rank_idx",
        ),
        // With an offset, the walk reads the skipped rows too, and no more.
        ("'fra', NULL, 0, -1, '', 21, 40", "phrase_search_rank_idx"),
        // "phr" only through the translations ("phrase ..."): tier 3.
        ("'phr', NULL, 0, -1, '', 21, 0", "phrase_search_rank_idx"),
    ];
    for (arguments, index) in walks {
        let plan = analyzed_plan(runtime, arguments).await;
        let tiers = tiers(&plan);
        let walked = tiers
            .iter()
            .position(|tier| !nodes(tier, &format!("Index Name={index}")).is_empty())
            .unwrap_or_else(|| panic!("{index} is walked: {plan:#}"));
        let walk = &tiers[walked];
        assert!(executed(walk), "{plan:#}");
        let scan = &nodes(walk, &format!("Index Name={index}"))[0];
        assert!(
            scan["Index Cond"]
                .as_str()
                .unwrap_or_default()
                .contains("text_length"),
            "{plan:#}"
        );
        assert!(nodes(walk, "Node Type=Sort").is_empty(), "{plan:#}");
        // The page is full: no later tier is read.
        for later in &tiers[walked + 1..] {
            assert!(!executed(later), "{plan:#}");
        }
        assert_reads_no_table_whole(&plan);
    }

    // Rare words: a lookup in a GIN index, and only those few matches sorted; the page is not
    // full, so every tier is read.
    let phrase_7 = "'frase 8f14e45fceea167a5a36dedd4bea2543'"; // md5('7')
    let lookups = [
        (
            0,
            format!("{phrase_7}, NULL, 0, -1, '', 21, 0"),
            "phrase_search_own_idx",
        ),
        (
            1,
            format!("{phrase_7}, 'es', 0, -1, '', 21, 0"),
            "phrase_search_own_idx",
        ),
        (
            2,
            "'phrase 8f14e4', NULL, 0, -1, '', 21, 0".into(),
            "phrase_search_everything_idx",
        ),
        (
            3,
            "'phrase 8f14', NULL, 0, -1, '', 21, 0".into(),
            "phrase_search_everything_idx",
        ),
    ];
    for (tier, arguments, index) in lookups {
        let plan = analyzed_plan(runtime, &arguments).await;
        let tiers = tiers(&plan);
        assert_eq!(tiers.len(), 4, "{plan:#}");
        assert!(tiers.iter().all(executed), "{plan:#}");
        let lookup = nodes(&tiers[tier], "Node Type=Bitmap Index Scan");
        assert!(
            lookup.iter().any(|scan| scan["Index Name"] == index),
            "{index} in tier {tier}: {plan:#}"
        );
        assert_reads_no_table_whole(&plan);
    }
}

/// The plan, with what each node did, of the search statement run by the service's role with
/// `arguments` and planned with them (as an unnamed statement is).
async fn analyzed_plan(runtime: &mut PgConnection, arguments: &str) -> serde_json::Value {
    sqlx::raw_sql(&format!(
        "DEALLOCATE ALL; SET plan_cache_mode = force_custom_plan; PREPARE search AS {SEARCH}"
    ))
    .execute(&mut *runtime)
    .await
    .unwrap();
    let plan: serde_json::Value = sqlx::query_scalar(&format!(
        "EXPLAIN (ANALYZE, COSTS OFF, FORMAT JSON) EXECUTE search({arguments})"
    ))
    .fetch_one(&mut *runtime)
    .await
    .unwrap();
    plan[0]["Plan"].clone()
}

/// The branches of the plan's `Append`, one per tier read, in tier order.
fn tiers(plan: &serde_json::Value) -> Vec<serde_json::Value> {
    let append = nodes(plan, "Node Type=Append");
    assert_eq!(append.len(), 1, "one Append: {plan:#}");
    append[0]["Plans"].as_array().unwrap().clone()
}

/// The nodes of `plan` (itself included) whose `field=value` is `condition`.
fn nodes(plan: &serde_json::Value, condition: &str) -> Vec<serde_json::Value> {
    let (field, value) = condition.split_once('=').unwrap();
    let mut found = Vec::new();
    if plan[field] == value {
        found.push(plan.clone());
    }
    for child in plan["Plans"].as_array().into_iter().flatten() {
        found.extend(nodes(child, condition));
    }
    found
}

fn executed(plan: &serde_json::Value) -> bool {
    plan["Actual Loops"].as_u64().unwrap() > 0
}

/// No search row or phrase is read by a sequential scan (the page's rows by their primary key),
/// and no parallel plan (whose `Append` would not keep the tiers' order).
fn assert_reads_no_table_whole(plan: &serde_json::Value) {
    for scan in nodes(plan, "Node Type=Seq Scan") {
        let table = scan["Relation Name"].as_str().unwrap_or_default();
        assert!(!["phrase_search", "phrases"].contains(&table), "{plan:#}");
    }
    assert!(nodes(plan, "Node Type=Gather").is_empty(), "{plan:#}");
    assert!(
        !nodes(plan, "Index Name=phrases_pkey").is_empty(),
        "{plan:#}"
    );
}
