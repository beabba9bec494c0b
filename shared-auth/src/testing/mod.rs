//! Test support for every crate of the workspace (feature `testing`).
//!
//! - A throwaway PostgreSQL cluster per test process, started from the installed server binaries
//!   (or the server named by `TEST_DATABASE_URL`), with the roles and schemas of
//!   `deploy/postgres/bootstrap.sql`; each test gets a fresh database, so tests run in parallel.
//!   A watchdog stops the cluster and removes its files as soon as the test process exits.
//! - HS256 tokens signed with the test secret.
//! - [`replica`]: a primary with a streaming replica, for tests of a database node going away.

pub mod replica;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::auth::verify::AuthConfig;

/// What `str::trim` removes (`char::is_whitespace`) as a regex class body of `\uXXXX` escapes,
/// consecutive characters joined into ranges: the white space the documents' text patterns
/// (a comment's text, search `q`s) must name, for the tests that hold them equal.
pub fn whitespace_class() -> String {
    let chars: Vec<u32> = (0..=u32::from(char::MAX))
        .filter(|c| char::from_u32(*c).is_some_and(char::is_whitespace))
        .collect();
    let mut class = String::new();
    let mut i = 0;
    while i < chars.len() {
        let mut j = i;
        while j + 1 < chars.len() && chars[j + 1] == chars[j] + 1 {
            j += 1;
        }
        class.push_str(&format!("\\u{:04X}", chars[i]));
        if j > i {
            class.push_str(&format!("-\\u{:04X}", chars[j]));
        }
        i = j + 1;
    }
    class
}

/// The roles and schemas every database of the system has.
pub const BOOTSTRAP_SQL: &str = include_str!("../../../deploy/postgres/bootstrap.sql");

pub const TEST_SECRET: &str = "test-secret-that-is-long-enough-for-hs256";

/// The auth configuration matching [`token`].
pub fn auth_config() -> AuthConfig {
    AuthConfig::hs256(TEST_SECRET)
}

/// A valid HS256 token for `sub`, valid for an hour.
pub fn token(sub: &str) -> String {
    token_with_claims(default_claims(sub))
}

/// A valid HS256 token for `sub` carrying `scope`.
pub fn token_with_scope(sub: &str, scope: &str) -> String {
    let mut claims = default_claims(sub);
    claims["scope"] = json!(scope);
    token_with_claims(claims)
}

pub fn default_claims(sub: &str) -> Value {
    let now = jsonwebtoken::get_current_timestamp();
    json!({"sub": sub, "iss": "lingo-news-dev", "aud": "lingo-news", "iat": now, "exp": now + 3600})
}

/// Signs arbitrary claims with the test secret.
pub fn token_with_claims(claims: Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(TEST_SECRET.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key)
        .expect("HS256 signing cannot fail")
}

/// Where the test databases live: the admin connection URL without a database name, and a
/// way to name a database for a role.
struct Server {
    /// e.g. `postgres://postgres@localhost` or the `TEST_DATABASE_URL` base.
    base: url_parts::Base,
}

mod url_parts {
    /// A connection URL split around the database name so other roles and databases can be
    /// derived from it.
    pub struct Base {
        pub scheme_and_user: String,
        pub host_part: String,
        pub query: String,
    }

    impl Base {
        pub fn parse(url: &str) -> Option<Self> {
            let (before_query, query) = match url.split_once('?') {
                Some((a, b)) => (a, format!("?{b}")),
                None => (url, String::new()),
            };
            let rest = before_query
                .strip_prefix("postgres://")
                .or_else(|| before_query.strip_prefix("postgresql://"))?;
            let (authority, _database) = rest.split_once('/').unwrap_or((rest, ""));
            let (user, host) = authority.rsplit_once('@')?;
            Some(Self {
                scheme_and_user: format!("postgres://{user}"),
                host_part: host.to_owned(),
                query,
            })
        }

        pub fn admin_url(&self, database: &str) -> String {
            format!(
                "{}@{}/{database}{}",
                self.scheme_and_user, self.host_part, self.query
            )
        }

        /// Test roles have their own name as password where a password is needed.
        pub fn role_url(&self, role: &str, database: &str) -> String {
            format!(
                "postgres://{role}:{role}@{}/{database}{}",
                self.host_part, self.query
            )
        }
    }
}

static SERVER: OnceLock<Server> = OnceLock::new();

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        let url = match std::env::var("TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => start_cluster(),
        };
        let base = url_parts::Base::parse(&url).unwrap_or_else(|| {
            panic!("cannot parse the database URL {url:?} (postgres://user@host/db)")
        });
        Server { base }
    })
}

/// A fresh database with the system's roles and schemas.
pub struct TestDatabase {
    pub name: String,
    base: &'static url_parts::Base,
}

impl TestDatabase {
    pub async fn create() -> Self {
        Self::create_with("").await
    }

    /// Like [`create`](Self::create), with the ICU collation of `locale` (`en-US`) as the
    /// database's default: text then sorts as people read it, not byte by byte as in the test
    /// cluster's `C` (the official PostgreSQL images default to `en_US.utf8`).
    pub async fn create_with_icu_collation(locale: &str) -> Self {
        Self::create_with(&format!(
            " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{locale}' LOCALE 'C'"
        ))
        .await
    }

    /// A database created with `options` after `CREATE DATABASE name`.
    async fn create_with(options: &str) -> Self {
        let server = server();
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut admin = connect_with_retry(&server.base.admin_url("postgres")).await;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\"{options}"))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let _ = admin.close().await;

        bootstrap(&server.base.admin_url(&name)).await;
        Self {
            name,
            base: &server.base,
        }
    }

    /// Connection URL for one of the six roles (`lingo_app`, `news_owner`, ...).
    pub fn url_for(&self, role: &str) -> String {
        self.base.role_url(role, &self.name)
    }

    /// Connection URL for the superuser.
    pub fn admin_url(&self) -> String {
        self.base.admin_url(&self.name)
    }

    /// A superuser connection holding an exclusive lock on `table` (schema-qualified) until it
    /// is dropped, so that a service's write to it blocks inside its statement.
    pub async fn lock_table(&self, table: &str) -> PgConnection {
        let mut admin = connect_with_retry(&self.admin_url()).await;
        sqlx::raw_sql(&format!(
            "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"
        ))
        .execute(&mut admin)
        .await
        .expect("lock the table");
        admin
    }
}

/// The statements of `role` in `admin`'s database that meet `condition` (SQL on
/// `pg_stat_activity`), such as a service's running ones while a test holds a lock: the test's own
/// connections are another role.
pub async fn role_statements(admin: &mut PgConnection, role: &str, condition: &str) -> i64 {
    // Inside the lock's transaction the statistics are a snapshot taken at first use: refresh.
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *admin)
        .await
        .expect("refresh the statistics snapshot");
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE usename = '{role}' AND datname = current_database() AND {condition}"
    ))
    .fetch_one(admin)
    .await
    .expect("count the role's statements")
}

/// `request` sent until it is refused with 503, at most 50 times 50 ms apart, and its last
/// answer: while a test holds a request back, a read may still get in until the held one has been
/// admitted (or has taken the only connection).
pub async fn until_shed<F, R>(mut request: F) -> reqwest::Response
where
    F: FnMut() -> R,
    R: std::future::Future<Output = reqwest::Response>,
{
    let mut response = request().await;
    for _ in 0..50 {
        if response.status() == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        response = request().await;
    }
    response
}

/// Roles and their settings are cluster-wide, and PostgreSQL answers "tuple concurrently
/// updated" when two sessions alter one role at once (advisory locks are per database and do not
/// help), so bootstraps are serialised within the process and retried across processes.
pub(crate) async fn bootstrap(admin_url: &str) {
    static BOOTSTRAP_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = BOOTSTRAP_LOCK.lock().await;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut admin = connect_with_retry(admin_url).await;
        let result = sqlx::raw_sql(BOOTSTRAP_SQL)
            .execute(&mut admin)
            .await
            .and(sqlx::raw_sql(SET_TEST_PASSWORDS).execute(&mut admin).await);
        let _ = admin.close().await;
        match result {
            Ok(_) => return,
            Err(error) if attempt >= 10 => panic!("bootstrap roles and schemas: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50 * attempt)).await,
        }
    }
}

/// Role passwords matter only on a server that asks for them (TEST_DATABASE_URL).
const SET_TEST_PASSWORDS: &str = "DO $$ DECLARE r text; BEGIN \
    FOREACH r IN ARRAY ARRAY['lingo_owner','lingo_app','lingo_pipeline', \
                             'news_owner','news_app','news_pipeline'] LOOP \
      EXECUTE format('ALTER ROLE %I PASSWORD %L', r, r); \
    END LOOP; END $$;";

pub(crate) async fn connect_with_retry(url: &str) -> PgConnection {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match PgConnection::connect(url).await {
            Ok(conn) => return conn,
            Err(error) if Instant::now() > deadline => panic!("cannot connect to {url}: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

pub(crate) fn pg_bin(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| {
            dirs.flatten()
                .map(|d| d.path().join("bin").join(name))
                .collect()
        })
        .unwrap_or_default();
    debian.sort();
    debian.reverse();
    on_path
        .into_iter()
        .chain(debian)
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("PostgreSQL's {name} not found on PATH or under /usr/lib/postgresql/*/bin; install the server binaries or set TEST_DATABASE_URL"))
}

pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

/// PostgreSQL refuses to run as root; as root the server runs as the `postgres` user.
/// `setpriv` execs in place, so the pid we hold is the server's own.
pub(crate) fn as_server_user(program: &Path, root: bool) -> Command {
    if root {
        let mut command = Command::new("setpriv");
        command
            .args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
            ])
            .arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// Starts a private cluster listening only on a Unix socket; returns its admin URL.
fn start_cluster() -> String {
    let root = is_root();
    let dir = std::env::temp_dir().join(format!("lnpg-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).expect("create cluster dir");
    if root {
        let status = Command::new("chown")
            .args(["-R", "postgres"])
            .arg(&dir)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "chown of {} to postgres failed",
            dir.display()
        );
    }
    let data = dir.join("data");
    let output = as_server_user(&pg_bin("initdb"), root)
        .arg("-D")
        .arg(&data)
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ])
        .output()
        .expect("run initdb");
    assert!(
        output.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let log = std::fs::File::create(dir.join("postgres.log")).expect("create log file");
    let mut postgres = as_server_user(&pg_bin("postgres"), root);
    postgres
        .arg("-D")
        .arg(&data)
        .arg("-k")
        .arg(&dir)
        .args([
            "-c",
            "listen_addresses=",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
        ])
        .args(["-c", "full_page_writes=off", "-c", "max_connections=400"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut postgres, 0);
    // Not waited on here: the watchdog owns the server's end of life.
    #[allow(clippy::zombie_processes)]
    let child = postgres.spawn().expect("start postgres");
    spawn_watchdog(child.id(), &dir);
    format!(
        "postgres://postgres@localhost/postgres?host={}",
        dir.display()
    )
}

/// A detached shell that waits for this test process to exit, then stops the server
/// `postgres_pid` and removes `dir`, its files, so no server outlives the tests (even when they
/// crash).
pub(crate) fn spawn_watchdog(postgres_pid: u32, dir: &Path) {
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.2; done; \
         kill -QUIT {pg} 2>/dev/null; \
         for i in $(seq 50); do kill -0 {pg} 2>/dev/null || break; sleep 0.1; done; \
         kill -KILL {pg} 2>/dev/null; rm -rf '{dir}'",
        me = std::process::id(),
        pg = postgres_pid,
        dir = dir.display()
    );
    let mut watchdog = Command::new("sh");
    watchdog
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut watchdog, 0);
    // Detached on purpose: it must outlive this process.
    #[allow(clippy::zombie_processes)]
    watchdog.spawn().expect("start cluster watchdog");
}

pub(crate) fn rand_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}
