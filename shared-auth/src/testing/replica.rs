//! A primary and a streaming replica of it (feature `testing`), for tests of what a service does
//! when one database node goes away.
//!
//! Slower than [`crate::testing::TestDatabase`] (two servers and a base backup), so only the
//! tests that need a replica start one. The replica is made the way operators make one
//! (`pg_basebackup -R` from the primary into a second data directory, started on its own port);
//! both listen on Unix sockets in a private directory only. Either server can be stopped (a fast
//! shutdown: clients see what a node restart or a failover shows them) and started again from a
//! test. Both stop, and their files go, when the pair is dropped, or by a watchdog when the test
//! process dies first.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::testing::{
    as_server_user, bootstrap, connect_with_retry, is_root, pg_bin, rand_suffix, spawn_watchdog,
};

/// One of the two servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Primary,
    Replica,
}

/// A primary, a streaming replica of it, and one database with the system's roles and schemas.
pub struct ReplicatedCluster {
    dir: PathBuf,
    database: String,
    primary: Server,
    replica: Server,
}

/// A server's data directory, port and running process.
struct Server {
    data: PathBuf,
    port: u16,
    process: Mutex<Option<Child>>,
}

impl ReplicatedCluster {
    /// Initialises and starts the primary, creates the database, then clones the primary into a
    /// replica and starts it; returns once the replica serves the database.
    pub async fn create() -> Self {
        let root = is_root();
        let dir =
            std::env::temp_dir().join(format!("lnrepl-{}-{}", std::process::id(), rand_suffix()));
        let cluster = Self {
            primary: Server::new(dir.join("primary"), 5432),
            replica: Server::new(dir.join("replica"), 5433),
            database: format!("t_{}", rand_suffix()),
            dir,
        };
        let setup = cluster.paths();
        blocking(move || setup.init_primary(root)).await;
        cluster.start(Node::Primary).await;
        let mut admin = connect_with_retry(&cluster.admin_url(Node::Primary, "postgres")).await;
        sqlx::raw_sql(&format!("CREATE DATABASE \"{}\"", cluster.database))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let _ = admin.close().await;
        bootstrap(&cluster.admin_url(Node::Primary, &cluster.database)).await;
        let setup = cluster.paths();
        blocking(move || setup.clone_replica(root)).await;
        cluster.start(Node::Replica).await;
        cluster
    }

    /// The name of the test database (the same on both nodes).
    pub fn database(&self) -> &str {
        &self.database
    }

    /// URL of `database` on `node` as the superuser.
    pub fn admin_url(&self, node: Node, database: &str) -> String {
        self.url(node, "postgres", database)
    }

    /// URL of the test database on `node` for one of the system's roles (`news_app`, ...).
    pub fn url_for(&self, node: Node, role: &str) -> String {
        self.url(node, role, &self.database)
    }

    fn url(&self, node: Node, role: &str, database: &str) -> String {
        format!(
            "postgres://{role}@localhost/{database}?host={}&port={}",
            self.dir.display(),
            self.server(node).port
        )
    }

    /// Stops `node` with a fast shutdown (open sessions are terminated) and waits until it is
    /// gone.
    pub async fn stop(&self, node: Node) {
        let child = self
            .server(node)
            .process
            .lock()
            .expect("process lock")
            .take();
        if let Some(child) = child {
            blocking(move || stop_and_wait(child)).await;
        }
    }

    /// Starts `node` (again) and waits until it accepts connections to the test database.
    pub async fn start(&self, node: Node) {
        let server = self.server(node);
        let child = server.spawn(&self.dir);
        let pid = child.id();
        *server.process.lock().expect("process lock") = Some(child);
        // The data directory's parent holds the node's files: they go with the server.
        spawn_watchdog(pid, server.data.parent().unwrap_or(&server.data));
        wait_until_serving(&self.admin_url(node, "postgres")).await;
    }

    /// Waits until the replica has replayed everything the primary has written so far.
    pub async fn wait_for_replay(&self) {
        let mut primary = connect_with_retry(&self.admin_url(Node::Primary, "postgres")).await;
        let target: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
            .fetch_one(&mut primary)
            .await
            .expect("primary's WAL position");
        let _ = primary.close().await;
        let mut replica = connect_with_retry(&self.admin_url(Node::Replica, "postgres")).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let caught_up: bool =
                sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn")
                    .bind(&target)
                    .fetch_one(&mut replica)
                    .await
                    .expect("replica's replay position");
            if caught_up {
                break;
            }
            assert!(Instant::now() < deadline, "the replica did not catch up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = replica.close().await;
    }

    fn server(&self, node: Node) -> &Server {
        match node {
            Node::Primary => &self.primary,
            Node::Replica => &self.replica,
        }
    }

    fn paths(&self) -> Paths {
        Paths {
            dir: self.dir.clone(),
            primary: self.primary.data.clone(),
            primary_port: self.primary.port,
            replica: self.replica.data.clone(),
        }
    }
}

impl Drop for ReplicatedCluster {
    fn drop(&mut self) {
        for server in [&self.replica, &self.primary] {
            if let Some(child) = server.process.lock().ok().and_then(|mut p| p.take()) {
                stop_and_wait(child);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    fn new(data: PathBuf, port: u16) -> Self {
        Self {
            data,
            port,
            process: Mutex::new(None),
        }
    }

    /// The server process, as the `postgres` user when we are root (it refuses to run as root).
    fn spawn(&self, socket_dir: &Path) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data.with_extension("log"))
            .expect("open the server log");
        let mut postgres = as_server_user(&pg_bin("postgres"), is_root());
        postgres
            .arg("-D")
            .arg(&self.data)
            .arg("-k")
            .arg(socket_dir)
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=", "-c", "fsync=off"])
            .args(["-c", "max_connections=200", "-c", "wal_keep_size=256MB"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut postgres, 0);
        postgres.spawn().expect("start postgres")
    }
}

/// What the blocking set-up steps need (owned, so they run on the blocking pool).
struct Paths {
    dir: PathBuf,
    primary: PathBuf,
    primary_port: u16,
    replica: PathBuf,
}

impl Paths {
    fn init_primary(&self, root: bool) {
        std::fs::create_dir_all(&self.dir).expect("create the cluster directory");
        if root {
            run(Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&self.dir));
        }
        run(as_server_user(&pg_bin("initdb"), root)
            .arg("-D")
            .arg(&self.primary)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync"));
    }

    /// `pg_basebackup -R`: a copy of the primary that follows it (standby.signal and
    /// primary_conninfo written for us), streaming the WAL it needs while copying.
    fn clone_replica(&self, root: bool) {
        run(as_server_user(&pg_bin("pg_basebackup"), root)
            .arg("-D")
            .arg(&self.replica)
            .arg("-h")
            .arg(&self.dir)
            .args(["-p", &self.primary_port.to_string(), "-U", "postgres"])
            .args(["-R", "-X", "stream", "--no-sync", "-c", "fast"]));
    }
}

fn run(command: &mut Command) {
    let output = command.output().expect("run a PostgreSQL command");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

async fn blocking(work: impl FnOnce() + Send + 'static) {
    tokio::task::spawn_blocking(work)
        .await
        .expect("set-up step panicked");
}

/// SIGINT is PostgreSQL's fast shutdown: sessions end with 57P01, the server exits cleanly.
fn stop_and_wait(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

async fn wait_until_serving(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match PgConnection::connect(url).await {
            Ok(connection) => {
                let _ = connection.close().await;
                return;
            }
            Err(error) if Instant::now() > deadline => panic!("{url} did not come up: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
