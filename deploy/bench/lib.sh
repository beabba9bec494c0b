# Shared helpers of the deploy/bench scripts and .ci/check-sqlx.sh (sourced, not run).
# Everything here stays on 127.0.0.1; every process started through `spawn` is recorded in
# $spawned_pids and stopped by `stop_spawned` (the scripts call it from their EXIT trap).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bench_dir="$root/deploy/bench"
database=lingonews
venv="${BENCH_VENV:-$HOME/.cache/lingonews-bench-venv}"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

find_pg_bin() {
  local name=$1 candidate
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  candidate=$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$candidate" ] || die "PostgreSQL's $name not found (install the postgresql server package)"
  echo "$candidate"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port_pair START: the first port from START on that is free together with the next one
# (a PostgreSQL primary and its replica), trying 100. Defaults start below Linux's ephemeral range
# (32768-60999), where nothing that binds port 0 (test servers, browsers) can land.
free_port_pair() {
  local port
  for port in $(seq "$1" $(($1 + 198))); do
    port_in_use "$port" || port_in_use $((port + 1)) || { echo "$port"; return 0; }
  done
  die "no two free ports from $1 on (set PG_PORT)"
}

# require_free_ports PORT...: stops the script when one of the ports it needs is taken.
require_free_ports() {
  local port
  for port in "$@"; do
    port_in_use "$port" && die "port $port is in use (set BENCH_PORT_BASE / PG_PORT)"
  done
  return 0
}

# bench_folders DEFAULT_STATE NAME: sets $state (BENCH_STATE, or DEFAULT_STATE: kept between runs),
# $pg_data and $logs in it, and $work (a temporary folder /tmp/NAME.*), and traps the exit to
# stop every spawned process and PostgreSQL and to remove $work.
bench_folders() {
  state=${BENCH_STATE:-$1}
  pg_data="$state/pgdata"
  logs="$state/logs"
  work=$(mktemp -d "/tmp/$2.XXXXXX")
  mkdir -p "$state" "$logs"
  trap bench_cleanup INT TERM EXIT
}

bench_cleanup() {
  trap - INT TERM EXIT
  stop_spawned
  pg_stop "$pg_data"
  rm -rf "$work"
}

# PostgreSQL refuses to run as root: as root, its commands run as the postgres user.
as_pg() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}

# Installs Debian packages whose command is missing (wrk, haproxy, ...): `need_apt cmd:package ...`.
need_apt() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  say "installing ${missing[*]} (apt)"
  local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

# A Python venv with the given pip packages (kept under ~/.cache, created on first use).
need_venv() {
  if [ ! -x "$venv/bin/python" ]; then
    say "creating the Python venv $venv"
    python3 -m venv "$venv"
  fi
  local module pkg missing=()
  for pkg in "$@"; do
    module=${pkg%%:*}
    "$venv/bin/python" -c "import $module" 2>/dev/null || missing+=("${pkg#*:}")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "pip install ${missing[*]}"
    "$venv/bin/pip" install -q "${missing[@]}"
  fi
}

# --- PostgreSQL: a private cluster of our own -----------------------------------------------------
INITDB=$(find_pg_bin initdb)
PG_CTL=$(find_pg_bin pg_ctl)
PSQL=$(find_pg_bin psql)

# pg_start DATADIR PORT [extra postgres -c options...]: creates the cluster if needed, starts it.
pg_start() {
  local data=$1 port=$2; shift 2
  local opts="-c listen_addresses=127.0.0.1 -p $port -k '$data'" option
  for option in "$@"; do opts+=" -c $option"; done
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown -R postgres "$data"
    as_pg "$INITDB" -D "$data" -A trust -U postgres -E UTF8 --locale=C >"$data.initdb.log" 2>&1 \
      || die "initdb failed, see $data.initdb.log"
  fi
  port_in_use "$port" && die "port $port (PostgreSQL) is already in use; set PG_PORT"
  as_pg "$PG_CTL" -D "$data" -l "$data/postgres.log" -w -t 60 -o "$opts" start >/dev/null \
    || die "PostgreSQL did not start, see $data/postgres.log"
  printf '%s\n' "$opts" >"$data/bench-opts"
}

# pg_start_replica DATADIR PRIMARY_PORT PORT: a streaming replica of the cluster on PRIMARY_PORT
# (pg_basebackup -R: standby.signal and primary_conninfo written for us), started on PORT.
pg_start_replica() {
  local data=$1 primary_port=$2 port=$3
  mkdir -p "$data"; chmod 700 "$data"
  [ "$(id -u)" = 0 ] && chown -R postgres "$data"
  as_pg "$(find_pg_bin pg_basebackup)" -D "$data" -h 127.0.0.1 -p "$primary_port" -U postgres \
    -R -X stream -c fast >"$data.basebackup.log" 2>&1 || die "pg_basebackup failed, see $data.basebackup.log"
  pg_start "$data" "$port"
}

pg_stop() { as_pg "$PG_CTL" -D "$1" -m fast -w stop >/dev/null 2>&1 || true; }
pg_restart_cmd() { echo "$PG_CTL -D $1 -l $1/postgres.log -w -t 60 -o \"$(cat "$1/bench-opts")\" start"; }

# db_bootstrap PORT: the database, roles and schemas (deploy/postgres/bootstrap.sql).
db_bootstrap() {
  local admin="postgres://postgres@127.0.0.1:$1"
  "$PSQL" -q "$admin/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = '$database'" | grep -q 1 \
    || "$PSQL" -q "$admin/postgres" -c "CREATE DATABASE $database" >/dev/null
  "$PSQL" -q -v ON_ERROR_STOP=1 "$admin/$database" -f "$root/deploy/postgres/bootstrap.sql" >/dev/null
}

db_url() { echo "postgres://$1@127.0.0.1:$PG_PORT/$database"; }
admin_psql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 -tA "postgres://postgres@127.0.0.1:$PG_PORT/$database" "$@"; }

# Exports the services' database URLs for PG_PORT.
export_db_env() {
  export LINGO_DATABASE_URL LINGO_OWNER_DATABASE_URL LINGO_PIPELINE_DATABASE_URL
  export NEWS_DATABASE_URL NEWS_OWNER_DATABASE_URL NEWS_PIPELINE_DATABASE_URL
  LINGO_DATABASE_URL=$(db_url lingo_app); LINGO_OWNER_DATABASE_URL=$(db_url lingo_owner)
  LINGO_PIPELINE_DATABASE_URL=$(db_url lingo_pipeline)
  NEWS_DATABASE_URL=$(db_url news_app); NEWS_OWNER_DATABASE_URL=$(db_url news_owner)
  NEWS_PIPELINE_DATABASE_URL=$(db_url news_pipeline)
}

# start_bench_postgres [postgres -c options...]: the bench's own cluster in $pg_data on PG_PORT
# (created the first time), its database, roles and schemas, and the services' database URLs
# exported.
start_bench_postgres() {
  say "PostgreSQL on 127.0.0.1:$PG_PORT ($pg_data)"
  [ "$(id -u)" != 0 ] || chown postgres "$state"
  pg_start "$pg_data" "$PG_PORT" "$@"
  db_bootstrap "$PG_PORT"
  export_db_env
}

# write_results_section NAME SECTION_FILE: puts the section (from `<!-- NAME:begin` to
# `<!-- NAME:end -->`) into deploy/bench/RESULTS.md in place of the last run's, or, the first
# time, before `## History` (at the end when there is none), and keeps a copy in
# $state/NAME-section.md.
write_results_section() {
  local name=$1 section=$2
  cp "$section" "$state/$name-section.md"
  python3 - "$bench_dir/RESULTS.md" "$section" "$name" <<'PY'
import re, sys
path, section, name = sys.argv[1], open(sys.argv[2]).read().rstrip("\n"), sys.argv[3]
text = open(path).read()
pattern = re.compile(rf"<!-- {re.escape(name)}:begin.*?<!-- {re.escape(name)}:end -->", re.S)
if pattern.search(text):
    text = pattern.sub(lambda _: section, text)
elif "\n## History\n" in text:
    text = text.replace("\n## History\n", "\n" + section + "\n\n## History\n", 1)
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
  say "wrote the $name section of deploy/bench/RESULTS.md (also $state/$name-section.md)"
}

# remove_learners LIKE-PATTERN: every row lingo-service keeps for these learners (phrase-progress*.sh). The review log
# goes first; then the sessions' foreign-key checks are skipped (replication role, which also
# skips triggers: the states go before it, so theirs run): their referencing rows are gone.
remove_learners() {
  admin_psql -v pattern="$1" <<'SQL'
BEGIN;
SET LOCAL search_path = lingo;
DELETE FROM phrase_review_sessions WHERE learner_id LIKE :'pattern';
DELETE FROM phrase_states WHERE learner_id LIKE :'pattern';
SET LOCAL session_replication_role = replica;
DELETE FROM study_sessions WHERE learner_id LIKE :'pattern';
DELETE FROM learner_language_totals WHERE learner_id LIKE :'pattern';
DELETE FROM learners WHERE learner_id LIKE :'pattern';
DELETE FROM idempotency_keys WHERE caller_id LIKE :'pattern';
COMMIT;
SQL
}

target_dir() {
  (cd "$root" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
}

# --- processes ------------------------------------------------------------------------------------
spawned_pids=()
# spawn NAME LOGDIR cmd...: starts cmd in the background; its pid is in $last_pid.
spawn() {
  local name=$1 logdir=$2; shift 2
  "$@" >>"$logdir/$name.log" 2>&1 &
  last_pid=$!
  spawned_pids+=("$last_pid")
}

stop_spawned() {
  local pid
  for pid in "${spawned_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${spawned_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  spawned_pids=()
}

# wait_ready NAME PORT PID [PATH]: polls http://127.0.0.1:PORT/PATH (default /readyz) for 30 s.
wait_ready() {
  local name=$1 port=$2 pid=$3 path=${4:-/readyz}
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port$path" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || die "$name exited (see its log)"
    sleep 0.2
  done
  die "$name is not ready after 30 s"
}

# An HS256 token for SUB (optional SCOPE), minted by the gateway binary with the AUTH_* in the env.
mint() { "$bin/gateway" mint-token --sub "$1" ${2:+--scope "$2"} --ttl-secs 86400; }
