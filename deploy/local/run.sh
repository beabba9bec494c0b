#!/usr/bin/env bash
# Runs the whole system on this machine, no Docker needed:
#   a private PostgreSQL cluster (data under .local/, port 55432), roles and schemas, migrations,
#   demo data, then lingo-service, news-service and the gateway. Prints a development token and
#   example requests. A second run reuses the cluster and the data. Ctrl-C stops everything it
#   started.
#
# Environment knobs: GATEWAY_PORT (8080), LINGO_PORT (8081), NEWS_PORT (8082), PG_PORT (55432),
# PROFILE (debug|release, default debug), NEWS_ARTICLES (5000), DETACH=1 (start, print, and exit
# leaving the stack running; stop it with deploy/local/stop.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
state="$root/.local"
pg_data="$state/pgdata"
logs="$state/logs"
GATEWAY_PORT=${GATEWAY_PORT:-8080}
LINGO_PORT=${LINGO_PORT:-8081}
NEWS_PORT=${NEWS_PORT:-8082}
PG_PORT=${PG_PORT:-55432}
PROFILE=${PROFILE:-debug}
NEWS_ARTICLES=${NEWS_ARTICLES:-5000}
database=lingonews

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

find_pg_bin() {
  local name=$1
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  local candidate
  candidate=$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$candidate" ] || die "PostgreSQL's $name not found (install the postgresql server package)"
  echo "$candidate"
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# PostgreSQL refuses to run as root: as root, its commands run as the postgres user.
as_pg() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}

INITDB=$(find_pg_bin initdb)
PG_CTL=$(find_pg_bin pg_ctl)
PSQL=$(find_pg_bin psql)
mkdir -p "$state" "$logs"

started_pids=()
we_started_pg=0
cleanup() {
  trap - INT TERM EXIT
  if [ "${#started_pids[@]}" -gt 0 ]; then
    say "stopping services"
    kill "${started_pids[@]}" 2>/dev/null || true
    wait "${started_pids[@]}" 2>/dev/null || true
  fi
  if [ "$we_started_pg" = 1 ]; then
    say "stopping PostgreSQL"
    as_pg "$PG_CTL" -D "$pg_data" -m fast -w stop >/dev/null 2>&1 || true
  fi
}

# --- ports --------------------------------------------------------------------------------------
for port in "$GATEWAY_PORT" "$LINGO_PORT" "$NEWS_PORT"; do
  port_in_use "$port" && die "port $port is already in use (set GATEWAY_PORT / LINGO_PORT / NEWS_PORT, or stop what holds it)"
done

# --- PostgreSQL -----------------------------------------------------------------------------------
if [ "$(id -u)" = 0 ] && ! as_pg test -x "$state"; then
  die "PostgreSQL runs as the user postgres, which cannot enter $state: a folder above it is private
  (as /root is). Clone the repository where other users can enter (under /srv or /tmp, say), or let
  them pass through each folder above it: chmod o+x <folder>."
fi
if [ ! -f "$pg_data/PG_VERSION" ]; then
  say "creating a PostgreSQL cluster in $pg_data"
  mkdir -p "$pg_data"
  [ "$(id -u)" = 0 ] && chown -R postgres "$pg_data"
  as_pg "$INITDB" -D "$pg_data" -A trust -U postgres -E UTF8 --locale=C >"$logs/initdb.log" 2>&1 \
    || die "initdb failed, see $logs/initdb.log"
fi
[ "$(id -u)" = 0 ] && chown postgres "$logs"
if as_pg "$PG_CTL" -D "$pg_data" status >/dev/null 2>&1; then
  say "reusing the PostgreSQL cluster already running in $pg_data"
else
  port_in_use "$PG_PORT" && die "port $PG_PORT (PostgreSQL) is already in use; set PG_PORT"
  say "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  trap cleanup INT TERM EXIT
  as_pg "$PG_CTL" -D "$pg_data" -l "$logs/postgres.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k '$pg_data'" start >/dev/null \
    || die "PostgreSQL did not start, see $logs/postgres.log"
  we_started_pg=1
fi
trap cleanup INT TERM EXIT

admin_url="postgres://postgres@127.0.0.1:$PG_PORT"
"$PSQL" -q "$admin_url/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = '$database'" | grep -q 1 \
  || "$PSQL" -q "$admin_url/postgres" -c "CREATE DATABASE $database" >/dev/null
"$PSQL" -q -v ON_ERROR_STOP=1 "$admin_url/$database" -f "$root/deploy/postgres/bootstrap.sql" >/dev/null

url() { echo "postgres://$1@127.0.0.1:$PG_PORT/$database"; }

# --- build ---------------------------------------------------------------------------------------
say "building the three binaries ($PROFILE)"
build_flags=()
[ "$PROFILE" = release ] && build_flags+=(--release)
(cd "$root" && cargo build --locked "${build_flags[@]}" -p gateway -p lingo-service -p news-service)
target_dir=$(cd "$root" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target_dir/$PROFILE"

# --- configuration shared by the binaries --------------------------------------------------------
secret_file="$state/dev-hs256-secret"
[ -s "$secret_file" ] || head -c 32 /dev/urandom | base64 | tr -d '\n=' >"$secret_file"
export AUTH_HS256_SECRET
AUTH_HS256_SECRET=$(cat "$secret_file")
export AUTH_ALGORITHMS=HS256 AUTH_ISSUER=lingo-news-dev AUTH_AUDIENCE=lingo-news
export LOG_FORMAT=${LOG_FORMAT:-human} RUST_LOG=${RUST_LOG:-info}
export LINGO_DATABASE_URL LINGO_OWNER_DATABASE_URL LINGO_PIPELINE_DATABASE_URL
export NEWS_DATABASE_URL NEWS_OWNER_DATABASE_URL NEWS_PIPELINE_DATABASE_URL
LINGO_DATABASE_URL=$(url lingo_app); LINGO_OWNER_DATABASE_URL=$(url lingo_owner); LINGO_PIPELINE_DATABASE_URL=$(url lingo_pipeline)
NEWS_DATABASE_URL=$(url news_app); NEWS_OWNER_DATABASE_URL=$(url news_owner); NEWS_PIPELINE_DATABASE_URL=$(url news_pipeline)

# --- schema and demo data -------------------------------------------------------------------------
say "migrating"
"$bin/lingo-service" migrate
"$bin/news-service" migrate
say "seeding demo data (idempotent)"
"$bin/lingo-service" seed
"$bin/news-service" seed --articles "$NEWS_ARTICLES"

# --- services -------------------------------------------------------------------------------------
start() {
  local name=$1; shift
  "$@" >>"$logs/$name.log" 2>&1 &
  started_pids+=($!)
}
wait_ready() {
  local name=$1 port=$2 pid=$3
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || die "$name exited, see $logs/$name.log"
    sleep 0.2
  done
  die "$name is not ready after 30 s, see $logs/$name.log"
}

say "starting lingo-service :$LINGO_PORT, news-service :$NEWS_PORT, gateway :$GATEWAY_PORT (logs in $logs)"
start lingo-service env LINGO_LISTEN_ADDR="127.0.0.1:$LINGO_PORT" "$bin/lingo-service" serve
wait_ready lingo-service "$LINGO_PORT" "${started_pids[-1]}"
start news-service env NEWS_LISTEN_ADDR="127.0.0.1:$NEWS_PORT" "$bin/news-service" serve
wait_ready news-service "$NEWS_PORT" "${started_pids[-1]}"
start gateway env GATEWAY_LISTEN_ADDR="127.0.0.1:$GATEWAY_PORT" \
  LINGO_UPSTREAMS="http://127.0.0.1:$LINGO_PORT" NEWS_UPSTREAMS="http://127.0.0.1:$NEWS_PORT" \
  "$bin/gateway" serve
wait_ready gateway "$GATEWAY_PORT" "${started_pids[-1]}"

token=$("$bin/gateway" mint-token --sub demo-learner --scope lingo:analytics --ttl-secs 86400)
printf '%s\n' "$token" >"$state/dev-token"
cat <<EOF

The stack is up. Gateway: http://127.0.0.1:$GATEWAY_PORT

A development token for sub "demo-learner" (24 h, also in .local/dev-token):
  export TOKEN=$token

Try these, or the interactive reference of every endpoint (Swagger UI; "Authorize" takes the
token above): http://localhost:$GATEWAY_PORT/docs
  curl -s localhost:$GATEWAY_PORT/v1/lingo/languages
  curl -s 'localhost:$GATEWAY_PORT/v1/lingo/phrases?language=es&limit=5'
  curl -s -H "Authorization: Bearer \$TOKEN" localhost:$GATEWAY_PORT/v1/lingo/me/xp
  curl -s -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' \\
       -d '{"duration_seconds":300,"phrases_seen":12,"phrases_correct":10,"language_code":"es"}' \\
       localhost:$GATEWAY_PORT/v1/lingo/me/study-sessions
  curl -s -H "Authorization: Bearer \$TOKEN" 'localhost:$GATEWAY_PORT/v1/lingo/me/reviews?limit=5'
  curl -s 'localhost:$GATEWAY_PORT/v1/news/articles?limit=3'
  curl -s -X POST -H "Authorization: Bearer \$TOKEN" localhost:$GATEWAY_PORT/v1/news/articles/art-000001/like

Another token: $bin/gateway mint-token --sub someone-else   (with AUTH_HS256_SECRET from .local/dev-hs256-secret)
EOF

if [ "${DETACH:-0}" = 1 ]; then
  printf '%s\n' "${started_pids[@]}" >"$state/pids"
  trap - INT TERM EXIT
  echo "Detached. Stop with: deploy/local/stop.sh"
  exit 0
fi
echo "Press Ctrl-C to stop."
stopping=0
trap 'stopping=1' INT TERM
wait -n "${started_pids[@]}" || true
# Ctrl-C reaches the services too; give our own trap a moment when they were faster.
[ "$stopping" = 1 ] || sleep 0.5
if [ "$stopping" = 1 ]; then
  echo
  exit 0 # the EXIT trap stops everything
fi
die "a service exited; see the logs in $logs"
