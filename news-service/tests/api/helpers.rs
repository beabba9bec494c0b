//! What the tests share: a migrated database per test, the service on port 0, a small
//! hand-made catalogue, and assertions on problems.

use std::borrow::Cow;
use std::str::FromStr;

use news_service::config::ServeConfig;
use news_service::db::MIGRATOR;
use news_service::{Application, migrate, seed};
use reqwest::{Client, Method, Response};
use serde_json::Value;
use shared_auth::testing::{TestDatabase, auth_config, token};
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

pub struct TestApp {
    pub address: String,
    pub client: Client,
    pub db: TestDatabase,
}

/// A pool for `role` with the service's search_path.
pub async fn pool_as(db: &TestDatabase, role: &str) -> PgPool {
    pool_of(db, role, 4).await
}

/// [`pool_as`] with `connections` connections.
pub async fn pool_of(db: &TestDatabase, role: &str, connections: u32) -> PgPool {
    let url = if role == "admin" {
        db.admin_url()
    } else {
        db.url_for(role)
    };
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("search_path", "news")]);
    PgPoolOptions::new()
        .max_connections(connections)
        .connect_with(options)
        .await
        .unwrap()
}

/// A database migrated up to, not including, migration `version`, with the fixture catalogue
/// written by the pipeline: for tests of what a migration does to the rows already there.
/// Returns the database and pools as its owner and as the pipeline.
pub async fn database_before_migration(version: i64) -> (TestDatabase, PgPool, PgPool) {
    let db = TestDatabase::create().await;
    let before = Migrator {
        migrations: Cow::Owned(
            MIGRATOR
                .iter()
                .filter(|m| m.version < version)
                .cloned()
                .collect(),
        ),
        ..Migrator::DEFAULT
    };
    let owner = pool_as(&db, "news_owner").await;
    before.run(&owner).await.unwrap();
    let pipeline = pool_as(&db, "news_pipeline").await;
    sqlx::raw_sql(FIXTURE).execute(&pipeline).await.unwrap();
    (db, owner, pipeline)
}

/// A migrated database with an app on port 0 (runtime role news_app), no data.
pub async fn spawn_app() -> TestApp {
    spawn_app_in(TestDatabase::create().await).await
}

/// Like `spawn_app`, in the database given (one with another collation, say).
pub async fn spawn_app_in(db: TestDatabase) -> TestApp {
    migrate(&db.url_for("news_owner"))
        .await
        .expect("migrations apply");
    start(db, None).await
}

/// Like `spawn_app`, with the demo data of `seed` (`articles` articles).
pub async fn spawn_seeded(articles: u64) -> TestApp {
    let db = TestDatabase::create().await;
    migrate(&db.url_for("news_owner"))
        .await
        .expect("migrations apply");
    seed(&db.url_for("news_pipeline"), articles)
        .await
        .expect("seed");
    start(db, None).await
}

/// Like `spawn_app`, with the small hand-made catalogue of `fixture`.
pub async fn spawn_with_fixture() -> TestApp {
    let app = spawn_app().await;
    let pipeline = pool_as(&app.db, "news_pipeline").await;
    sqlx::raw_sql(FIXTURE).execute(&pipeline).await.unwrap();
    app
}

/// The small hand-made catalogue of `fixture` served by a service started with
/// [`start_configured`].
pub async fn spawn_with_fixture_configured(configure: impl FnOnce(&mut ServeConfig)) -> TestApp {
    let db = TestDatabase::create().await;
    migrate(&db.url_for("news_owner"))
        .await
        .expect("migrations apply");
    let pipeline = pool_as(&db, "news_pipeline").await;
    sqlx::raw_sql(FIXTURE).execute(&pipeline).await.unwrap();
    pipeline.close().await;
    start_configured(db, configure).await
}

pub async fn start(db: TestDatabase, read_url: Option<String>) -> TestApp {
    start_configured(db, |config| config.database_read_url = read_url).await
}

/// Like `start`, with the configuration changed by `configure` (pool of 30 before it).
pub async fn start_configured(
    db: TestDatabase,
    configure: impl FnOnce(&mut ServeConfig),
) -> TestApp {
    let mut config = ServeConfig::new(db.url_for("news_app"), auth_config());
    config.db_max_connections = 30;
    configure(&mut config);
    let app = Application::build(config).await.expect("app builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        client: Client::new(),
        db,
    }
}

/// Three organisations (one without articles), three journalists, five articles: art-2 and art-3
/// share a `published_at`, so the id breaks the tie (art-3 first).
pub const FIXTURE: &str = r#"
INSERT INTO organizations (id, name, url) VALUES
  ('org-a', 'Alpha News', 'https://alpha.example'),
  ('org-b', 'Beta Times', 'https://beta.example'),
  ('org-c', 'Cobalt Daily', 'https://cobalt.example');
INSERT INTO journalists (id, name, organization_id) VALUES
  ('jrn-1', 'Zed Writer', 'org-a'),
  ('jrn-2', 'Amy Reporter', 'org-a'),
  ('jrn-3', 'Bob Columnist', 'org-b');
INSERT INTO articles (id, title, summary, body, url, published_at, organization_id, journalist_id) VALUES
  ('art-1', 'Title 1', 'Summary 1', 'Body 1', 'https://alpha.example/1', '2026-01-01T10:00:00Z', 'org-a', 'jrn-1'),
  ('art-2', 'Title 2', 'Summary 2', 'Body 2', 'https://alpha.example/2', '2026-01-02T10:00:00Z', 'org-a', 'jrn-2'),
  ('art-3', 'Title 3', 'Summary 3', 'Body 3', 'https://beta.example/3',  '2026-01-02T10:00:00Z', 'org-b', 'jrn-3'),
  ('art-4', 'Title 4', 'Summary 4', 'Body 4', 'https://beta.example/4',  '2026-01-03T08:00:00Z', 'org-b', 'jrn-3'),
  ('art-5', 'Title 5', 'Summary 5', 'Body 5', 'https://alpha.example/5', '2025-12-31T00:00:00Z', 'org-a', 'jrn-1');
"#;

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}/v1/news{path}", self.address)
    }

    pub async fn request(&self, method: Method, path: &str, user: Option<&str>) -> Response {
        let mut request = self.client.request(method, self.url(path));
        if let Some(user) = user {
            request = request.bearer_auth(token(user));
        }
        request.send().await.unwrap()
    }

    pub async fn get(&self, path: &str, user: Option<&str>) -> Response {
        self.request(Method::GET, path, user).await
    }

    pub async fn post(&self, path: &str, user: &str) -> Response {
        self.request(Method::POST, path, Some(user)).await
    }

    pub async fn delete(&self, path: &str, user: &str) -> Response {
        self.request(Method::DELETE, path, Some(user)).await
    }

    /// GET as `user` (or anonymously), asserting 200, returning the JSON body.
    pub async fn get_json(&self, path: &str, user: Option<&str>) -> Value {
        let response = self.get(path, user).await;
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    pub async fn post_comment(&self, user: &str, body: &Value, key: Option<&str>) -> Response {
        let mut request = self
            .client
            .post(self.url("/comments"))
            .bearer_auth(token(user))
            .json(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send().await.unwrap()
    }

    pub async fn admin(&self) -> PgPool {
        pool_as(&self.db, "admin").await
    }

    pub async fn count(&self, sql: &str) -> i64 {
        let pool = self.admin().await;
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        n
    }
}

/// Asserts a problem answer: status, content type and `code`.
pub async fn assert_problem(response: Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status(), status, "expected {status} {code}");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/problem+json"),
        "{content_type}"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["status"], status);
    body
}

pub fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}
