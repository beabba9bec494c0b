"""Checks the deployment files without a Docker engine or a cluster (run by deploy/check-manifests.sh).

What it checks, section by section (each prints one summary line, every failure one line):

  kubernetes   every overlay under deploy/k8s/overlays, rendered with `kubectl kustomize`, and the
               Secrets make-secrets.sh prints, through deploy/k8s/validate.py: built-in kinds by
               kubernetes-validate in strict mode against each version in --k8s-versions; custom
               resources (CloudNativePG, Barman Cloud, Gateway API, Prometheus Operator) against
               their CRD schemas vendored in deploy/k8s/schemas (unknown fields are errors unless
               the CRD preserves them). Every check below runs on each rendered overlay.
  k8s-policy   what the issue requires of the manifests: probes, requests and limits, non-root and
               read-only root filesystem, no Secret values committed, references that resolve
               (ConfigMaps, Secrets and their keys, Service selectors and ports, HPA and PDB
               targets, the CNPG Cluster's ConfigMap and role Secrets), news reads on the read-only
               Postgres service, bootstrap.sql identical to deploy/postgres/bootstrap.sql; backups
               (WAL archiving plugin, ObjectStore with retention and Secrets from make-secrets.sh, a
               daily ScheduledBackup), Guaranteed QoS and a storageClass; the HTTPRoute publishes
               exactly /v1, /docs, /openapi.json to the gateway Service; a PodMonitor scrapes each
               binary and the database on a declared port.
  netpol       who can reach what, evaluated from the NetworkPolicies: news only from the gateway;
               lingo from the gateway and the `analytics` namespace; Postgres only from the
               services, their Jobs and CloudNativePG itself; the monitoring namespace to each
               metrics port. Egress is denied by default and opened for DNS, the upstreams,
               Postgres, the collector and HTTPS, each to the pods that need it.
  compose      docker-compose.yml against the Compose Specification JSON schema (the copy vendored
               by the pinned check-jsonschema package), before and after substituting .env.example;
               every ${VAR} defined in .env.example and every .env.example entry used; published
               ports; health-gated dependencies have a health check; upstream URLs resolve.
  env          every variable that compose, the manifests or the Dockerfile set for one of our
               binaries is one that binary accepts (`<bin> <subcommand> --help` lists each as
               `[env: NAME]`), and every variable it requires is set. Allowed without being in
               --help: RUST_LOG (tracing's filter) and OTEL_* (read by the OpenTelemetry SDK).
               Database URLs use the role meant for them, and on Kubernetes sslmode=verify-full
               with sslrootcert in the mounted CloudNativePG CA; AUTH_* are identical across the
               three binaries of one deployment.
  dockerfile   the image builds the workspace's binary crates with `cargo build --release --locked
               --no-default-features` (no development code such as the gateway's mint-token)
               (what CI builds and tests), one target per binary, non-root, with a HEALTHCHECK;
               the build context's allow-list covers every workspace member.
  otel         the collector configuration's pipelines name defined components.

`--self-test` first breaks a copy of the inputs in known ways and fails unless every break is
reported, so a check that cannot fail is itself caught.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.resources
import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import yaml

# Schema validation (strict, built-in kinds and the vendored CRD schemas) is deploy/k8s/validate.py,
# shared with deploy/k8s/check-prod.sh; this file adds the project's own rules on top.
sys.path.insert(0, str(Path(__file__).resolve().parent / "k8s"))
import validate as schema_validation  # noqa: E402

# --- project facts --------------------------------------------------------------------------------

BINARIES = ("gateway", "lingo-service", "news-service")
K8S_DIR = "deploy/k8s"
OVERLAYS_DIR = "deploy/k8s/overlays"
SCHEMAS_DIR = "deploy/k8s/schemas"
# The overlay whose sizing the production requirements (instances, HPA bounds) apply to.
PRODUCTION_OVERLAY = "prod"
COMPOSE_FILE = "docker-compose.yml"
ENV_EXAMPLE = ".env.example"
DOCKERFILE = "deploy/docker/Dockerfile"
DOCKERIGNORE = "deploy/docker/Dockerfile.dockerignore"
BOOTSTRAP_SQL = "deploy/postgres/bootstrap.sql"
MAKE_SECRETS = "deploy/k8s/make-secrets.sh"
OTEL_CONFIG = "deploy/otel-collector.yaml"

# API groups validated against the CRD schemas vendored in SCHEMAS_DIR, not kubernetes-validate.
CRD_GROUPS = {"postgresql.cnpg.io", "barmancloud.cnpg.io", "gateway.networking.k8s.io",
              "monitoring.coreos.com"}
BARMAN_PLUGIN = "barman-cloud.cloudnative-pg.io"
# What the HTTPRoute may publish: (match type, path).
PUBLIC_PATHS = {("PathPrefix", "/v1"), ("PathPrefix", "/docs"), ("Exact", "/openapi.json")}
PG_CA_MOUNT = "/etc/lingonews/pg-ca"
MONITORING_NAMESPACE = "monitoring"
# The ports the scraper may reach: the binaries' API ports (they serve /metrics there) and
# CloudNativePG's exporter.
METRICS_PORTS = {8080, 8081, 8082, 9187}

# Variables read outside clap, so absent from --help: tracing's filter and the OpenTelemetry SDK.
ALLOWED_EXTRA_ENV = {"RUST_LOG"}
ALLOWED_EXTRA_PREFIXES = ("OTEL_",)

# What a container running <binary> <subcommand> must be given, beyond what clap marks required:
# the listen address (the default binds loopback, unreachable in a container), the database URL of
# the subcommand's role, the gateway's upstreams (an empty default is accepted by clap), and news'
# read URL (the read replica of the issue).
POLICY_REQUIRED = {
    ("gateway", "serve"): ["GATEWAY_LISTEN_ADDR", "LINGO_UPSTREAMS", "NEWS_UPSTREAMS"],
    ("lingo-service", "serve"): ["LINGO_LISTEN_ADDR", "LINGO_DATABASE_URL"],
    ("lingo-service", "migrate"): ["LINGO_OWNER_DATABASE_URL"],
    ("lingo-service", "seed"): ["LINGO_PIPELINE_DATABASE_URL"],
    ("news-service", "serve"): ["NEWS_LISTEN_ADDR", "NEWS_DATABASE_URL", "NEWS_DATABASE_READ_URL"],
    ("news-service", "migrate"): ["NEWS_OWNER_DATABASE_URL"],
    ("news-service", "seed"): ["NEWS_PIPELINE_DATABASE_URL"],
    ("news-service", "import"): ["NEWS_PIPELINE_DATABASE_URL"],
}
# Token verification needs a key source; which one is a deployment choice.
AUTH_KEY_SOURCES = ["AUTH_HS256_SECRET", "AUTH_JWKS_FILE", "AUTH_JWKS_URL"]
LISTEN_VARS = {"gateway": "GATEWAY_LISTEN_ADDR", "lingo-service": "LINGO_LISTEN_ADDR",
               "news-service": "NEWS_LISTEN_ADDR"}
UPSTREAM_VARS = {"LINGO_UPSTREAMS": "lingo-service", "NEWS_UPSTREAMS": "news-service"}
# Least privilege: which database role each URL variable must log in as.
DB_URL_ROLES = {
    "LINGO_DATABASE_URL": "lingo_app", "LINGO_OWNER_DATABASE_URL": "lingo_owner",
    "LINGO_PIPELINE_DATABASE_URL": "lingo_pipeline",
    "NEWS_DATABASE_URL": "news_app", "NEWS_DATABASE_READ_URL": "news_app",
    "NEWS_OWNER_DATABASE_URL": "news_owner", "NEWS_PIPELINE_DATABASE_URL": "news_pipeline",
}
DATABASE = "lingonews"
# Compose: the only services that publish ports (the issue: the gateway and the tracing UI).
COMPOSE_PUBLISHED = {"gateway", "jaeger"}
# Who may open connections to whom (netpol section). Workloads are named by
# app.kubernetes.io/name; "postgres" stands for the CloudNativePG instance pods.
EXPECTED_INGRESS = {
    "news-service": {"pods": {"gateway"}, "namespaces": {MONITORING_NAMESPACE}},
    "lingo-service": {"pods": {"gateway"}, "namespaces": {"analytics", MONITORING_NAMESPACE}},
    "postgres": {"pods": {"lingo-service", "news-service", "postgres"},
                 "namespaces": {"cnpg-system", MONITORING_NAMESPACE}},
}
# Egress: which of our workloads each may reach ("postgres" = the CNPG instances). Anything else
# in the namespace is an error; every pod must be able to resolve names (DNS).
EXPECTED_EGRESS_PODS = {
    "gateway": {"lingo-service", "news-service"},
    "lingo-service": {"postgres"},
    "news-service": {"postgres"},
    "postgres": {"postgres"},
}


# --- results ------------------------------------------------------------------------------------

class Report:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.notes: dict[str, list[str]] = {}

    def error(self, section: str, message: str) -> None:
        self.errors.setdefault(section, []).append(message)

    def note(self, section: str, message: str) -> None:
        self.notes.setdefault(section, []).append(message)

    def all_errors(self) -> list[str]:
        return [f"[{s}] {m}" for s, ms in self.errors.items() for m in ms]


@dataclasses.dataclass
class HelpInfo:
    accepted: set[str]
    required: set[str]


@dataclasses.dataclass
class Container:
    origin: str
    platform: str                 # "k8s" or "compose"
    binary: str
    subcommand: str
    env: dict[str, Any]           # set explicitly: name -> value, ("secret", name, key) or ("unknown",)
    ports: set[int]               # container ports the platform routes to / probes
    workload: str = ""
    defaults: dict[str, str] = dataclasses.field(default_factory=dict)  # the image's ENV
    ca_mounts: set[str] = dataclasses.field(default_factory=set)  # mount paths of a CNPG CA Secret

    @property
    def effective(self) -> dict[str, Any]:
        """What the process sees: the image's ENV overridden by what the platform sets."""
        return {**self.defaults, **self.env}


@dataclasses.dataclass
class Model:
    root: Path
    k8s_docs: list[tuple[str, dict]]   # the overlay being checked (see overlays)
    secrets_docs: list[dict]
    compose: dict
    compose_raw_text: str
    env_example: dict[str, str]
    dockerfile: str
    dockerignore: str
    bootstrap_sql: str
    otel: dict
    workspace: dict               # members, binary crates, rust-version
    help: dict[tuple[str, str], HelpInfo]
    k8s_versions: list[str]
    overlays: dict[str, list[tuple[str, dict]]] = dataclasses.field(default_factory=dict)
    overlay: str = PRODUCTION_OVERLAY
    crd_validators: dict[tuple[str, str], jsonschema.Draft7Validator] = dataclasses.field(default_factory=dict)

    def views(self) -> list["Model"]:
        """One model per rendered overlay, sharing everything else."""
        return [dataclasses.replace(self, k8s_docs=docs, overlay=name) for name, docs in self.overlays.items()]


# --- loading ------------------------------------------------------------------------------------

def load_yaml_docs(path: Path) -> list[dict]:
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def parse_env_file(text: str) -> dict[str, str]:
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if not match:
            raise ValueError(f"{ENV_EXAMPLE}:{number}: not NAME=value: {line!r}")
        values[match.group(1)] = match.group(2)
    return values


def parse_help(text: str) -> HelpInfo:
    """Env names from clap's `[env: NAME=...]` / `[env: NAME]`, required ones from the usage line."""
    accepted = set(re.findall(r"\[env: ([A-Za-z_][A-Za-z0-9_]*)", text))
    # Option blocks: from an option line to the next one; the env name sits inside the block.
    flag_env: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        option = re.match(r"^\s{2,}(?:-\w, )?--([A-Za-z0-9][\w-]*)", line)
        if option:
            current = option.group(1)
        elif re.match(r"^\S", line):
            current = None
        env = re.search(r"\[env: ([A-Za-z_][A-Za-z0-9_]*)", line)
        if env and current:
            flag_env.setdefault(current, env.group(1))
    usage = re.search(r"Usage:(.*?)(?:\n\s*\n|\Z)", text, re.S)
    required: set[str] = set()
    if usage:
        line = usage.group(1)
        while re.search(r"\[[^\[\]]*\]", line):
            line = re.sub(r"\[[^\[\]]*\]", "", line)
        for flag in re.findall(r"--([A-Za-z0-9][\w-]*)", line):
            if flag in flag_env:
                required.add(flag_env[flag])
    return HelpInfo(accepted, required)


def binary_help(bin_dir: Path, binary: str, subcommand: str) -> HelpInfo:
    path = bin_dir / binary
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path} not found or not executable (build it, or set BIN_DIR)")
    # A clean environment: clap prints `[env: NAME=value]` for variables that are set.
    result = subprocess.run([str(path), subcommand, "--help"], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin"}, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"`{binary} {subcommand} --help` exited {result.returncode}: "
                           f"{result.stderr.strip()[:300]}")
    info = parse_help(result.stdout)
    if not info.accepted:
        raise RuntimeError(f"`{binary} {subcommand} --help` lists no [env: ...] variable")
    return info


def workspace_info(root: Path) -> dict:
    result = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=root,
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"cargo metadata failed: {result.stderr.strip()[:500]}")
    meta = json.loads(result.stdout)
    members = {}
    binaries = {}
    for package in meta["packages"]:
        if package["id"] not in meta["workspace_members"]:
            continue
        directory = Path(package["manifest_path"]).parent.relative_to(root).as_posix()
        members[package["name"]] = directory
        bins = [t["name"] for t in package["targets"] if "bin" in t["kind"]]
        if bins:
            binaries[package["name"]] = bins
    rust_version = None
    for package in meta["packages"]:
        if package.get("rust_version"):
            rust_version = package["rust_version"]
    return {"members": members, "binaries": binaries, "rust_version": rust_version,
            "embedded": embedded_files(root, members)}


def run_make_secrets(root: Path) -> list[dict]:
    # DEV_HS256=1: the dev overlay's HS256 Secret too, so every overlay's references resolve.
    result = subprocess.run(["bash", str(root / MAKE_SECRETS)], capture_output=True, text=True,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DEV_HS256": "1"},
                            timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"{MAKE_SECRETS} failed: {result.stderr.strip()[:300]}")
    return [d for d in yaml.safe_load_all(result.stdout) if d is not None]


def render_overlays(root: Path, kubectl: str) -> dict[str, list[tuple[str, dict]]]:
    overlays = {}
    for directory in sorted(p for p in (root / OVERLAYS_DIR).iterdir() if (p / "kustomization.yaml").is_file()):
        result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True,
                                timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl kustomize {directory.relative_to(root)} failed: "
                               f"{result.stderr.strip()[:500]}")
        origin = directory.relative_to(root).as_posix()
        overlays[directory.name] = [(origin, d) for d in yaml.safe_load_all(result.stdout) if d is not None]
    if PRODUCTION_OVERLAY not in overlays:
        raise RuntimeError(f"no overlay {OVERLAYS_DIR}/{PRODUCTION_OVERLAY}")
    return overlays


def load_model(root: Path, bin_dir: Path, k8s_versions: list[str], kubectl: str = "kubectl") -> Model:
    overlays = render_overlays(root, kubectl)
    k8s_docs = overlays[PRODUCTION_OVERLAY]
    compose_text = (root / COMPOSE_FILE).read_text()
    help_info = {}
    for binary, subcommands in {"gateway": ["serve"], "lingo-service": ["serve", "migrate", "seed"],
                                "news-service": ["serve", "migrate", "seed", "import"]}.items():
        for subcommand in subcommands:
            help_info[(binary, subcommand)] = binary_help(bin_dir, binary, subcommand)
    return Model(
        root=root,
        k8s_docs=k8s_docs,
        secrets_docs=run_make_secrets(root),
        compose=yaml.safe_load(compose_text),
        compose_raw_text=compose_text,
        env_example=parse_env_file((root / ENV_EXAMPLE).read_text()),
        dockerfile=(root / DOCKERFILE).read_text(),
        dockerignore=(root / DOCKERIGNORE).read_text(),
        bootstrap_sql=(root / BOOTSTRAP_SQL).read_text(),
        otel=yaml.safe_load((root / OTEL_CONFIG).read_text()),
        workspace=workspace_info(root),
        help=help_info,
        k8s_versions=k8s_versions,
        overlays=overlays,
        crd_validators=schema_validation.crd_validators(),
    )


# --- helpers --------------------------------------------------------------------------------------

def kind_name(doc: dict) -> str:
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def api_group(doc: dict) -> str:
    api_version = doc.get("apiVersion", "")
    return api_version.split("/")[0] if "/" in api_version else ""


def selects(selector: dict | None, labels: dict) -> bool:
    """Kubernetes label selector semantics (an empty selector selects everything)."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def image_binary(image: str) -> str:
    name = image.split("@")[0].rsplit("/", 1)[-1]
    return name.split(":")[0]


def pod_template(doc: dict) -> dict | None:
    kind = doc.get("kind")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return doc.get("spec", {}).get("template")
    if kind == "CronJob":
        return doc.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template")
    if kind == "Pod":
        return doc
    return None


def interpolate(value: str, env: dict[str, str], missing: list[str]) -> str:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}, $VAR and $$."""
    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, argument = match.group(2), match.group(3) or ""
        if name not in env:
            missing.append(name)
        current = env.get(name)
        if operator in (":-", "-"):
            if current is None or (operator == ":-" and current == ""):
                return argument
        elif operator in (":?", "?"):
            if current is None or (operator == ":?" and current == ""):
                missing.append(name)
                return ""
        return current or ""
    pattern = r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|-|:\?|\?)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
    return re.sub(pattern, substitute, value)


def interpolate_tree(node: Any, env: dict[str, str], missing: list[str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env, missing)
    if isinstance(node, list):
        return [interpolate_tree(n, env, missing) for n in node]
    if isinstance(node, dict):
        return {k: interpolate_tree(v, env, missing) for k, v in node.items()}
    return node


def referenced_vars(node: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(node, str):
        text = node.replace("$$", "")
        names |= set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
        names |= set(re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", text))
    elif isinstance(node, list):
        for n in node:
            names |= referenced_vars(n)
    elif isinstance(node, dict):
        for k, v in node.items():
            names |= referenced_vars(v)
    return names


def env_value_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def listen_port(address: str | None) -> int | None:
    if not address or ":" not in address:
        return None
    try:
        return int(address.rsplit(":", 1)[1])
    except ValueError:
        return None


def listen_host_is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- kubernetes: schema -----------------------------------------------------------------------------

_problems_cache: dict[str, list[str]] = {}


def schema_problems(model: Model, doc: dict) -> list[str]:
    """deploy/k8s/validate.py's findings for `doc`. Memoised: the self-test revalidates the same
    unchanged documents many times."""
    key = json.dumps([doc, model.k8s_versions], sort_keys=True, default=str)
    if key not in _problems_cache:
        _problems_cache[key] = schema_validation.problems(doc, model.k8s_versions, model.crd_validators)
    return _problems_cache[key]


def check_k8s_schema(model: Model, report: Report) -> None:
    section = "kubernetes"
    validated = 0
    custom = 0
    seen = set()
    documents = [(f, d) for f, d in model.k8s_docs] + [(MAKE_SECRETS + " (output)", d)
                                                      for d in model.secrets_docs]
    for origin, doc in documents:
        if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
            report.error(section, f"{origin}: a document without apiVersion/kind")
            continue
        identity = (doc["kind"], doc.get("metadata", {}).get("namespace"), doc.get("metadata", {}).get("name"))
        if identity in seen:
            report.error(section, f"{origin}: duplicate {kind_name(doc)}")
        seen.add(identity)
        for problem in schema_problems(model, doc):
            report.error(section, f"{origin}: {kind_name(doc)} ({doc['apiVersion']}) invalid {problem}")
        if api_group(doc) in CRD_GROUPS:
            custom += 1
        else:
            validated += 1
    report.note(section, f"{model.overlay}: {validated} resources valid (strict) against Kubernetes "
                         f"{', '.join(model.k8s_versions)}; {custom} custom resources against their "
                         f"vendored CRD schemas (deploy/k8s/validate.py)")


# --- kubernetes: policy and references ---------------------------------------------------------------

def k8s_index(model: Model) -> dict:
    namespaces = [d["metadata"]["name"] for _, d in model.k8s_docs if d.get("kind") == "Namespace"]
    config_maps = {d["metadata"]["name"]: d.get("data") or {} for _, d in model.k8s_docs
                   if d.get("kind") == "ConfigMap"}
    secrets = {d["metadata"]["name"]: d for d in model.secrets_docs}
    workloads = [(f, d) for f, d in model.k8s_docs if pod_template(d) is not None]
    clusters = [(f, d) for f, d in model.k8s_docs if d.get("kind") == "Cluster"
                and api_group(d) == "postgresql.cnpg.io"]
    return {"namespaces": namespaces, "config_maps": config_maps, "secrets": secrets,
            "workloads": workloads, "clusters": clusters}


def secret_data(secret: dict) -> dict[str, str]:
    return {k: str(v) for k, v in (secret.get("stringData") or {}).items()}


def check_k8s_policy(model: Model, report: Report) -> None:
    section = "k8s-policy"
    index = k8s_index(model)
    if len(index["namespaces"]) != 1:
        report.error(section, f"expected exactly one Namespace manifest, found {index['namespaces']}")
        return
    namespace = index["namespaces"][0]
    checked = 0
    for origin, doc in model.k8s_docs:
        where = f"{origin}: {kind_name(doc)}"
        if doc.get("kind") == "Secret":
            report.error(section, f"{where}: Secret committed; reference it and let make-secrets.sh create it")
        if doc.get("kind") != "Namespace" and doc.get("metadata", {}).get("namespace") != namespace:
            report.error(section, f"{where}: metadata.namespace must be {namespace}")

    for origin, doc in index["workloads"]:
        checked += 1
        where = f"{origin}: {kind_name(doc)}"
        template = pod_template(doc)
        spec = template.get("spec", {})
        pod_sc = spec.get("securityContext") or {}
        if spec.get("automountServiceAccountToken") is not False:
            report.error(section, f"{where}: set automountServiceAccountToken: false (no API access needed)")
        if spec.get("enableServiceLinks") is not False:
            report.error(section, f"{where}: set enableServiceLinks: false (else Kubernetes adds env vars)")
        if (pod_sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            report.error(section, f"{where}: pod securityContext.seccompProfile.type must be RuntimeDefault")
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            cwhere = f"{where} container {container.get('name')}"
            if image_binary(container.get("image", "")) not in BINARIES:
                # Only our images here; anything else would escape the env check below.
                report.error(section, f"{cwhere}: image {container.get('image')} is not one of {BINARIES}")
            sc = container.get("securityContext") or {}
            if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
                report.error(section, f"{cwhere}: runAsNonRoot must be true")
            uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
            if uid is not None and uid == 0:
                report.error(section, f"{cwhere}: runAsUser 0")
            if sc.get("readOnlyRootFilesystem") is not True:
                report.error(section, f"{cwhere}: readOnlyRootFilesystem must be true")
            if sc.get("allowPrivilegeEscalation") is not False:
                report.error(section, f"{cwhere}: allowPrivilegeEscalation must be false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                report.error(section, f"{cwhere}: capabilities.drop must contain ALL")
            resources = container.get("resources") or {}
            for part in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in (resources.get(part) or {}):
                        report.error(section, f"{cwhere}: resources.{part}.{resource} missing")
            if doc["kind"] == "Deployment":
                for probe in ("readinessProbe", "livenessProbe"):
                    if probe not in container:
                        report.error(section, f"{cwhere}: {probe} missing")
                ports = {p.get("name") for p in container.get("ports", [])} | \
                        {p.get("containerPort") for p in container.get("ports", [])}
                for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                    http = (container.get(probe) or {}).get("httpGet")
                    if http and http.get("port") not in ports:
                        report.error(section, f"{cwhere}: {probe} port {http.get('port')} is not a container port")
            check_env_refs(index, cwhere, container, report, section)
        check_secret_volumes(index, where, spec, report, section)

    check_k8s_selectors(model, index, report, section)
    check_cnpg(model, index, report, section)
    report.note(section, f"{model.overlay}: {checked} workloads: probes, resources, non-root, read-only root, "
                         f"references; backups, QoS, route, PodMonitors")


def operator_secrets(index: dict) -> set[str]:
    """Secrets CloudNativePG creates for each cluster that pods may mount: its CA."""
    return {f"{c['metadata']['name']}-ca" for _, c in index["clusters"]}


def check_secret_volumes(index: dict, where: str, spec: dict, report: Report, section: str) -> None:
    for volume in spec.get("volumes") or []:
        secret = volume.get("secret")
        if not secret:
            continue
        name = secret.get("secretName")
        if name in operator_secrets(index):
            if [i.get("key") for i in secret.get("items") or []] != ["ca.crt"]:
                report.error(section, f"{where}: volume {volume['name']} must project only ca.crt of {name}")
        elif name not in index["secrets"]:
            report.error(section, f"{where}: volume {volume['name']} mounts Secret {name}, which neither "
                                  f"{MAKE_SECRETS} nor CloudNativePG creates")


def check_env_refs(index: dict, where: str, container: dict, report: Report, section: str) -> None:
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            if name not in index["config_maps"] and not source["configMapRef"].get("optional"):
                report.error(section, f"{where}: envFrom ConfigMap {name} is not in {K8S_DIR}")
        if "secretRef" in source:
            report.error(section, f"{where}: envFrom secretRef hides the variable names; use env "
                                  f"entries with secretKeyRef")
    for entry in container.get("env", []):
        ref = (entry.get("valueFrom") or {})
        if "secretKeyRef" in ref:
            name, key = ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"]
            secret = index["secrets"].get(name)
            if secret is None:
                report.error(section, f"{where}: env {entry['name']} references Secret {name}, "
                                      f"which {MAKE_SECRETS} does not create")
            elif key not in secret_data(secret):
                report.error(section, f"{where}: env {entry['name']} references key {key} of Secret "
                                      f"{name}, which {MAKE_SECRETS} does not write")
        if "configMapKeyRef" in ref:
            name, key = ref["configMapKeyRef"]["name"], ref["configMapKeyRef"]["key"]
            if key not in index["config_maps"].get(name, {}):
                report.error(section, f"{where}: env {entry['name']} references missing ConfigMap key {name}/{key}")


def pod_labels_by_workload(index: dict) -> list[tuple[str, dict, dict]]:
    """(workload kind/name, pod labels, pod spec) of every pod template."""
    return [(kind_name(d), pod_template(d).get("metadata", {}).get("labels") or {}, pod_template(d).get("spec", {}))
            for _, d in index["workloads"]]


def check_k8s_selectors(model: Model, index: dict, report: Report, section: str) -> None:
    pods = pod_labels_by_workload(index)
    deployments = {d["metadata"]["name"]: d for _, d in model.k8s_docs if d.get("kind") == "Deployment"}
    services = {d["metadata"]["name"]: d for _, d in model.k8s_docs if d.get("kind") == "Service"}
    for origin, doc in model.k8s_docs:
        where = f"{origin}: {kind_name(doc)}"
        kind = doc.get("kind")
        if kind == "Deployment":
            selector = doc["spec"]["selector"]
            if not selects(selector, doc["spec"]["template"]["metadata"].get("labels") or {}):
                report.error(section, f"{where}: selector does not match its own pod labels")
        if kind == "Service":
            service_selector = {"matchLabels": doc["spec"].get("selector")}
            matched = [(w, spec) for w, labels, spec in pods if selects(service_selector, labels)]
            if not matched:
                report.error(section, f"{where}: selector matches no pod template")
            if any(not w.startswith("Deployment/") for w, _ in matched):
                report.error(section, f"{where}: selector also matches Job pods {[w for w, _ in matched]}")
            for port in doc["spec"].get("ports", []):
                target = port.get("targetPort", port.get("port"))
                for w, spec in matched:
                    names = {p.get("name") for c in spec.get("containers", []) for p in c.get("ports", [])}
                    numbers = {p.get("containerPort") for c in spec.get("containers", []) for p in c.get("ports", [])}
                    if target not in names and target not in numbers:
                        report.error(section, f"{where}: targetPort {target} is not a port of {w}")
        if kind == "HorizontalPodAutoscaler":
            target = doc["spec"]["scaleTargetRef"]
            if target.get("kind") != "Deployment" or target.get("name") not in deployments:
                report.error(section, f"{where}: scaleTargetRef {target} is not a Deployment here")
            elif "replicas" in deployments[target["name"]]["spec"]:
                report.error(section, f"{where}: Deployment {target['name']} sets replicas, which every "
                                      f"apply would reset under the HPA; leave it out")
        if kind == "PodDisruptionBudget":
            if not any(selects(doc["spec"].get("selector"), labels) for _, labels, _ in pods):
                report.error(section, f"{where}: selector matches no pod template")
        if kind == "Ingress":
            report.error(section, f"{where}: the public entry is the Gateway API HTTPRoute, not an Ingress")
        if kind == "HTTPRoute":
            check_http_route(model, where, doc, services, report, section)
    for name, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"].get("labels") or {}
        if not any(d.get("kind") == "PodDisruptionBudget" and selects(d["spec"].get("selector"), labels)
                   for _, d in model.k8s_docs):
            report.error(section, f"Deployment/{name} has no PodDisruptionBudget")
    # The scaling requirements, for production.
    if model.overlay != PRODUCTION_OVERLAY:
        return
    hpas = {d["spec"]["scaleTargetRef"]["name"]: d for _, d in model.k8s_docs
            if d.get("kind") == "HorizontalPodAutoscaler"}
    news = hpas.get("news-service")
    if not news or news["spec"].get("minReplicas") != 2 or news["spec"].get("maxReplicas") != 20:
        report.error(section, "news-service needs a HorizontalPodAutoscaler with minReplicas 2, maxReplicas 20")
    if "gateway" not in hpas:
        report.error(section, "the gateway needs a HorizontalPodAutoscaler")


def check_http_route(model: Model, where: str, route: dict, services: dict, report: Report, section: str) -> None:
    gateways = {d["metadata"]["name"] for _, d in model.k8s_docs if d.get("kind") == "Gateway"}
    for parent in route["spec"].get("parentRefs") or []:
        if parent.get("name") not in gateways:
            report.error(section, f"{where}: parentRef Gateway {parent.get('name')} is not here")
    published = set()
    for rule in route["spec"].get("rules") or []:
        for match in rule.get("matches") or [{"path": {"type": "PathPrefix", "value": "/"}}]:
            path = match.get("path") or {"type": "PathPrefix", "value": "/"}
            published.add((path.get("type", "PathPrefix"), path.get("value", "/")))
        for backend in rule.get("backendRefs") or []:
            service = services.get(backend.get("name"))
            if service is None or backend.get("kind", "Service") != "Service":
                report.error(section, f"{where}: backend {backend.get('name')} is not a Service here")
            elif backend.get("port") not in {p.get("port") for p in service["spec"]["ports"]}:
                report.error(section, f"{where}: backend port {backend.get('port')} not on Service {backend['name']}")
            elif service["spec"].get("selector", {}).get("app.kubernetes.io/name") != "gateway":
                report.error(section, f"{where}: routes to {backend['name']}; only the gateway is public")
    if published != PUBLIC_PATHS:
        report.error(section, f"{where}: publishes {sorted(published)}; exactly {sorted(PUBLIC_PATHS)} "
                              f"(never /metrics, /readyz, /healthz)")


def check_pod_monitors(model: Model, index: dict, report: Report, section: str) -> None:
    monitors = [d for _, d in model.k8s_docs if d.get("kind") == "PodMonitor"]
    pods = [(labels.get("app.kubernetes.io/name"), labels, spec) for _, labels, spec in pod_labels_by_workload(index)
            if labels.get("app.kubernetes.io/component") == "api"]
    for binary in BINARIES:
        scraped = [m for m in monitors for name, labels, spec in pods
                   if name == binary and selects(m["spec"].get("selector"), labels)
                   and all(e.get("port") in {p.get("name") for c in spec.get("containers", []) for p in c.get("ports", [])}
                           for e in m["spec"].get("podMetricsEndpoints", []))]
        if not scraped:
            report.error(section, f"no PodMonitor scrapes {binary} on one of its named ports")
    clusters = {c["metadata"]["name"] for _, c in index["clusters"]}
    for cluster in clusters:
        if not any((m["spec"].get("selector") or {}).get("matchLabels", {}).get("cnpg.io/cluster") == cluster
                   and [e.get("port") for e in m["spec"].get("podMetricsEndpoints", [])] == ["metrics"]
                   for m in monitors):
            report.error(section, f"no PodMonitor scrapes the CloudNativePG cluster {cluster} (port metrics, 9187)")


def guaranteed(resources: dict) -> bool:
    """requests == limits for cpu and memory, both set: Kubernetes' Guaranteed QoS for a container."""
    return all((resources.get("requests") or {}).get(r) is not None
               and (resources.get("requests") or {}).get(r) == (resources.get("limits") or {}).get(r)
               for r in ("cpu", "memory"))


def check_backups(model: Model, index: dict, cluster: dict, report: Report, section: str) -> None:
    where = f"Cluster/{cluster['metadata']['name']}"
    spec = cluster.get("spec", {})
    stores = {d["metadata"]["name"]: d for _, d in model.k8s_docs if d.get("kind") == "ObjectStore"}
    archivers = [p for p in spec.get("plugins") or [] if p.get("name") == BARMAN_PLUGIN and p.get("isWALArchiver")]
    if not archivers:
        report.error(section, f"{where}: no WAL archiving ({BARMAN_PLUGIN} with isWALArchiver: true)")
    for plugin in archivers:
        store = stores.get((plugin.get("parameters") or {}).get("barmanObjectName"))
        if store is None:
            report.error(section, f"{where}: barmanObjectName {plugin.get('parameters')} is no ObjectStore here")
            continue
        if not store["spec"].get("retentionPolicy"):
            report.error(section, f"ObjectStore/{store['metadata']['name']}: no retentionPolicy")
        sidecar = (store["spec"].get("instanceSidecarConfiguration") or {}).get("resources") or {}
        if not guaranteed(sidecar):
            report.error(section, f"ObjectStore/{store['metadata']['name']}: instanceSidecarConfiguration."
                                  f"resources requests must equal limits (the instance pods' Guaranteed QoS)")
        credentials = store["spec"]["configuration"].get("s3Credentials") or {}
        for field, ref in credentials.items():
            if not isinstance(ref, dict) or "name" not in ref:
                continue
            secret = index["secrets"].get(ref["name"])
            if secret is None or ref.get("key") not in secret_data(secret):
                report.error(section, f"ObjectStore/{store['metadata']['name']}: {field} references "
                                      f"{ref['name']}/{ref.get('key')}, which {MAKE_SECRETS} does not write")
    daily = [d for _, d in model.k8s_docs if d.get("kind") == "ScheduledBackup"
             and d["spec"].get("cluster", {}).get("name") == cluster["metadata"]["name"]
             and d["spec"].get("method") == "plugin"
             and (d["spec"].get("pluginConfiguration") or {}).get("name") == BARMAN_PLUGIN]
    if not daily:
        report.error(section, f"{where}: no ScheduledBackup (method plugin, {BARMAN_PLUGIN})")
    for backup in daily:
        fields = backup["spec"]["schedule"].split()
        if len(fields) != 6 or not all(f.isdigit() for f in fields[:3]) or fields[3:] != ["*", "*", "*"]:
            report.error(section, f"ScheduledBackup/{backup['metadata']['name']}: schedule "
                                  f"{backup['spec']['schedule']!r} is not once a day (sec min hour * * *)")
    if not guaranteed(spec.get("resources") or {}):
        report.error(section, f"{where}: resources requests must equal limits for cpu and memory (Guaranteed QoS)")
    for volume in ("storage", "walStorage"):
        if volume in spec and not spec[volume].get("storageClass"):
            report.error(section, f"{where}: {volume}.storageClass not set")


def check_cnpg(model: Model, index: dict, report: Report, section: str) -> None:
    if len(index["clusters"]) != 1:
        report.error(section, f"expected one CloudNativePG Cluster, found {len(index['clusters'])}")
        return
    origin, cluster = index["clusters"][0]
    where = f"{origin}: {kind_name(cluster)}"
    spec = cluster.get("spec", {})
    check_backups(model, index, cluster, report, section)
    check_pod_monitors(model, index, report, section)
    if model.overlay == PRODUCTION_OVERLAY and (spec.get("instances") or 0) < 3:
        report.error(section, f"{where}: instances must be at least 3 (one primary, two replicas)")
    initdb = spec.get("bootstrap", {}).get("initdb", {})
    if initdb.get("database") != DATABASE:
        report.error(section, f"{where}: bootstrap.initdb.database must be {DATABASE}")
    refs = (initdb.get("postInitApplicationSQLRefs") or {}).get("configMapRefs") or []
    if not refs:
        report.error(section, f"{where}: bootstrap.sql is not run (postInitApplicationSQLRefs)")
    for ref in refs:
        data = index["config_maps"].get(ref["name"], {})
        if ref["key"] not in data:
            report.error(section, f"{where}: ConfigMap {ref['name']} has no key {ref['key']}")
        elif data[ref["key"]] != model.bootstrap_sql:
            report.error(section, f"ConfigMap {ref['name']}/{ref['key']} differs from {BOOTSTRAP_SQL}; "
                                  f"copy the file into it again")
    roles = {r["name"]: r for r in (spec.get("managed") or {}).get("roles") or []}
    expected_roles = set(DB_URL_ROLES.values())
    if set(roles) != expected_roles:
        report.error(section, f"{where}: managed roles {sorted(roles)} != {sorted(expected_roles)}")
    for name, role in roles.items():
        if role.get("login") is not True:
            report.error(section, f"{where}: role {name} needs login: true")
        secret_name = (role.get("passwordSecret") or {}).get("name")
        secret = index["secrets"].get(secret_name)
        if secret is None:
            report.error(section, f"{where}: role {name}'s password Secret {secret_name} is not "
                                  f"created by {MAKE_SECRETS}")
        elif secret.get("type") != "kubernetes.io/basic-auth" or secret_data(secret).get("username") != name:
            report.error(section, f"Secret {secret_name}: must be kubernetes.io/basic-auth with username {name}")
    # The URLs in the Secrets must carry the role passwords CNPG sets.
    passwords = {secret_data(index["secrets"][r["passwordSecret"]["name"]]).get("username"):
                 secret_data(index["secrets"][r["passwordSecret"]["name"]]).get("password")
                 for r in roles.values() if (r.get("passwordSecret") or {}).get("name") in index["secrets"]}
    for secret in index["secrets"].values():
        for key, value in secret_data(secret).items():
            if value.startswith("postgres://"):
                url = urllib.parse.urlsplit(value)
                if url.username in passwords and url.password != passwords[url.username]:
                    report.error(section, f"Secret {secret['metadata']['name']}/{key}: password of "
                                          f"{url.username} differs from its pg-role Secret")


# --- network policies ------------------------------------------------------------------------------

def check_netpol(model: Model, report: Report) -> None:
    section = "netpol"
    index = k8s_index(model)
    policies = [d for _, d in model.k8s_docs if d.get("kind") == "NetworkPolicy"]
    # The pod universe: our workloads, and the CNPG instance pods (labelled cnpg.io/cluster=<name>).
    pods = [(labels.get("app.kubernetes.io/name", w), labels) for w, labels, _ in pod_labels_by_workload(index)]
    for _, cluster in index["clusters"]:
        pods.append(("postgres", {"cnpg.io/cluster": cluster["metadata"]["name"]}))

    def allowed_sources(labels: dict) -> tuple[set[str], set[str], bool]:
        """Workload names and namespace names that may connect; True when any source may."""
        selected = [p for p in policies if selects(p["spec"].get("podSelector"), labels)
                    and "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])]
        if not selected:
            return set(), set(), True
        workloads, namespaces, anyone = set(), set(), False
        for policy in selected:
            for rule in policy["spec"].get("ingress") or []:
                peers = rule.get("from")
                if not peers:
                    anyone = True
                for peer in peers or []:
                    if "ipBlock" in peer:
                        anyone = True
                    elif "namespaceSelector" in peer:
                        names = (peer["namespaceSelector"] or {}).get("matchLabels", {})
                        name = names.get("kubernetes.io/metadata.name")
                        if name is None or len(names) != 1 or (peer["namespaceSelector"] or {}).get("matchExpressions"):
                            anyone = True
                        else:
                            namespaces.add(name)
                    elif "podSelector" in peer:
                        workloads |= {n for n, l in pods if selects(peer["podSelector"], l)}
        return workloads, namespaces, anyone

    checked = []
    for target, expected in EXPECTED_INGRESS.items():
        # The serving pods (a migration Job's pods are only ever sources).
        targets = [labels for name, labels in pods
                   if name == target and labels.get("app.kubernetes.io/component", "api") == "api"]
        if not targets:
            report.error(section, f"no pods of {target} found to check")
            continue
        for labels in targets:
            workloads, namespaces, anyone = allowed_sources(labels)
            if anyone:
                report.error(section, f"{target} ({labels}) is reachable from anywhere")
            if workloads != expected["pods"] or namespaces != expected["namespaces"]:
                report.error(section, f"{target} ({labels}) reachable from pods {sorted(workloads)} and "
                                      f"namespaces {sorted(namespaces)}; expected pods "
                                      f"{sorted(expected['pods'])} and namespaces {sorted(expected['namespaces'])}")
        checked.append(target)
    for name, labels in pods:
        if name == "gateway":
            _, _, anyone = allowed_sources(labels)
            if anyone:
                report.error(section, "the gateway is open to any source; admit only the ingress controller")
    check_egress(policies, pods, report, section)
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            names = [((p.get("namespaceSelector") or {}).get("matchLabels") or {}).get("kubernetes.io/metadata.name")
                     for p in rule.get("from") or []]
            ports = {p.get("port") for p in rule.get("ports") or []}
            if MONITORING_NAMESPACE in names and (not ports or not ports <= METRICS_PORTS):
                report.error(section, f"NetworkPolicy {policy['metadata']['name']}: the {MONITORING_NAMESPACE} "
                                      f"namespace may reach ports {sorted(ports) or 'all'}; only metrics ports "
                                      f"{sorted(METRICS_PORTS)}")
    report.note(section, f"{model.overlay}: ingress sources as required for {', '.join(checked)}; gateway "
                         f"closed but to the edge; egress as required for {', '.join(sorted(EXPECTED_EGRESS_PODS))}")


def check_egress(policies: list[dict], pods: list[tuple[str, dict]], report: Report, section: str) -> None:
    """Egress denied by default; in-namespace destinations exactly as expected; DNS open to all."""
    for name, labels in pods:
        selected = [p for p in policies if selects(p["spec"].get("podSelector"), labels)
                    and "Egress" in (p["spec"].get("policyTypes") or [])]
        if not selected:
            report.error(section, f"{name} ({labels}): egress unrestricted (no Egress policy selects it)")
            continue
        reached, dns = set(), False
        for policy in selected:
            for rule in policy["spec"].get("egress") or []:
                peers = rule.get("to")
                if not peers:
                    report.error(section, f"{name}: NetworkPolicy {policy['metadata']['name']} allows egress "
                                          f"to anywhere")
                for peer in peers or []:
                    if "podSelector" in peer and "namespaceSelector" not in peer:
                        reached |= {n for n, l in pods if selects(peer["podSelector"], l)}
                    names = ((peer.get("namespaceSelector") or {}).get("matchLabels") or {})
                    ports = {p.get("port") for p in rule.get("ports") or []}
                    if names.get("kubernetes.io/metadata.name") == "kube-system" and 53 in ports:
                        dns = True
        expected = EXPECTED_EGRESS_PODS.get(name, set())
        if reached != expected:
            report.error(section, f"{name} ({labels}) may connect to pods {sorted(reached)}; expected {sorted(expected)}")
        if not dns:
            report.error(section, f"{name}: no egress to DNS (kube-system, port 53)")


# --- compose ---------------------------------------------------------------------------------------

def compose_schema() -> dict:
    ref = importlib.resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    return json.loads(ref.read_text())


def check_compose(model: Model, report: Report) -> None:
    section = "compose"
    validator = jsonschema.Draft202012Validator(compose_schema())
    for label, document in (("as written", model.compose), ("after .env.example substitution", None)):
        if document is None:
            document = interpolate_tree(model.compose, model.env_example, [])
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        for error in errors:
            path = ".".join(str(p) for p in error.path) or "(root)"
            report.error(section, f"{COMPOSE_FILE} ({label}) at {path}: {error.message}")
    used = referenced_vars(model.compose)
    for name in sorted(used - set(model.env_example)):
        report.error(section, f"{COMPOSE_FILE} uses ${{{name}}}, which {ENV_EXAMPLE} does not define")
    for name in sorted(set(model.env_example) - used):
        report.error(section, f"{ENV_EXAMPLE} defines {name}, which {COMPOSE_FILE} never uses")
    missing: list[str] = []
    compose = interpolate_tree(model.compose, model.env_example, missing)
    services = compose.get("services", {})
    for name, service in services.items():
        if service.get("ports") and name not in COMPOSE_PUBLISHED:
            report.error(section, f"service {name} publishes ports; only {sorted(COMPOSE_PUBLISHED)} may")
        depends_on = service.get("depends_on") or {}
        if isinstance(depends_on, list):
            depends_on = {name: {"condition": "service_started"} for name in depends_on}
        for dependency, condition in depends_on.items():
            if dependency not in services:
                report.error(section, f"service {name} depends on unknown service {dependency}")
                continue
            if condition.get("condition") == "service_healthy" and not has_healthcheck(model, services[dependency]):
                report.error(section, f"service {name} waits for {dependency} to be healthy, which has no health check")
        build = service.get("build")
        if isinstance(build, dict):
            if build.get("dockerfile") != DOCKERFILE:
                report.error(section, f"service {name} builds from {build.get('dockerfile')}, not {DOCKERFILE}")
            if build.get("target") not in dockerfile_stages(model.dockerfile):
                report.error(section, f"service {name} builds target {build.get('target')}, not in {DOCKERFILE}")
    for name in COMPOSE_PUBLISHED:
        if name not in services:
            report.error(section, f"service {name} missing")
    report.note(section, f"{len(services)} services valid against the Compose Specification schema "
                         f"(raw and substituted); {len(used)} variables all in {ENV_EXAMPLE}")


def has_healthcheck(model: Model, service: dict) -> bool:
    healthcheck = service.get("healthcheck")
    if healthcheck:
        return not healthcheck.get("disable", False)
    target = (service.get("build") or {}).get("target") if isinstance(service.get("build"), dict) else None
    return bool(target and dockerfile_stage_has(model.dockerfile, target, "HEALTHCHECK"))


# --- containers: k8s and compose -------------------------------------------------------------------

def dockerfile_env(model: Model, target: str) -> dict[str, str]:
    env = {}
    for stage in dockerfile_stage_chain(model.dockerfile, target):
        for instruction, argument in dockerfile_instructions(model.dockerfile).get(stage, []):
            if instruction == "ENV":
                for token in shlex.split(argument):
                    if "=" in token:
                        key, value = token.split("=", 1)
                        env[key] = value
    return env


def k8s_containers(model: Model, report: Report) -> list[Container]:
    index = k8s_index(model)
    containers = []
    for origin, doc in index["workloads"]:
        spec = pod_template(doc).get("spec", {})
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            binary = image_binary(container.get("image", ""))
            if binary not in BINARIES:
                continue
            where = f"{origin}: {kind_name(doc)} container {container.get('name')}"
            command = container.get("command") or []
            args = container.get("args") or []
            if command and Path(command[0]).name != binary:
                report.error("env", f"{where}: command {command} does not run {binary}")
                continue
            argv = command[1:] + args if command else args
            subcommand = argv[0] if argv else "serve"
            env: dict[str, Any] = {}
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    prefix = source.get("prefix", "")
                    for key, value in index["config_maps"].get(source["configMapRef"]["name"], {}).items():
                        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix + key):
                            report.error("env", f"{where}: ConfigMap key {key!r} is not a variable name")
                        env[prefix + key] = value
            for entry in container.get("env", []):
                ref = entry.get("valueFrom") or {}
                if "value" in entry:
                    env[entry["name"]] = entry["value"]
                elif "secretKeyRef" in ref:
                    env[entry["name"]] = ("secret", ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
                elif "configMapKeyRef" in ref:
                    key_ref = ref["configMapKeyRef"]
                    env[entry["name"]] = index["config_maps"].get(key_ref["name"], {}).get(key_ref["key"])
                else:
                    env[entry["name"]] = ("unknown",)
            ports = {p["containerPort"] for p in container.get("ports", [])}
            ca_volumes = {v["name"] for v in spec.get("volumes") or []
                          if (v.get("secret") or {}).get("secretName") in operator_secrets(index)}
            ca_mounts = {m["mountPath"].rstrip("/") for m in container.get("volumeMounts") or []
                         if m.get("name") in ca_volumes}
            containers.append(Container(where, "k8s", binary, subcommand, env, ports,
                                        workload=kind_name(doc), defaults=dockerfile_env(model, binary),
                                        ca_mounts=ca_mounts))
    return containers


def compose_containers(model: Model, report: Report) -> list[Container]:
    compose = interpolate_tree(model.compose, model.env_example, [])
    containers = []
    for name, service in compose.get("services", {}).items():
        build = service.get("build") if isinstance(service.get("build"), dict) else {}
        binary = build.get("target") or image_binary(service.get("image", ""))
        if binary not in BINARIES:
            continue
        where = f"{COMPOSE_FILE}: service {name}"
        if service.get("entrypoint"):
            report.error("env", f"{where}: entrypoint overridden; the image's entrypoint is the binary")
        if service.get("env_file"):
            report.error("env", f"{where}: env_file hides the variable names; list them under environment")
        command = service.get("command") or ["serve"]
        if isinstance(command, str):
            command = shlex.split(command)
        env: dict[str, Any] = {}
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) if "=" in item else (item, ("unknown",)) for item in environment)
        for key, value in environment.items():
            env[key] = env_value_text(value) if not isinstance(value, tuple) else value
        ports = set()
        for port in service.get("ports") or []:
            text = str(port if not isinstance(port, dict) else port.get("target"))
            ports.add(int(text.rsplit(":", 1)[-1].split("/")[0]))
        containers.append(Container(where, "compose", binary, command[0], env, ports, workload=name,
                                    defaults=dockerfile_env(model, binary)))
    return containers


def check_env(model: Model, report: Report) -> None:
    section = "env"
    dockerfile_targets = [b for b in BINARIES if b in dockerfile_stages(model.dockerfile)]
    # The Dockerfile's own ENV lines, checked against `serve` (the image's default command).
    for binary in dockerfile_targets:
        info = model.help.get((binary, "serve"))
        for name in dockerfile_env(model, binary):
            if info and not accepted(name, info):
                report.error(section, f"{DOCKERFILE} target {binary}: ENV {name} is not accepted by {binary}")
    for view in model.views():
        check_containers(view, k8s_containers(view, report), report)
    check_containers(model, compose_containers(model, report), report)
    report.note(section, f"containers of {', '.join(model.overlays)} and compose checked against their "
                         f"binary's --help ({len(model.help)} subcommands); allowed beyond --help: "
                         f"{', '.join(sorted(ALLOWED_EXTRA_ENV))}, "
                         f"{', '.join(p + '*' for p in ALLOWED_EXTRA_PREFIXES)}")


def check_containers(model: Model, containers: list[Container], report: Report) -> None:
    section = "env"
    index = k8s_index(model)
    compose_services = interpolate_tree(model.compose, model.env_example, []).get("services", {})
    for container in containers:
        info = model.help.get((container.binary, container.subcommand))
        if info is None:
            report.error(section, f"{container.origin}: `{container.binary} {container.subcommand}` "
                                  f"is not a known subcommand")
            continue
        for name in sorted(container.env):
            if not accepted(name, info):
                report.error(section, f"{container.origin}: {name} is not accepted by "
                                      f"`{container.binary} {container.subcommand}` (not in its --help)")
        effective = container.effective
        required = set(info.required) | set(POLICY_REQUIRED.get((container.binary, container.subcommand), []))
        for name in sorted(required):
            if name not in info.accepted:
                report.error(section, f"checker policy requires {name} for `{container.binary} "
                                      f"{container.subcommand}`, but its --help no longer lists it")
            elif effective.get(name) in ("", None):
                report.error(section, f"{container.origin}: required {name} is not set")
        if container.subcommand == "serve":
            if not any(effective.get(name) not in (None, "") for name in AUTH_KEY_SOURCES):
                report.error(section, f"{container.origin}: no token key source set (one of {AUTH_KEY_SOURCES})")
            secret = resolve_value(effective.get("AUTH_HS256_SECRET"), index)
            if isinstance(secret, str) and secret and len(secret.encode()) < 32:
                report.error(section, f"{container.origin}: AUTH_HS256_SECRET is shorter than the "
                                      f"32 bytes the binaries require")
            listen = effective.get(LISTEN_VARS[container.binary])
            if isinstance(listen, str):
                if listen_host_is_loopback(listen):
                    report.error(section, f"{container.origin}: {LISTEN_VARS[container.binary]}={listen} "
                                          f"listens on loopback only")
                port = listen_port(listen)
                if container.ports and port not in container.ports:
                    report.error(section, f"{container.origin}: listens on port {port}, but the "
                                          f"container ports are {sorted(container.ports)}")
                if container.platform == "k8s" and not container.ports:
                    report.error(section, f"{container.origin}: declares no containerPort")
        for name, value in effective.items():
            url = resolve_value(value, index) if container.platform == "k8s" else value
            if name in DB_URL_ROLES and isinstance(url, str):
                check_db_url(container, name, url, index, report)
        if container.binary == "gateway" and container.subcommand == "serve":
            check_upstreams(model, container, containers, compose_services, report)
    check_auth_consistency(containers, report)


def accepted(name: str, info: HelpInfo) -> bool:
    return name in info.accepted or name in ALLOWED_EXTRA_ENV or name.startswith(ALLOWED_EXTRA_PREFIXES)


def resolve_value(value: Any, index: dict) -> Any:
    if isinstance(value, tuple) and value and value[0] == "secret":
        secret = index["secrets"].get(value[1])
        return secret_data(secret).get(value[2]) if secret else None
    return value


def check_db_url(container: Container, name: str, url: str, index: dict, report: Report) -> None:
    parts = urllib.parse.urlsplit(url)
    where = f"{container.origin}: {name}"
    if parts.scheme not in ("postgres", "postgresql"):
        report.error("env", f"{where}: not a postgres:// URL")
        return
    if parts.username != DB_URL_ROLES[name]:
        report.error("env", f"{where}: logs in as {parts.username}, must be {DB_URL_ROLES[name]}")
    if parts.path.lstrip("/") != DATABASE:
        report.error("env", f"{where}: database {parts.path.lstrip('/')}, must be {DATABASE}")
    if container.platform == "k8s":
        check_db_tls(container, name, parts, index, report)
        clusters = [c["metadata"]["name"] for _, c in index["clusters"]]
        suffix = "ro" if name == "NEWS_DATABASE_READ_URL" else "rw"
        host = (parts.hostname or "").split(".")[0]
        if host not in {f"{c}-{suffix}" for c in clusters}:
            report.error("env", f"{where}: host {parts.hostname} should be the CloudNativePG "
                                f"{'read-only' if suffix == 'ro' else 'primary'} service "
                                f"({', '.join(c + '-' + suffix for c in clusters)})")


def check_db_tls(container: Container, name: str, parts: urllib.parse.SplitResult, index: dict,
                 report: Report) -> None:
    """verify-full, against a CA file the container has mounted from a cluster's CA Secret."""
    where = f"{container.origin}: {name}"
    query = dict(urllib.parse.parse_qsl(parts.query))
    if query.get("sslmode") != "verify-full":
        report.error("env", f"{where}: sslmode={query.get('sslmode')}; must be verify-full")
    root_cert = query.get("sslrootcert", "")
    if not root_cert.startswith(PG_CA_MOUNT + "/"):
        report.error("env", f"{where}: sslrootcert={root_cert!r}, not the CA mounted at {PG_CA_MOUNT}")
        return
    if PG_CA_MOUNT not in container.ca_mounts:
        report.error("env", f"{where}: sslrootcert {root_cert}, but {PG_CA_MOUNT} is not mounted from "
                            f"a CloudNativePG CA Secret ({', '.join(sorted(operator_secrets(index)))})")


def check_upstreams(model: Model, gateway: Container, containers: list[Container],
                    compose_services: dict, report: Report) -> None:
    for variable, binary in UPSTREAM_VARS.items():
        value = gateway.effective.get(variable)
        if not isinstance(value, str) or not value.strip():
            continue
        for url in [u.strip() for u in value.split(",") if u.strip()]:
            parts = urllib.parse.urlsplit(url)
            host, port = parts.hostname or "", parts.port
            if gateway.platform == "compose":
                target = [c for c in containers if c.platform == "compose" and c.workload == host]
                if not target or target[0].binary != binary or target[0].subcommand != "serve":
                    report.error("env", f"{gateway.origin}: {variable} {url}: no compose service "
                                        f"{host} serving {binary}")
                elif listen_port(target[0].effective.get(LISTEN_VARS[binary])) != port:
                    report.error("env", f"{gateway.origin}: {variable} {url}: {host} listens on "
                                        f"{target[0].effective.get(LISTEN_VARS[binary])}")
            else:
                check_k8s_upstream(model, gateway, variable, url, host.split(".")[0], port, binary, report)


def check_k8s_upstream(model: Model, gateway: Container, variable: str, url: str, service_name: str,
                       port: int | None, binary: str, report: Report) -> None:
    services = {d["metadata"]["name"]: d for _, d in model.k8s_docs if d.get("kind") == "Service"}
    service = services.get(service_name)
    if service is None:
        report.error("env", f"{gateway.origin}: {variable} {url}: no Service {service_name}")
        return
    if port not in {p.get("port") for p in service["spec"].get("ports", [])}:
        report.error("env", f"{gateway.origin}: {variable} {url}: Service {service_name} has no port {port}")
    index = k8s_index(model)
    matched = {image_binary(c.get("image", "")) for _, labels, spec in pod_labels_by_workload(index)
               if selects({"matchLabels": service["spec"].get("selector")}, labels) for c in spec.get("containers", [])}
    if matched != {binary}:
        report.error("env", f"{gateway.origin}: {variable} {url}: Service {service_name} selects "
                            f"{sorted(matched)}, not {binary}")


def check_auth_consistency(containers: list[Container], report: Report) -> None:
    for platform in ("k8s", "compose"):
        serving = [c for c in containers if c.platform == platform and c.subcommand == "serve"]
        views = {}
        for container in serving:
            views[container.origin] = {k: v for k, v in container.effective.items() if k.startswith("AUTH_")}
        distinct = {json.dumps(v, sort_keys=True, default=str) for v in views.values()}
        if len(distinct) > 1:
            lines = "; ".join(f"{o}: {v}" for o, v in views.items())
            report.error("env", f"{platform}: AUTH_* differ between the binaries, tokens would verify "
                                f"differently: {lines}")


# --- dockerfile -------------------------------------------------------------------------------------

def dockerfile_instructions(text: str) -> dict[str, list[tuple[str, str]]]:
    """Stage name -> [(INSTRUCTION, argument)], continuation lines joined, comments dropped."""
    logical, buffer = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        logical.append(buffer + stripped)
        buffer = ""
    stages: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in logical:
        instruction, _, argument = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            match = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", argument, re.I)
            current = match.group(2) or f"stage{len(stages)}"
            stages[current] = [("FROM", match.group(1))]
        elif current is not None:
            stages[current].append((instruction, argument.strip()))
    return stages


def dockerfile_stages(text: str) -> set[str]:
    return set(dockerfile_instructions(text))


def dockerfile_stage_chain(text: str, target: str) -> list[str]:
    stages = dockerfile_instructions(text)
    chain = []
    while target in stages and target not in chain:
        chain.insert(0, target)
        target = stages[target][0][1]
    return chain


def dockerfile_stage_has(text: str, target: str, instruction: str) -> bool:
    stages = dockerfile_instructions(text)
    return any(i == instruction for stage in dockerfile_stage_chain(text, target) for i, _ in stages[stage])


def dockerignore_patterns(text: str) -> list[tuple[bool, re.Pattern]]:
    """(is_exception, regex) per line, with Docker's glob rules (`*`, `?`, `**`)."""
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        glob = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex, i = "", 0
        while i < len(glob):
            if glob.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif glob.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif glob[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif glob[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(glob[i]), i + 1
        patterns.append((exception, re.compile(f"^{regex}$")))
    return patterns


def in_build_context(path: str, patterns: list[tuple[bool, re.Pattern]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent directories wins."""
    parts = path.split("/")
    candidates = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    excluded = False
    for exception, regex in patterns:
        if any(regex.match(candidate) for candidate in candidates):
            excluded = not exception
    return not excluded


def embedded_files(root: Path, members: dict[str, str]) -> list[str]:
    """Files the crates read at compile time: include_str!/include_bytes! (relative to the source
    file) and sqlx::migrate! (relative to the crate), as paths relative to the workspace root."""
    found = set()
    for directory in members.values():
        crate = root / directory
        for source in sorted(crate.rglob("*.rs")):
            if "target" in source.relative_to(crate).parts:
                continue
            text = source.read_text(errors="replace")
            for relative in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"\s*\)', text):
                found.add((source.parent / relative).resolve())
            for relative in re.findall(r'migrate!\(\s*(?:"([^"]*)")?\s*\)', text):
                found.add((crate / (relative or "migrations")).resolve())
    paths = []
    for path in sorted(found):
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        paths += [f.relative_to(root).as_posix() for f in files if f.is_relative_to(root)]
    return paths


def check_dockerfile(model: Model, report: Report) -> None:
    section = "dockerfile"
    stages = dockerfile_instructions(model.dockerfile)
    crates = set(model.workspace["binaries"])
    binaries = {b for bins in model.workspace["binaries"].values() for b in bins}
    if binaries != set(BINARIES):
        report.error(section, f"workspace binaries {sorted(binaries)} != {sorted(BINARIES)} known to this checker")
    runs = [a for s in stages.values() for i, a in s if i == "RUN"]
    builds = [r for r in runs if re.search(r"\bcargo build\b", r)]
    if len(builds) != 1:
        report.error(section, f"expected one `cargo build` RUN, found {len(builds)}")
    for command, label in ((builds[0] if builds else "", "cargo build"),
                           (next((r for r in runs if "cargo chef cook" in r), ""), "cargo chef cook")):
        segment = command.split("&&")[0]
        packages = set(re.findall(r"(?:-p|--package)[ =]([\w-]+)", segment))
        if packages != crates:
            report.error(section, f"`{label}` builds {sorted(packages)}; the workspace's binary crates "
                                  f"(what CI tests) are {sorted(crates)}")
        # --no-default-features: release images leave out development code (the gateway's mint-token).
        for flag in ("--release", "--locked", "--no-default-features"):
            if flag not in segment.split():
                report.error(section, f"`{label}` lacks {flag}")
    for binary in BINARIES:
        if binary not in stages:
            report.error(section, f"no target `{binary}`")
            continue
        chain = dockerfile_stage_chain(model.dockerfile, binary)
        instructions = [(i, a) for stage in chain for i, a in stages[stage]]
        copies = [a for i, a in instructions if i == "COPY" and "--from=builder" in a]
        if not any(a.split()[-1].endswith(f"/{binary}") for a in copies):
            report.error(section, f"target {binary} does not copy the built {binary}")
        entrypoint = [a for i, a in instructions if i == "ENTRYPOINT"]
        if not entrypoint or binary not in entrypoint[-1]:
            report.error(section, f"target {binary}: ENTRYPOINT is not the binary")
        users = [a for i, a in instructions if i == "USER"]
        user = users[-1].split(":")[0] if users else "root"
        if not user.isdigit() or int(user) == 0:
            report.error(section, f"target {binary}: USER must be a numeric non-root uid (found {user})")
        if not any(i == "HEALTHCHECK" for i, _ in instructions):
            report.error(section, f"target {binary}: no HEALTHCHECK")
    rust = re.search(r"ARG RUST_VERSION=(\d+)\.(\d+)", model.dockerfile)
    minimum = model.workspace.get("rust_version")
    if not rust:
        report.error(section, "ARG RUST_VERSION=<x.y.z> not found (pin the builder's toolchain)")
    elif minimum:
        have = (int(rust.group(1)), int(rust.group(2)))
        need = tuple(int(x) for x in minimum.split(".")[:2])
        if have < need:
            report.error(section, f"builder Rust {have} older than the workspace's rust-version {minimum}")
    patterns = dockerignore_patterns(model.dockerignore)
    needed = ["Cargo.toml", "Cargo.lock"] + [f"{d}/Cargo.toml" for d in model.workspace["members"].values()]
    needed += model.workspace.get("embedded", [])
    for path in needed:
        if not in_build_context(path, patterns):
            report.error(section, f"{DOCKERIGNORE} leaves {path} out of the build context; the build needs it")
    local = subprocess.run(["rustc", "--version"], capture_output=True, text=True)
    match = re.search(r"(\d+)\.(\d+)", local.stdout)
    if rust and match and (match.group(1), match.group(2)) != (rust.group(1), rust.group(2)):
        report.note(section, f"note: CI's rustc is {match.group(0)}, the image pins {rust.group(1)}.{rust.group(2)}")
    report.note(section, f"build context keeps {len(needed)} needed files "
                         f"({len(model.workspace.get('embedded', []))} embedded at compile time)")
    report.note(section, f"`cargo build --release --locked` of {', '.join(sorted(crates))}; "
                         f"targets {', '.join(BINARIES)} non-root with HEALTHCHECK")


# --- otel ----------------------------------------------------------------------------------------------

def check_otel(model: Model, report: Report) -> None:
    section = "otel"
    config = model.otel or {}
    service = config.get("service") or {}
    for kind in ("receivers", "processors", "exporters"):
        defined = set((config.get(kind) or {}).keys())
        for pipeline, spec in (service.get("pipelines") or {}).items():
            for component in (spec or {}).get(kind, []):
                if component not in defined:
                    report.error(section, f"{OTEL_CONFIG}: pipeline {pipeline} uses undefined {kind[:-1]} {component}")
    for extension in service.get("extensions", []):
        if extension not in (config.get("extensions") or {}):
            report.error(section, f"{OTEL_CONFIG}: undefined extension {extension}")
    http = ((config.get("receivers") or {}).get("otlp") or {}).get("protocols", {}).get("http") or {}
    port = listen_port(http.get("endpoint"))
    compose = interpolate_tree(model.compose, model.env_example, [])
    for name, service_def in compose.get("services", {}).items():
        environment = service_def.get("environment") or {}
        endpoint = environment.get("OTEL_EXPORTER_OTLP_ENDPOINT") if isinstance(environment, dict) else None
        if endpoint:
            parts = urllib.parse.urlsplit(endpoint)
            if parts.hostname not in compose["services"] or parts.port != port:
                report.error(section, f"{COMPOSE_FILE}: service {name} exports to {endpoint}, but the "
                                      f"collector's OTLP/HTTP receiver is <service>:{port}")
    report.note(section, f"{OTEL_CONFIG}: pipelines reference defined components")


# --- driver ---------------------------------------------------------------------------------------------

CHECKS = [check_k8s_schema, check_k8s_policy, check_netpol, check_compose, check_env, check_dockerfile, check_otel]
# Run once per rendered overlay; check_env covers the overlays itself (and compose once).
PER_OVERLAY = {check_k8s_schema, check_k8s_policy, check_netpol}


def run_checks(model: Model) -> Report:
    report = Report()
    for check in CHECKS:
        if check not in PER_OVERLAY:
            guarded(check, model, report)
            continue
        for view in model.views():
            # Every message names the overlay it is about.
            own = Report()
            guarded(check, view, own)
            where = f"{OVERLAYS_DIR}/{view.overlay}"
            for section, messages in own.errors.items():
                for message in messages:
                    report.error(section, message if message.startswith(where) else f"{where}: {message}")
            for section, messages in own.notes.items():
                for message in messages:
                    report.note(section, message)
    return report


def guarded(check, model: Model, report: Report) -> None:
    try:
        check(model, report)
    except Exception as e:  # a crash in one check is a failure, not a pass
        report.error(check.__name__, f"check crashed ({model.overlay}): {type(e).__name__}: {e}")


def find_doc(model: Model, kind: str, name: str) -> dict:
    # The prod overlay names its migration Jobs per release (news-migrate-<RELEASE>).
    named = lambda d: d["metadata"]["name"] == name or (kind == "Job" and d["metadata"]["name"].startswith(f"{name}-"))
    return next(d for _, d in model.k8s_docs if d.get("kind") == kind and named(d))


def first_container(model: Model, kind: str, name: str) -> dict:
    return pod_template(find_doc(model, kind, name))["spec"]["containers"][0]


def self_test(model: Model, verbose: bool = False) -> list[str]:
    """Breaks a copy of the inputs in known ways; returns the breaks that went unreported."""
    def unknown_field(m):
        first_container(m, "Deployment", "news-service")["imagePullSecret"] = "typo"

    def wrong_type(m):
        find_doc(m, "ConfigMap", "news-config")["data"]["NEWS_DB_MAX_CONNECTIONS"] = 10

    def unknown_env(m):
        first_container(m, "Deployment", "lingo-service")["env"].append({"name": "LINGO_DATABSE_URL", "value": "x"})

    def missing_required(m):
        container = first_container(m, "Deployment", "news-service")
        container["env"] = [e for e in container["env"] if e["name"] != "NEWS_DATABASE_READ_URL"]

    def wrong_role(m):
        m.compose["services"]["lingo"]["environment"]["LINGO_DATABASE_URL"] = \
            "postgres://lingo_owner:x@postgres:5432/lingonews"

    def compose_unknown_key(m):
        m.compose["services"]["news"]["replica"] = 2

    def compose_unknown_env(m):
        m.compose["services"]["gateway"]["environment"]["GATEWAY_PORT"] = "8080"

    def env_example_gap(m):
        del m.env_example["NEWS_APP_PASSWORD"]

    def news_open(m):
        find_doc(m, "NetworkPolicy", "news-from-gateway")["spec"]["ingress"].append({"from": []})

    def postgres_open(m):
        policy = find_doc(m, "NetworkPolicy", "postgres-from-services-and-jobs")
        policy["spec"]["ingress"][0]["from"][0]["podSelector"] = {}

    def no_probe(m):
        del first_container(m, "Deployment", "gateway")["readinessProbe"]

    def writable_root(m):
        first_container(m, "Job", "news-migrate")["securityContext"]["readOnlyRootFilesystem"] = False

    def committed_secret(m):
        m.k8s_docs.append(("deploy/k8s/x.yaml", {"apiVersion": "v1", "kind": "Secret",
                                                  "metadata": {"name": "x", "namespace": "lingonews"},
                                                  "stringData": {"k": "v"}}))

    def bootstrap_drift(m):
        m.bootstrap_sql += "\n-- changed\n"

    def read_url_on_primary(m):
        news_db = next(d for d in m.secrets_docs if d["metadata"]["name"] == "news-db")
        news_db["stringData"]["read-url"] = news_db["stringData"]["app-url"]

    def build_unlocked(m):
        m.dockerfile = m.dockerfile.replace("cargo build --release --locked", "cargo build --release")

    def build_fewer_crates(m):
        m.dockerfile = re.sub(r"(cargo build [^&]*?)-p gateway ", r"\1", m.dockerfile, count=1)

    def build_with_dev_code(m):
        m.dockerfile = m.dockerfile.replace("cargo build --release --locked --no-default-features",
                                            "cargo build --release --locked")

    def missing_secret_key(m):
        first_container(m, "Deployment", "lingo-service")["env"][1]["valueFrom"]["secretKeyRef"]["key"] = "nope"

    def hpa_bounds(m):
        find_doc(m, "HorizontalPodAutoscaler", "news-service")["spec"]["maxReplicas"] = 5

    def context_gap(m):
        m.dockerignore = m.dockerignore.replace("!gateway\n", "")

    def foreign_image(m):
        first_container(m, "Deployment", "gateway")["image"] = "registry.example.com/lingonews/gw:1"

    def auth_mismatch(m):
        m.compose["services"]["news"]["environment"]["AUTH_ISSUER"] = "someone-else"

    def crd_unknown_field(m):
        find_doc(m, "Cluster", "lingonews-pg")["spec"]["instance"] = 3

    def crd_wrong_type(m):
        find_doc(m, "ObjectStore", "lingonews-backups")["spec"]["retentionPolicy"] = "30 days"

    def route_metrics(m):
        find_doc(m, "HTTPRoute", "gateway")["spec"]["rules"][0]["matches"].append(
            {"path": {"type": "PathPrefix", "value": "/metrics"}})

    def no_wal_archive(m):
        del find_doc(m, "Cluster", "lingonews-pg")["spec"]["plugins"]

    def no_scheduled_backup(m):
        m.k8s_docs[:] = [(o, d) for o, d in m.k8s_docs if d.get("kind") != "ScheduledBackup"]

    def backup_secret_gap(m):
        store = find_doc(m, "ObjectStore", "lingonews-backups")
        store["spec"]["configuration"]["s3Credentials"]["accessKeyId"]["key"] = "AWS_KEY"

    def burstable_postgres(m):
        find_doc(m, "Cluster", "lingonews-pg")["spec"]["resources"]["limits"]["memory"] = "4Gi"

    def burstable_sidecar(m):
        store = find_doc(m, "ObjectStore", "lingonews-backups")
        del store["spec"]["instanceSidecarConfiguration"]["resources"]["limits"]

    def no_storage_class(m):
        del find_doc(m, "Cluster", "lingonews-pg")["spec"]["storage"]["storageClass"]

    def unverified_tls(m):
        lingo_db = next(d for d in m.secrets_docs if d["metadata"]["name"] == "lingo-db")
        lingo_db["stringData"]["app-url"] = lingo_db["stringData"]["app-url"].replace("verify-full", "prefer")

    def ca_not_mounted(m):
        first_container(m, "Job", "news-migrate")["volumeMounts"] = []

    def egress_widened(m):
        policy = find_doc(m, "NetworkPolicy", "gateway-egress")
        policy["spec"]["egress"][0]["to"].append({"podSelector": {"matchLabels": {"cnpg.io/cluster": "lingonews-pg"}}})

    def egress_unrestricted(m):
        m.k8s_docs[:] = [(o, d) for o, d in m.k8s_docs if d.get("kind") != "NetworkPolicy"
                         or "Egress" not in d["spec"].get("policyTypes", [])]

    def no_pg_monitor(m):
        m.k8s_docs[:] = [(o, d) for o, d in m.k8s_docs
                         if not (d.get("kind") == "PodMonitor" and d["metadata"]["name"] == "lingonews-pg")]

    def monitoring_wide(m):
        del find_doc(m, "NetworkPolicy", "postgres-metrics-from-monitoring")["spec"]["ingress"][0]["ports"]

    cases = [
        (monitoring_wide, "netpol", "only metrics ports"),
        (crd_unknown_field, "kubernetes", "instance"),
        (crd_wrong_type, "kubernetes", "ObjectStore"),
        (route_metrics, "k8s-policy", "/metrics"),
        (no_wal_archive, "k8s-policy", "no WAL archiving"),
        (no_scheduled_backup, "k8s-policy", "no ScheduledBackup"),
        (backup_secret_gap, "k8s-policy", "AWS_KEY"),
        (burstable_postgres, "k8s-policy", "Guaranteed QoS"),
        (burstable_sidecar, "k8s-policy", "instanceSidecarConfiguration"),
        (no_storage_class, "k8s-policy", "storageClass"),
        (unverified_tls, "env", "must be verify-full"),
        (ca_not_mounted, "env", "is not mounted"),
        (egress_widened, "netpol", "may connect to pods"),
        (egress_unrestricted, "netpol", "egress unrestricted"),
        (no_pg_monitor, "k8s-policy", "no PodMonitor scrapes the CloudNativePG"),
        (unknown_field, "kubernetes", "imagePullSecret"),
        (wrong_type, "kubernetes", "NEWS_DB_MAX_CONNECTIONS"),
        (unknown_env, "env", "LINGO_DATABSE_URL is not accepted"),
        (missing_required, "env", "required NEWS_DATABASE_READ_URL"),
        (wrong_role, "env", "must be lingo_app"),
        (compose_unknown_key, "compose", "replica"),
        (compose_unknown_env, "env", "GATEWAY_PORT is not accepted"),
        (env_example_gap, "compose", "NEWS_APP_PASSWORD"),
        (news_open, "netpol", "news-service"),
        (postgres_open, "netpol", "postgres"),
        (no_probe, "k8s-policy", "readinessProbe missing"),
        (writable_root, "k8s-policy", "readOnlyRootFilesystem"),
        (committed_secret, "k8s-policy", "Secret committed"),
        (bootstrap_drift, "k8s-policy", "differs from"),
        (read_url_on_primary, "env", "read-only"),
        (build_unlocked, "dockerfile", "--locked"),
        (build_fewer_crates, "dockerfile", "cargo build"),
        (build_with_dev_code, "dockerfile", "--no-default-features"),
        (missing_secret_key, "k8s-policy", "key nope"),
        (hpa_bounds, "k8s-policy", "maxReplicas 20"),
        (auth_mismatch, "env", "AUTH_* differ"),
        (foreign_image, "k8s-policy", "is not one of"),
        (context_gap, "dockerfile", "gateway/"),
    ]
    unreported = []
    # Schema validation per version is the slow part; one version is enough to prove it can fail.
    for mutate, section, needle in cases:
        # The validators are never mutated: share them rather than copy a megabyte per case.
        broken = copy.deepcopy(model, {id(model.crd_validators): model.crd_validators})
        broken.k8s_versions = model.k8s_versions[:1]
        mutate(broken)
        report = run_checks(broken)
        caught = [message for message in report.errors.get(section, []) if needle in message]
        if verbose and caught:
            print(f"self-test: {mutate.__name__}: caught: {caught[0][:160]}")
        if not caught:
            unreported.append(f"{mutate.__name__}: expected a [{section}] error mentioning {needle!r}; "
                              f"got {report.all_errors()[:3]}")
    return unreported


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--bin-dir", type=Path, required=True)
    parser.add_argument("--k8s-versions", default="1.37,1.35")
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl that renders the overlays")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="show what each self-test break produced")
    args = parser.parse_args()
    root = args.root.resolve()
    versions = [v.strip() for v in args.k8s_versions.split(",") if v.strip()]
    try:
        model = load_model(root, args.bin_dir.resolve(), versions, args.kubectl)
    except Exception as e:
        print(f"FAILED to load the inputs: {type(e).__name__}: {e}")
        return 1
    if args.self_test:
        unreported = self_test(model, args.verbose)
        for line in unreported:
            print(f"self-test: NOT DETECTED: {line}")
        if unreported:
            print(f"self-test FAILED: {len(unreported)} deliberate breaks went unreported")
            return 1
        print("self-test: every deliberate break was reported")
    report = run_checks(model)
    sections = [c.__name__ for c in CHECKS]
    names = {"check_k8s_schema": "kubernetes", "check_k8s_policy": "k8s-policy", "check_netpol": "netpol",
             "check_compose": "compose", "check_env": "env", "check_dockerfile": "dockerfile", "check_otel": "otel"}
    failed = 0
    for function in sections:
        section = names[function]
        errors = report.errors.get(section, []) + report.errors.get(function, [])
        status = "FAIL" if errors else "ok"
        print(f"{status:4} {section}")
        for note in report.notes.get(section, []):
            print(f"       {note}")
        for error in errors:
            print(f"     x {error}")
        failed += len(errors)
    if failed:
        print(f"\ncheck-manifests: {failed} problem(s) found")
        return 1
    print("\ncheck-manifests: all deployment checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
