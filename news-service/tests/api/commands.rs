//! The binary's commands: `import`, `--help`, `mint-token`, and `serve` stopping on SIGTERM.

use std::io::Write;
use std::process::Command;

use crate::helpers::spawn_with_fixture;

const BIN: &str = env!("CARGO_BIN_EXE_news-service");

#[tokio::test]
async fn import_keeps_good_lines_and_names_bad_ones() {
    let app = spawn_with_fixture().await;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let lines = [
        // 1: a new article whose journalist is defined further down (line 4).
        r#"{"type":"article","id":"imp-1","title":"Imported","summary":"s","body":"b","url":"https://i.example/1","published_at":"2026-02-01T00:00:00Z","organization_id":"org-n","journalist_id":"jrn-n"}"#,
        // 2: not JSON
        r#"{"type":"article", oops"#,
        // 3: a new organisation
        r#"{"type":"organization","id":"org-n","name":"New Org","url":"https://new.example"}"#,
        // 4: a journalist of it
        r#"{"type":"journalist","id":"jrn-n","name":"New Person","organization_id":"org-n"}"#,
        // 5: an article naming a journalist nobody defines
        r#"{"type":"article","id":"imp-2","title":"Orphan","summary":"s","body":"b","url":"u","published_at":"2026-02-01T00:00:00Z","organization_id":"org-n","journalist_id":"jrn-missing"}"#,
        // 6: an update of an existing article
        r#"{"type":"article","id":"art-1","title":"Title 1 (corrected)","summary":"Summary 1","body":"Body 1","url":"https://alpha.example/1","published_at":"2026-01-01T10:00:00Z","organization_id":"org-a","journalist_id":"jrn-1"}"#,
        // 7: unknown field
        r#"{"type":"organization","id":"org-z","name":"Z","url":"u","color":"red"}"#,
        // 8: empty title
        r#"{"type":"article","id":"imp-3","title":" ","summary":"s","body":"b","url":"u","published_at":"2026-02-01T00:00:00Z","organization_id":"org-n","journalist_id":"jrn-n"}"#,
        "",
        // 10: an unchanged existing organisation
        r#"{"type":"organization","id":"org-a","name":"Alpha News","url":"https://alpha.example"}"#,
    ];
    writeln!(file, "{}", lines.join("\n")).unwrap();
    let output = Command::new(BIN)
        .args(["import", "--no-progress"])
        .arg(file.path())
        .env(
            "NEWS_PIPELINE_DATABASE_URL",
            app.db.url_for("news_pipeline"),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(2),
        "some lines were skipped\n{stdout}\n{stderr}"
    );
    for line in [2, 5, 7, 8] {
        assert!(
            stderr.contains(&format!("line {line}: ")),
            "line {line} named:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("journalist_id names no journalist"),
        "{stderr}"
    );
    assert!(
        stdout.contains("skipped 4 bad lines: 2, 5, 7, 8"),
        "{stdout}"
    );
    assert!(
        stdout.contains("articles:      1 inserted, 1 updated, 0 unchanged"),
        "{stdout}"
    );
    assert!(
        stdout.contains("organizations: 1 inserted, 0 updated, 1 unchanged"),
        "{stdout}"
    );

    // The good lines are in, the bad ones are not.
    let article = app.get_json("/articles/imp-1", None).await;
    assert_eq!(article["journalist"]["name"], "New Person");
    assert_eq!(article["organization"]["name"], "New Org");
    assert_eq!(
        app.get_json("/articles/art-1", None).await["title"],
        "Title 1 (corrected)"
    );
    assert_eq!(app.get("/articles/imp-2", None).await.status(), 404);
    assert_eq!(
        app.count("SELECT count(*) FROM organizations WHERE id = 'org-z'")
            .await,
        0
    );

    // Importing again changes nothing.
    let summary = news_service::import(&app.db.url_for("news_pipeline"), file.path(), false)
        .await
        .unwrap();
    assert_eq!(
        (
            summary.articles.inserted,
            summary.articles.updated,
            summary.articles.unchanged
        ),
        (0, 0, 2)
    );
    assert_eq!(summary.bad_lines.len(), 4);
}

#[test]
fn help_lists_every_environment_variable() {
    let output = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    for var in [
        "NEWS_LISTEN_ADDR",
        "NEWS_DATABASE_URL",
        "NEWS_DATABASE_READ_URL",
        "NEWS_OWNER_DATABASE_URL",
        "NEWS_MIGRATE_ON_START",
        "NEWS_DB_MAX_CONNECTIONS",
        "NEWS_IDEMPOTENCY_CLEANUP_SECS",
        "NEWS_COUNTER_FOLD_INTERVAL_MS",
        "LOG_FORMAT",
        "AUTH_ISSUER",
        "AUTH_HS256_SECRET",
    ] {
        assert!(
            help.contains(var),
            "{var} missing from serve --help:\n{help}"
        );
    }
}

#[test]
fn mint_token_prints_a_token_the_service_accepts() {
    let output = Command::new(BIN)
        .args(["mint-token", "--sub", "demo"])
        .env("AUTH_HS256_SECRET", shared_auth::testing::TEST_SECRET)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert_eq!(token.split('.').count(), 3);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let caller = runtime.block_on(async {
        let verifier = shared_auth::Verifier::from_config(&shared_auth::testing::auth_config())
            .await
            .unwrap();
        verifier.verify(&token).await.unwrap()
    });
    assert_eq!(caller.sub, "demo");
}

#[tokio::test]
async fn serve_answers_health_and_stops_gracefully_on_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    // The pool connects lazily, so no database is needed to start and stop.
    let mut child = Command::new(BIN)
        .arg("serve")
        .env("NEWS_LISTEN_ADDR", "127.0.0.1:0")
        .env("NEWS_DATABASE_URL", "postgres://news_app@127.0.0.1:1/none")
        .env("AUTH_HS256_SECRET", shared_auth::testing::TEST_SECRET)
        .env("LOG_FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let port = tokio::task::spawn_blocking(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if event["message"] == "news-service listening" {
                return event["port"].as_u64().unwrap();
            }
        }
        panic!("no listening line");
    })
    .await
    .unwrap();
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exit.success(), "graceful exit on SIGTERM: {exit:?}");
}
