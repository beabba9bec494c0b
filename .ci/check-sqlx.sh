#!/usr/bin/env bash
# The checked-query data of every crate that has a `.sqlx/` folder (what `sqlx::query!` and
# friends read when building without a database) must be what the crate's statements and
# migrations give today: `cargo sqlx prepare --check` (sqlx-cli) against a throwaway PostgreSQL
# cluster with the roles of deploy/postgres/bootstrap.sql and the crate's migrations applied
# (`sqlx migrate run`, as the binaries' `migrate` does).
#
#   .ci/check-sqlx.sh            fail when a crate's .sqlx/ is stale (a missing or changed query;
#                                sqlx-cli only warns about an unused one)
#   .ci/check-sqlx.sh --write    `cargo sqlx prepare`: rewrite the .sqlx/ folders (after changing
#                                a statement or a migration); commit the result
#
# Installs sqlx-cli (crates.io, the version of sqlx in Cargo.lock) when it is missing.
# A crate `<name>-service` owns schema `<name>`, migrated by role `<name>_owner` and run as
# `<name>_app`. The statements are described as `<name>_owner`: the crate also holds the
# pipeline's writes (seed, import, recount), which PostgreSQL will not even describe to the
# runtime role. Whether the runtime role may run what it runs is the tests' job: they connect as
# `<name>_app`. Needs the PostgreSQL server binaries (initdb, pg_ctl, psql); no server may run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

check=(--check)
case "${1:-}" in
  "") ;;
  --write) check=() ;;
  *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

# find_pg_bin, as_pg and port_in_use: the helpers the bench scripts start PostgreSQL with.
source "$root/deploy/bench/lib.sh"
die() { printf 'check-sqlx: %s\n' "$*" >&2; exit 1; }

# sqlx-cli of the workspace's sqlx version (its query data format follows the macros').
sqlx_version=$(awk '/^name = "sqlx"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ "$(sqlx --version 2>/dev/null)" != "sqlx-cli $sqlx_version" ]; then
  cargo install --locked "sqlx-cli@$sqlx_version" --no-default-features --features postgres,rustls
fi

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

for crate in "${crates[@]}"; do
  owner_url=$(url "${crate%-service}_owner")
  echo "check-sqlx: $crate"
  sqlx migrate run --no-dotenv --source "$crate/migrations" --database-url "$owner_url" >/dev/null
  # Run in the crate's folder: its own .sqlx/, its own targets (tests hold queries too).
  (cd "$crate" && DATABASE_URL="$owner_url" cargo sqlx prepare "${check[@]}" -- --all-targets --locked --quiet) \
    || die "stale checked-query data in $crate (run .ci/check-sqlx.sh --write and commit)"
done
echo "check-sqlx: ok"
