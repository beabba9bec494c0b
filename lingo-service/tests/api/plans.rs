//! The paged lists and the phrase search read a range of an index, never sort the whole set: the
//! plans of the statements the service runs (their text taken from the checked-query data in
//! `.sqlx/`, which CI keeps equal to the source), with custom and with generic plans, on tables
//! large enough for the planner to choose.

use std::sync::{Arc, Mutex};

use lingo_service::db::connect_one;
use sqlx::PgConnection;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

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

    let phrases = statement("WHERE p.id > (SELECT $1::text)");
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

    search_reads_its_tiers_in_order_by_index(&app, &mut runtime).await;
}

/// The search as the service runs it, every statement's plan logged with what it did
/// (`auto_explain`, nested statements included): the statement of the store reads the ranked
/// page from `phrase_search_ranks` and only its rows from `phrases` by primary key; the
/// function's tiers are statements of their own, run in tier order, each planned with the
/// search's words. A frequent word walks a rank index in order (no sort) and no tier after the
/// full page is planned or run; a rare one is read from a GIN index.
async fn search_reads_its_tiers_in_order_by_index(app: &TestApp, runtime: &mut PgConnection) {
    let search = statement("phrase_search_ranks(");
    // The store's statement itself, with a custom and with a generic plan (the connection keeps
    // the prepared statement, so after a few runs PostgreSQL may use the generic one).
    for plan in plans(runtime, &search, "'fra', NULL, 0, -1, '', 21, 0").await {
        assert!(
            plan.contains("Function Scan on phrase_search_ranks"),
            "{plan}"
        );
        assert!(plan.contains("Index Scan using phrases_pkey"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }

    let mut logged = logged_plans(app, &search).await;
    // "fra" is the start of every phrase's first word ("frase"): tier 1, after an empty tier 0.
    // (arguments, the tiers read, the index walked by the last one)
    let walks = [
        (
            "'fra', NULL, 0, -1, '', 21, 0",
            0..=1,
            "phrase_search_rank_idx",
        ),
        (
            "'fra', 'es', 0, -1, '', 21, 0",
            0..=1,
            "phrase_search_language_rank_idx",
        ),
        // After a cursor in tier 1: the tiers before it are not read, and the keyset bound is
        // the index range's start.
        (
            "'fra', NULL, 1, 42, 'bulk-012345', 21, 0",
            1..=1,
            "phrase_search_rank_idx",
        ),
        // With an offset, the walk reads the skipped rows too, and no more.
        (
            "'fra', NULL, 0, -1, '', 21, 40",
            0..=1,
            "phrase_search_rank_idx",
        ),
        // "phr" only through the translations ("phrase ..."): tier 3.
        (
            "'phr', NULL, 0, -1, '', 21, 0",
            0..=3,
            "phrase_search_rank_idx",
        ),
    ];
    for (arguments, read, index) in walks {
        let (page, tiers) = logged.run(arguments).await;
        assert_reads_the_page_by_id(&page);
        // The tiers from the cursor's to the one that filled the page, and no later one.
        assert_eq!(tiers.len(), read.count(), "{tiers:#?}");
        let walk = tiers.last().unwrap();
        let scan = nodes(walk, &format!("Index Name={index}"));
        assert_eq!(scan.len(), 1, "{index} is walked: {walk:#}");
        assert!(
            scan[0]["Index Cond"]
                .as_str()
                .unwrap_or_default()
                .contains("text_length"),
            "{walk:#}"
        );
        assert!(nodes(walk, "Node Type=Sort").is_empty(), "{walk:#}");
        // It stopped with the page full (its rows, the offset's included).
        let offset: u64 = arguments.rsplit(", ").next().unwrap().parse().unwrap();
        assert_eq!(walk["Actual Rows"].as_u64(), Some(21 + offset), "{walk:#}");
        for tier in &tiers {
            assert_reads_no_table_whole(tier);
        }
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
        let (page, tiers) = logged.run(&arguments).await;
        assert_reads_the_page_by_id(&page);
        assert_eq!(tiers.len(), 4, "{tiers:#?}");
        let lookup = nodes(&tiers[tier], "Node Type=Bitmap Index Scan");
        assert!(
            lookup.iter().any(|scan| scan["Index Name"] == index),
            "{index} in tier {tier}: {tiers:#?}"
        );
        for tier in &tiers {
            assert_reads_no_table_whole(tier);
        }
    }
}

/// A session of the service's role that runs `statement` with `auto_explain` logging the plan
/// of every statement it runs, nested ones included, with what each node did, as notices.
struct LoggedPlans {
    connection: PgConnection,
    notices: Notices,
}

async fn logged_plans(app: &TestApp, statement: &str) -> LoggedPlans {
    // Loading the module and its settings need a superuser; the statement then runs as the
    // service's role (whose search_path SET ROLE does not apply).
    let mut connection = app.admin().await;
    sqlx::raw_sql(&format!(
        "LOAD 'auto_explain'; \
         SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; \
         SET auto_explain.log_timing = off; SET auto_explain.log_nested_statements = on; \
         SET auto_explain.log_format = json; SET auto_explain.log_level = notice; \
         SET ROLE lingo_app; SET search_path = lingo; \
         PREPARE search AS {statement}"
    ))
    .execute(&mut connection)
    .await
    .unwrap();
    LoggedPlans {
        connection,
        notices: Notices::default(),
    }
}

impl LoggedPlans {
    /// Runs the search with `arguments`: the plan of the store's statement, and those of the
    /// tiers that were run, in the order they ran (the plans that read `phrase_search`).
    async fn run(&mut self, arguments: &str) -> (serde_json::Value, Vec<serde_json::Value>) {
        let execute = format!("EXECUTE search({arguments})");
        let subscriber = tracing_subscriber::registry().with(self.notices.clone());
        let guard = tracing::subscriber::set_default(subscriber);
        sqlx::raw_sql(&execute)
            .execute(&mut self.connection)
            .await
            .unwrap();
        drop(guard);
        let plans: Vec<serde_json::Value> = self
            .notices
            .take()
            .iter()
            .filter_map(|notice| notice.split_once("plan:"))
            .map(|(_, plan)| serde_json::from_str::<serde_json::Value>(plan).unwrap())
            .map(|logged| logged["Plan"].clone())
            .collect();
        let (page, tiers): (Vec<_>, Vec<_>) = plans
            .into_iter()
            .filter(|plan| {
                !nodes(plan, "Relation Name=phrase_search").is_empty()
                    || !nodes(plan, "Function Name=phrase_search_ranks").is_empty()
            })
            .partition(|plan| !nodes(plan, "Function Name=phrase_search_ranks").is_empty());
        assert_eq!(page.len(), 1, "one run of the store's statement: {page:#?}");
        (page.into_iter().next().unwrap(), tiers)
    }
}

/// The notices PostgreSQL sent while this layer was the thread's subscriber (sqlx logs each as
/// an event of target `sqlx::postgres::notice`; the test runtime has one thread).
#[derive(Clone, Default)]
struct Notices(Arc<Mutex<Vec<String>>>);

impl Notices {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl<S: tracing::Subscriber> Layer<S> for Notices {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Message(Option<String>);
        impl Visit for Message {
            fn record_str(&mut self, field: &Field, value: &str) {
                if field.name() == "message" {
                    self.0 = Some(value.to_owned());
                }
            }
            fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
        }
        if event.metadata().target() == "sqlx::postgres::notice" {
            let mut message = Message(None);
            event.record(&mut message);
            self.0.lock().unwrap().extend(message.0);
        }
    }
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

/// The page's rows are read from `phrases` by primary key.
fn assert_reads_the_page_by_id(plan: &serde_json::Value) {
    assert!(
        !nodes(plan, "Index Name=phrases_pkey").is_empty(),
        "{plan:#}"
    );
    assert_reads_no_table_whole(plan);
}

/// No search row or phrase is read by a sequential scan, and no parallel plan.
fn assert_reads_no_table_whole(plan: &serde_json::Value) {
    for scan in nodes(plan, "Node Type=Seq Scan") {
        let table = scan["Relation Name"].as_str().unwrap_or_default();
        assert!(!["phrase_search", "phrases"].contains(&table), "{plan:#}");
    }
    assert!(nodes(plan, "Node Type=Gather").is_empty(), "{plan:#}");
}
