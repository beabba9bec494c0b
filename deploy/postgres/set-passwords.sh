#!/usr/bin/env bash
# Sets the passwords of the six LOGIN roles that bootstrap.sql creates (it sets none: local clusters
# trust loopback). Idempotent: run it after bootstrap.sql on every start, and again to rotate.
#
#   LINGO_OWNER_PASSWORD  LINGO_APP_PASSWORD  LINGO_PIPELINE_PASSWORD
#   NEWS_OWNER_PASSWORD   NEWS_APP_PASSWORD   NEWS_PIPELINE_PASSWORD
#
# Connects with psql and the standard libpq variables (PGHOST, PGPORT, PGUSER, PGPASSWORD,
# PGDATABASE) as a role allowed to ALTER ROLE (a superuser, or one with CREATEROLE).
#
# Where it runs:
#   - docker-compose.yml: the one-shot `db-init` service runs bootstrap.sql then this script
#     against the `postgres` service on every `docker compose up`, so a password changed in .env
#     takes effect on the next start.
#   - any other Postgres (a managed cloud database, a VM): run bootstrap.sql then this script with
#     PG* pointing at it.
#   - Kubernetes with CloudNativePG does not use it: the operator sets these passwords itself from
#     the Secrets listed in the Cluster's spec.managed.roles (deploy/k8s/base/20-postgres.yaml).
#
# Also works as a /docker-entrypoint-initdb.d script of the official postgres image (there psql
# reaches the server through the local socket as POSTGRES_USER).
#
# Passwords never appear on a command line (ps would show them): psql reads each one from the
# environment with \getenv (psql 15 or later) and quotes it with :'var'.
set -euo pipefail

roles=(lingo_owner lingo_app lingo_pipeline news_owner news_app news_pipeline)

# The official postgres image's init phase names the database in POSTGRES_DB.
if [ -z "${PGDATABASE:-}" ] && [ -n "${POSTGRES_DB:-}" ]; then
  export PGDATABASE="$POSTGRES_DB"
fi
if [ -z "${PGUSER:-}" ] && [ -n "${POSTGRES_USER:-}" ]; then
  export PGUSER="$POSTGRES_USER"
fi

missing=()
for role in "${roles[@]}"; do
  var="${role^^}_PASSWORD"
  value="${!var:-}"
  if [ -z "$value" ]; then
    missing+=("$var")
  elif [ "${#value}" -lt 12 ]; then
    echo "set-passwords: $var is shorter than 12 characters" >&2
    exit 1
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "set-passwords: missing environment variables: ${missing[*]}" >&2
  exit 1
fi

# Fail early with a clear message if bootstrap.sql has not run yet.
{
  echo "DO \$\$ BEGIN"
  echo "  IF (SELECT count(*) FROM pg_roles WHERE rolname IN ($(printf "'%s'," "${roles[@]}" | sed 's/,$//'))) <> ${#roles[@]} THEN"
  echo "    RAISE EXCEPTION 'roles missing: run deploy/postgres/bootstrap.sql first';"
  echo "  END IF;"
  echo "END \$\$;"
  for role in "${roles[@]}"; do
    echo "\\getenv pw ${role^^}_PASSWORD"
    echo "ALTER ROLE ${role} WITH LOGIN PASSWORD :'pw';"
  done
  echo "\\unset pw"
} | psql --no-psqlrc --quiet --set ON_ERROR_STOP=1 >/dev/null

echo "set-passwords: passwords set for ${roles[*]}"
