#!/usr/bin/env bash
# Prints the path of the virtualenv holding the pinned checking tools of deploy/check-requirements.txt
# (kubectl, kubernetes-validate, jsonschema, ...), (re)creating it first when the pins changed.
#   venv=$(deploy/check-venv.sh)
# CHECK_VENV overrides where it lives (default ${XDG_CACHE_HOME:-$HOME/.cache}/lingonews-deploy-check-venv).
set -euo pipefail
requirements="$(cd "$(dirname "$0")" && pwd)/check-requirements.txt"
venv=${CHECK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lingonews-deploy-check-venv}
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing the pinned checking tools into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements" >&2
  echo "$want" >"$stamp"
fi
echo "$venv"
