#!/usr/bin/env bash
# The gate in front of a production apply: checks overlays/prod/params.env (or --params FILE),
# renders the prod overlay with it and validates the result strictly. Refuses, naming each one,
# any placeholder left (a value with "fill-me", a .invalid host, an all-zero digest, or one of
# base/'s own placeholders in the rendered output), a JWKS URL or backup endpoint that is not
# https (the binaries accept http; production must not), an image not pinned by digest or whose
# tag is not RELEASE, and any HS256 secret. Nothing is applied.
#
#   deploy/k8s/check-prod.sh                       # the committed params.env (fails until filled)
#   deploy/k8s/check-prod.sh --print | kubectl apply -f -     # the release step (deploy/README.md)
#   deploy/k8s/check-prod.sh --params deploy/k8s/overlays/prod/params.example-filled.env
#   deploy/k8s/check-prod.sh --self-test           # CI: the example passes, every placeholder fails
set -euo pipefail
k8s=$(cd "$(dirname "$0")" && pwd)
params="$k8s/overlays/prod/params.env"
example="$k8s/overlays/prod/params.example-filled.env"
print=0
self_test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --params) params=$(realpath "$2"); shift 2 ;;
    --print) print=1; shift ;;
    --self-test) self_test=1; shift ;;
    *) echo "usage: $0 [--params FILE] [--print] [--self-test]" >&2; exit 2 ;;
  esac
done
venv=$("$k8s/../check-venv.sh")

# The rules for each value of params.env; prints one line per problem, naming the key.
check_params() {
  "$venv/bin/python" - "$1" <<'PY'
import re
import sys

values = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("#"):
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip()
release = values.get("RELEASE", "")
https = lambda v: v.startswith("https://")
image = lambda v: re.fullmatch(r"[a-z0-9.:-]+(/[a-z0-9._-]+)+:" + re.escape(release) + r"@sha256:[0-9a-f]{64}", v)
rules = {
    "STORAGE_CLASS": (lambda v: re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", v), "a storage class name"),
    "GATEWAY_CLASS": (lambda v: re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", v), "a GatewayClass name"),
    "API_HOST": (lambda v: re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+", v), "a lower-case DNS name"),
    "BACKUP_DESTINATION": (lambda v: re.fullmatch(r"(s3|gs)://[^/\s]+/\S+|https://\S+", v), "s3://<bucket>/<prefix> (or gs://, Azure https://)"),
    "BACKUP_ENDPOINT": (https, "an https:// URL"),
    "AUTH_JWKS_URL": (https, "an https:// URL (production verifies keys fetched over TLS only)"),
    "AUTH_ISSUER": (lambda v: v != "", "the iss your identity provider writes"),
    "AUTH_AUDIENCE": (lambda v: v != "", "the aud your identity provider writes for this API"),
    "RELEASE": (lambda v: re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,47}[a-z0-9])?", v), "lower case, digits, '.', '-', at most 49 characters"),
    "GATEWAY_IMAGE": (image, f"<registry>/<name>:{release}@sha256:<64 hex digits>"),
    "LINGO_IMAGE": (image, f"<registry>/<name>:{release}@sha256:<64 hex digits>"),
    "NEWS_IMAGE": (image, f"<registry>/<name>:{release}@sha256:<64 hex digits>"),
}
for key in sorted(set(values) - set(rules)):
    print(f"{key}: not a setting of the prod overlay")
for key, (valid, wanted) in rules.items():
    value = values.get(key)
    if value is None:
        print(f"{key}: missing")
    elif re.search(r"fill-me|\.invalid\b|sha256:0{64}", value, re.I):
        print(f"{key}: placeholder left ({value})")
    elif not valid(value):
        print(f"{key}: {value!r} is not {wanted}")
PY
}

# Placeholders of base/ that no setting of params.env replaced, and what production must not hold.
check_rendered() {
  "$venv/bin/python" - "$1" <<'PY'
import re
import sys

import yaml

for doc in yaml.safe_load_all(open(sys.argv[1])):
    if not doc:
        continue
    where = f"{doc['kind']}/{doc['metadata']['name']}"
    text = yaml.safe_dump(doc)
    for marker in re.findall(r"fill-me|[\w.-]+\.invalid\b|STORAGE_CLASS|GATEWAY_CLASS|BACKUP_BUCKET|BACKUP_S3_ENDPOINT|registry\.example\.com", text):
        print(f"{where}: placeholder left in the rendered overlay ({marker})")
    if re.search(r"AUTH_HS256_SECRET|lingonews-jwt", text):
        print(f"{where}: HS256 secret in production (dev overlay and compose only)")
    for image in re.findall(r"image: (\S+)", text):
        if "@sha256:" not in image and doc["kind"] != "Cluster":
            print(f"{where}: image {image} is not pinned by digest")
PY
}

report() { echo "check-prod: $1 is refused:"; sed 's/^/  /' <<<"$2"; }

# Renders the prod overlay with the given params file (a copy of deploy/k8s, so the committed
# params.env is never touched), then runs every check. Prints the problems; non-zero if any.
check() {
  local file=$1 out problems
  problems=$(check_params "$file")
  if [ -n "$problems" ]; then
    report "$file" "$problems" >&2
    return 1
  fi
  work=$(mktemp -d)
  cp -r "$k8s" "$work/k8s"
  cp "$file" "$work/k8s/overlays/prod/params.env"
  out="$work/rendered.yaml"
  if ! "$venv/bin/kubectl" kustomize "$work/k8s/overlays/prod" >"$out"; then
    echo "check-prod: $file: kubectl kustomize failed" >&2
    rm -rf "$work"
    return 1
  fi
  problems=$(check_rendered "$out")
  if [ -n "$problems" ] || ! "$venv/bin/python" "$k8s/validate.py" "$out" >&2; then
    [ -z "$problems" ] || report "$file" "$problems" >&2
    rm -rf "$work"
    return 1
  fi
  [ "$print" = 1 ] && cat "$out"
  rm -rf "$work"
  echo "check-prod: $file: the prod overlay renders with no placeholder and validates" >&2
}

if [ "$self_test" = 0 ]; then
  check "$params"
  exit
fi

# Self-test: the filled example passes; the committed file fails naming every setting; the
# example with any one setting put back to its placeholder, or with an http JWKS URL, fails
# naming that setting.
check "$example"
committed=$(check "$k8s/overlays/prod/params.env" 2>&1) && { echo "self-test: the committed params.env passed" >&2; exit 1; }
mutant=$(mktemp)
trap 'rm -f "$mutant"' EXIT
keys=$(grep -oE '^[A-Z_]+' "$example")
for key in $keys; do
  grep -q "^$key: placeholder left" <<<"$(sed 's/^ *//' <<<"$committed")" ||
    [ "$key" = AUTH_AUDIENCE ] || { echo "self-test: the committed $key is not named a placeholder" >&2; exit 1; }
  placeholder=$(grep "^$key=" "$k8s/overlays/prod/params.env")
  [ "$key" = AUTH_AUDIENCE ] && placeholder="$key=fill-me"
  grep -v "^$key=" "$example" >"$mutant"
  echo "$placeholder" >>"$mutant"
  if check "$mutant" 2>"$mutant.err"; then echo "self-test: $placeholder passed" >&2; exit 1; fi
  grep -q "$key: placeholder left" "$mutant.err" || { echo "self-test: $placeholder not named" >&2; cat "$mutant.err" >&2; exit 1; }
done
sed 's|^AUTH_JWKS_URL=https://|AUTH_JWKS_URL=http://|' "$example" >"$mutant"
if check "$mutant" 2>"$mutant.err"; then echo "self-test: an http JWKS URL passed" >&2; exit 1; fi
rm -f "$mutant.err"
echo "$committed" >&2
echo "check-prod self-test: the filled example passes; the committed params.env and each placeholder put back fail, named" >&2
