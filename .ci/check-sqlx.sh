#!/usr/bin/env bash
# The checked-query data of every crate that has a `.sqlx/` folder (what `sqlx::query!` and
# friends read when building without a database) must be what the crate's statements and
# migrations give today. Starts a throwaway PostgreSQL cluster, bootstraps the roles
# (deploy/postgres/bootstrap.sql), applies each crate's migrations as its schema owner, rebuilds
# the crate against the live database with the query data written to a temporary folder, and
# compares that folder with the committed one.
#
#   .ci/check-sqlx.sh            fail when a crate's .sqlx/ is stale (missing, extra or changed)
#   .ci/check-sqlx.sh --write    rewrite the .sqlx/ folders (after changing a statement or a
#                                migration); commit the result
#
# A crate `<name>-service` owns schema `<name>`, migrated by role `<name>_owner` and run as
# `<name>_app`. The statements are described as `<name>_owner`: the crate also holds the
# pipeline's writes (seed, import, recount), which PostgreSQL will not even describe to the
# runtime role. Whether the runtime role may run what it runs is the tests' job: they connect as
# `<name>_app`. Needs the PostgreSQL server binaries (initdb, pg_ctl, psql); no server may run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

mode=check
case "${1:-}" in
  "") ;;
  --write) mode=write ;;
  *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

# find_pg_bin, as_pg and port_in_use: the helpers the bench scripts start PostgreSQL with.
source "$root/deploy/bench/lib.sh"
die() { printf 'check-sqlx: %s\n' "$*" >&2; exit 1; }

crates=()
for dir in */; do
  dir=${dir%/}
  [ -d "$dir/.sqlx" ] && [ -f "$dir/Cargo.toml" ] && [ -d "$dir/migrations" ] && crates+=("$dir")
done
[ "${#crates[@]}" -gt 0 ] || die "no crate has a .sqlx folder"

INITDB=$(find_pg_bin initdb)
PG_CTL=$(find_pg_bin pg_ctl)
PSQL=$(find_pg_bin psql)

# `lnpg-` marks it as a throwaway cluster, like the test harness's.
work=$(mktemp -d /tmp/lnpg-sqlx.XXXXXX)
pg_data="$work/pgdata"
started=0
cleanup() {
  if [ "$started" = 1 ]; then as_pg "$PG_CTL" -D "$pg_data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$pg_data"
[ "$(id -u)" = 0 ] && chown -R postgres "$work"
as_pg "$INITDB" -D "$pg_data" -A trust -U postgres -E UTF8 --locale=C >"$work/initdb.log" 2>&1 \
  || { cat "$work/initdb.log" >&2; die "initdb failed"; }
port=$((20000 + RANDOM % 40000))
while port_in_use "$port"; do port=$((20000 + RANDOM % 40000)); done
as_pg "$PG_CTL" -D "$pg_data" -l "$pg_data/postgres.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k '$pg_data' -c fsync=off" start >/dev/null \
  || { cat "$pg_data/postgres.log" >&2; die "PostgreSQL did not start"; }
started=1

database=sqlx_check
url() { echo "postgres://$1@127.0.0.1:$port/$database"; }
"$PSQL" -X -q "postgres://postgres@127.0.0.1:$port/postgres" -c "CREATE DATABASE $database" >/dev/null
"$PSQL" -X -q -v ON_ERROR_STOP=1 "$(url postgres)" -f deploy/postgres/bootstrap.sql >/dev/null

stale=()
for crate in "${crates[@]}"; do
  schema=${crate%-service}
  package=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$crate/Cargo.toml" | head -n 1)
  echo "check-sqlx: $package (schema $schema)"
  for migration in "$crate"/migrations/*.sql; do
    # One transaction per file, as sqlx runs it, except for files sqlx runs without one (those
    # starting "-- no-transaction": CREATE INDEX CONCURRENTLY, batches that COMMIT).
    single=(-1)
    head -n 1 "$migration" | grep -q '^-- no-transaction' && single=()
    "$PSQL" -X -q -v ON_ERROR_STOP=1 "${single[@]}" "$(url "${schema}_owner")" -f "$migration" >/dev/null \
      || die "migration $migration failed"
  done

  fresh="$work/$crate.sqlx"
  mkdir -p "$fresh"
  # The query macros only write their data when they run: make cargo recompile the crate.
  find "$crate/src" -name '*.rs' -exec touch {} +
  SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$fresh" DATABASE_URL="$(url "${schema}_owner")" \
    cargo check --quiet --locked -p "$package" --all-targets

  if [ "$mode" = write ]; then
    rm -f "$crate"/.sqlx/query-*.json
    cp "$fresh"/query-*.json "$crate/.sqlx/" 2>/dev/null || true
    echo "check-sqlx: wrote $(ls "$crate/.sqlx" | wc -l) files to $crate/.sqlx"
  elif ! diff -r "$crate/.sqlx" "$fresh" >"$work/$crate.diff"; then
    cat "$work/$crate.diff"
    stale+=("$crate")
  fi
done

if [ "${#stale[@]}" -gt 0 ]; then
  die "stale checked-query data in: ${stale[*]} (run .ci/check-sqlx.sh --write and commit)"
fi
echo "check-sqlx: ok"
