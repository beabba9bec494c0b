"""Strict schema validation of rendered manifests, what `kubeconform -strict` with our CRD schemas
would do (kubeconform installs from none of the registries this project reaches): built-in kinds
against the Kubernetes OpenAPI schemas that kubernetes-validate ships (strict: unknown fields are
errors), custom resources against the CRD schemas vendored in deploy/k8s/schemas (unknown fields
are errors unless the CRD preserves them). Prints one line per invalid resource; exits 1 if any.
--self-test first breaks copies of the given resources in known ways (an unknown field and a wrong
type, in a built-in kind and in a custom resource) and fails unless each break is reported.

    kubectl kustomize deploy/k8s/overlays/dev | python deploy/k8s/validate.py - --k8s-versions 1.37,1.35
"""

import copy

import argparse
import json
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate.utils as kv
import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"


def strict(node):
    """additionalProperties: false wherever a CRD schema lists properties and keeps no unknown fields."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: strict(v) for k, v in node.items()}
    if "properties" in node and "additionalProperties" not in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        node["additionalProperties"] = False
    return node


def crd_validators() -> dict:
    validators = {}
    for path in sorted(SCHEMAS.glob("*/*.json")):
        kind, version = path.stem.rsplit("_", 1)
        schema = strict(json.loads(path.read_text()))
        # metadata is the API server's ObjectMeta, which CRD schemas leave open.
        schema.setdefault("properties", {})["metadata"] = {"type": "object"}
        validators[(f"{path.parent.name}/{version}", kind)] = jsonschema.Draft7Validator(schema)
    return validators


def problems(doc: dict, versions: list[str], validators: dict) -> list[str]:
    validator = validators.get((doc.get("apiVersion"), doc.get("kind")))
    if validator is not None:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        return [f"at {'.'.join(map(str, e.path)) or '(root)'}: {e.message[:300]}" for e in errors[:3]]
    found = []
    for version in versions:
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as e:
            found.append(f"Kubernetes {version} at {'.'.join(map(str, e.path)) or '(root)'}: {e.message}")
        except kv.SchemaNotFoundError:
            return [f"no schema for {doc.get('apiVersion')} {doc.get('kind')} (vendor its CRD in {SCHEMAS})"]
        except kv.VersionNotSupportedError as e:
            return [e.message]
    return found


# (kind, path to set, value, what the report must name): each break must be reported.
BREAKS = [
    ("Deployment", "spec.template.spec.containers.0.imagePullSecret", "typo", "imagePullSecret"),
    ("ConfigMap", "data.NEWS_DB_MAX_CONNECTIONS", 10, "NEWS_DB_MAX_CONNECTIONS"),
    ("Cluster", "spec.instance", 3, "instance"),
    ("ObjectStore", "spec.retentionPolicy", "30 days", "retentionPolicy"),
]


def self_test(docs: list[dict], versions: list[str], validators: dict) -> list[str]:
    unreported = []
    for kind, path, value, needle in BREAKS:
        doc = copy.deepcopy(next(d for d in docs if d.get("kind") == kind))
        *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = doc
        for key in parents:
            node = node[key]
        node[last] = value
        found = problems(doc, versions[:1], validators)
        if not any(needle in p for p in found):
            unreported.append(f"{kind} with {path}={value!r}: expected a problem naming {needle}, got {found}")
    return unreported


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="rendered YAML, or - for stdin")
    parser.add_argument("--k8s-versions", default="1.37,1.35")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    texts = [sys.stdin.read() if f == "-" else Path(f).read_text() for f in args.files]
    docs = [d for text in texts for d in yaml.safe_load_all(text) if d]
    versions = args.k8s_versions.split(",")
    validators = crd_validators()
    if args.self_test:
        unreported = self_test(docs, versions, validators)
        for line in unreported:
            print(f"validate self-test: NOT DETECTED: {line}")
        if unreported:
            return 1
        print(f"validate self-test: all {len(BREAKS)} deliberate breaks reported", file=sys.stderr)
    failed = 0
    for doc in docs:
        for problem in problems(doc, versions, validators):
            failed += 1
            print(f"invalid {doc.get('kind')}/{doc.get('metadata', {}).get('name')}: {problem}")
    print(f"validate: {len(docs)} resources, {failed} problems (strict; Kubernetes {', '.join(versions)}; "
          f"custom resources against {SCHEMAS.name}/)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
