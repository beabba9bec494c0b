#!/usr/bin/env bash
# The gateway has no database: nothing it links may pull in sqlx (shared-auth's `postgres`
# feature is for the services). Dev-dependencies (the in-process system test) do not count.
set -euo pipefail
cd "$(dirname "$0")/.."

found=$(cargo tree --locked -p gateway -e normal --prefix none | grep -c '^sqlx' || true)
if [ "$found" -ne 0 ]; then
  echo "the gateway links sqlx:"
  cargo tree --locked -p gateway -e normal -i sqlx-core || true
  exit 1
fi
echo "the gateway links no sqlx"
