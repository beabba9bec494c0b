"""The project's own rules for the deployment files: what no schema validator checks (deploy/check-manifests.sh
runs it after validating the same files against their schemas). One function per section:

  pods        workloads: our images only, hardened securityContext, requests and limits, probes; no Secret committed
  objects     a PDB per Deployment, HPAs (prod: news 2-20, gateway), the HTTPRoute's public paths (no Ingress),
              PodMonitors
  postgres    CloudNativePG: WAL archiving, daily backups, retention, Guaranteed QoS, storageClass, roles, bootstrap.sql
  netpol      who may reach whom (ingress), egress denied but DNS and what each workload needs, monitoring ports
  compose     docker-compose.yml's ${VAR}s are .env.example's; only the gateway and Jaeger publish ports
  env         each container's environment against its binary's `<subcommand> --help` (accepted, required), the
              database URLs (role, verify-full TLS with the mounted CNPG CA, rw/ro service), upstreams, AUTH_*
  dockerfile  the image builds what CI tests (`cargo build --release --locked --no-default-features` of the
              workspace's binary crates) and runs it as a numeric non-root user with a HEALTHCHECK; the build
              context holds every member and every file a crate embeds

--self-test breaks a copy of the inputs once per rule and fails unless each break is reported.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import ipaddress
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.parse
from pathlib import Path

import yaml

BINARIES = ("gateway", "lingo-service", "news-service")
SUBCOMMANDS = {"gateway": ["serve"], "lingo-service": ["serve", "migrate", "seed"],
               "news-service": ["serve", "migrate", "seed", "import"]}
PRODUCTION = "prod"
DATABASE = "lingonews"
BARMAN_PLUGIN = "barman-cloud.cloudnative-pg.io"
PUBLIC_PATHS = {("PathPrefix", "/v1"), ("PathPrefix", "/docs"), ("Exact", "/openapi.json")}
PG_CA_MOUNT = "/etc/lingonews/pg-ca"
MONITORING = "monitoring"
METRICS_PORTS = {8080, 8081, 8082, 9187}  # the binaries serve /metrics on their API port; CNPG's exporter
COMPOSE_PUBLISHED = {"gateway", "jaeger"}
# Read outside clap, so absent from --help: tracing's filter and the OpenTelemetry SDK.
ALLOWED_EXTRA_ENV, ALLOWED_EXTRA_PREFIX = {"RUST_LOG"}, "OTEL_"
# Required beyond what clap marks required: the listen address (the default is loopback), the
# subcommand's database URL, the gateway's upstreams (clap accepts empty), news' read URL.
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
AUTH_KEY_SOURCES = ["AUTH_HS256_SECRET", "AUTH_JWKS_FILE", "AUTH_JWKS_URL"]
LISTEN_VARS = {"gateway": "GATEWAY_LISTEN_ADDR", "lingo-service": "LINGO_LISTEN_ADDR",
               "news-service": "NEWS_LISTEN_ADDR"}
UPSTREAM_VARS = {"LINGO_UPSTREAMS": "lingo-service", "NEWS_UPSTREAMS": "news-service"}
DB_URL_ROLES = {  # least privilege: the role each URL logs in as
    "LINGO_DATABASE_URL": "lingo_app", "LINGO_OWNER_DATABASE_URL": "lingo_owner",
    "LINGO_PIPELINE_DATABASE_URL": "lingo_pipeline", "NEWS_DATABASE_URL": "news_app",
    "NEWS_DATABASE_READ_URL": "news_app", "NEWS_OWNER_DATABASE_URL": "news_owner",
    "NEWS_PIPELINE_DATABASE_URL": "news_pipeline",
}
# Who may connect to whom, by app.kubernetes.io/name; "postgres" is the CNPG instance pods.
EXPECTED_INGRESS = {
    "news-service": ({"gateway"}, {MONITORING}),
    "lingo-service": ({"gateway"}, {"analytics", MONITORING}),
    "postgres": ({"lingo-service", "news-service", "postgres"}, {"cnpg-system", MONITORING}),
}
EXPECTED_EGRESS = {"gateway": {"lingo-service", "news-service"}, "lingo-service": {"postgres"},
                   "news-service": {"postgres"}, "postgres": {"postgres"}}
POD_RULES = {"automountServiceAccountToken": False, "enableServiceLinks": False,
             "securityContext.seccompProfile.type": "RuntimeDefault"}
CONTAINER_RULES = {"runAsNonRoot": True, "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}


@dataclasses.dataclass
class Model:
    overlays: dict[str, list[dict]]  # rendered overlay name -> documents
    secrets: list[dict]              # what make-secrets.sh prints
    compose: dict
    env_example: dict[str, str]
    dockerfile: str
    dockerignore: str
    bootstrap_sql: str
    workspace: dict                  # members, binaries, rust_version, embedded
    help: dict[tuple[str, str], tuple[set[str], set[str]]]  # (binary, subcommand) -> accepted, required

    def secret(self, name: str) -> dict[str, str] | None:
        found = [s for s in self.secrets if s["metadata"]["name"] == name]
        return {k: str(v) for k, v in (found[0].get("stringData") or {}).items()} if found else None


@dataclasses.dataclass
class Container:
    where: str
    group: str                 # the overlay, or "compose"
    binary: str
    subcommand: str
    names: set[str]            # the variables the platform sets
    env: dict                  # what the process sees: the image's ENV, then the platform's
    ports: set[int]
    workload: str = ""
    docs: list = dataclasses.field(default_factory=list)
    ca_mounts: set[str] = dataclasses.field(default_factory=set)
    problems: list[str] = dataclasses.field(default_factory=list)


# --- helpers ----------------------------------------------------------------------------------

def get(node, path: str, default=None):
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return default if node is None else node


def kinds(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d.get("kind") == kind]


def name(doc: dict) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def workloads(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d.get("kind") in ("Deployment", "Job")]


def pod_labels(doc: dict) -> dict:
    return get(doc, "spec.template.metadata.labels", {})


def pod_spec(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]


def containers_of(spec: dict) -> list[dict]:
    return spec.get("containers", []) + spec.get("initContainers", [])


def selects(selector: dict | None, labels: dict) -> bool:
    """Label selector semantics; an empty selector selects everything."""
    selector = selector or {}
    ops = {"In": lambda k, v: labels.get(k) in v, "NotIn": lambda k, v: labels.get(k) not in v,
           "Exists": lambda k, v: k in labels, "DoesNotExist": lambda k, v: k not in labels}
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and \
        all(ops[e["operator"]](e["key"], e.get("values") or []) for e in selector.get("matchExpressions") or [])


def image_binary(image: str) -> str:
    return image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]


def guaranteed(resources: dict) -> bool:
    return all(get(resources, f"requests.{r}") is not None
               and get(resources, f"requests.{r}") == get(resources, f"limits.{r}") for r in ("cpu", "memory"))


def listen_port(address) -> int | None:
    tail = str(address or "").rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else None


def interpolate(node, env: dict[str, str]):
    """Compose's ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}, $VAR and $$."""
    if isinstance(node, list):
        return [interpolate(n, env) for n in node]
    if isinstance(node, dict):
        return {k: interpolate(v, env) for k, v in node.items()}
    if not isinstance(node, str):
        return node

    def value(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        var, op, default = m.group(1) or m.group(4), m.group(2) or "", m.group(3) or ""
        current = env.get(var)
        if op.startswith(":-") and not current or op == "-" and current is None:
            return default
        return current or ""
    return re.sub(r"\$\$|\$\{(\w+)(?:(:-|-|:\?|\?)([^}]*))?\}|\$(\w+)", value, node)


def dockerfile_stages(text: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Stage -> (base, [(INSTRUCTION, argument)]), comments dropped, continuations joined."""
    text = re.sub(r"\\\n\s*", " ", re.sub(r"(?m)^\s*#.*\n", "", text))
    stages: dict = {}
    for line in filter(None, map(str.strip, text.splitlines())):
        instruction, _, argument = line.partition(" ")
        if instruction.upper() == "FROM":
            match = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", argument, re.I)
            stages[match.group(2) or f"stage{len(stages)}"] = (match.group(1), [])
        elif stages:
            stages[list(stages)[-1]][1].append((instruction.upper(), argument.strip()))
    return stages


def stage_chain(stages: dict, target: str) -> list[tuple[str, str]]:
    """The instructions a target runs, its base stages' first."""
    instructions = []
    for _ in stages:
        if target not in stages:
            break
        instructions = stages[target][1] + instructions
        target = stages[target][0]
    return instructions


def in_build_context(path: str, dockerignore: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    included, parts = True, path.split("/")
    for line in filter(None, map(str.strip, dockerignore.splitlines())):
        if line.startswith("#"):
            continue
        glob = re.escape(os.path.normpath(line.lstrip("!")).lstrip("/"))
        regex = glob.replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, "/".join(parts[:k])) for k in range(1, len(parts) + 1)):
            included = line.startswith("!")
    return included


# --- kubernetes ---------------------------------------------------------------------------------

def check_pods(m: Model, overlay: str, docs: list[dict]):
    namespace = kinds(docs, "Namespace")[0]["metadata"]["name"]
    ca_secrets = {f"{c['metadata']['name']}-ca" for c in kinds(docs, "Cluster")}
    for d in docs:
        if d["kind"] == "Secret":
            yield f"{name(d)}: Secret committed; reference it and let make-secrets.sh create it"
        if d["kind"] != "Namespace" and get(d, "metadata.namespace") != namespace:
            yield f"{name(d)}: metadata.namespace must be {namespace}"
    for d in workloads(docs):
        spec = pod_spec(d)
        for path, want in POD_RULES.items():
            if get(spec, path) != want:
                yield f"{name(d)}: pod {path} must be {want}"
        for c in containers_of(spec):
            where = f"{name(d)} container {c['name']}"
            if image_binary(c["image"]) not in BINARIES:
                yield f"{where}: image {c['image']} is not one of {BINARIES}"
            context = {**(spec.get("securityContext") or {}), **(c.get("securityContext") or {})}
            for key, want in CONTAINER_RULES.items():
                if context.get(key) != want:
                    yield f"{where}: securityContext.{key} must be {want}"
            if context.get("runAsUser") == 0 or "ALL" not in get(context, "capabilities.drop", []):
                yield f"{where}: runs as uid 0 or keeps capabilities (drop ALL)"
            for part in ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory"):
                if get(c, f"resources.{part}") is None:
                    yield f"{where}: resources.{part} missing"
            for probe in ("readinessProbe", "livenessProbe") if d["kind"] == "Deployment" else ():
                if probe not in c:
                    yield f"{where}: {probe} missing"
        for volume in spec.get("volumes") or []:
            secret = get(volume, "secret.secretName")
            items = [i.get("key") for i in get(volume, "secret.items", [])]
            if items != ["ca.crt"] if secret in ca_secrets else secret and m.secret(secret) is None:
                yield f"{name(d)}: volume {volume['name']}: Secret {secret} is not from make-secrets.sh nor the CNPG CA"


def check_objects(m: Model, overlay: str, docs: list[dict]):
    hpas = {get(h, "spec.scaleTargetRef.name"): h for h in kinds(docs, "HorizontalPodAutoscaler")}
    for d in kinds(docs, "Deployment"):
        if d["metadata"]["name"] in hpas and "replicas" in d["spec"]:
            yield f"{name(d)}: sets replicas, which every apply would reset under its HPA"
        if not any(selects(get(p, "spec.selector"), pod_labels(d)) for p in kinds(docs, "PodDisruptionBudget")):
            yield f"{name(d)} has no PodDisruptionBudget"
    news = get(hpas.get("news-service"), "spec", {})
    if overlay == PRODUCTION and (news.get("minReplicas"), news.get("maxReplicas"), "gateway" in hpas) != (2, 20, True):
        yield "prod needs HPAs for the gateway and news-service (minReplicas 2, maxReplicas 20)"
    services = {s["metadata"]["name"]: s for s in kinds(docs, "Service")}
    for ingress in kinds(docs, "Ingress"):
        yield f"{name(ingress)}: the public entry is the Gateway API HTTPRoute, not an Ingress"
    for route in kinds(docs, "HTTPRoute"):
        rules = get(route, "spec.rules", [])
        published = {(get(mt, "path.type", "PathPrefix"), get(mt, "path.value", "/"))
                     for rule in rules for mt in rule.get("matches") or [{}]}
        if published != PUBLIC_PATHS:
            yield f"{name(route)}: publishes {sorted(published)}, not exactly {sorted(PUBLIC_PATHS)}"
        for backend in (b for rule in rules for b in rule.get("backendRefs") or []):
            service = services.get(backend.get("name"), {})
            if get(service, "spec.selector", {}).get("app.kubernetes.io/name") != "gateway" or \
                    backend.get("port") not in {p["port"] for p in get(service, "spec.ports", [])}:
                yield f"{name(route)}: backend {backend.get('name')}:{backend.get('port')} is not the gateway Service"
    monitors = kinds(docs, "PodMonitor")
    for d in kinds(docs, "Deployment"):
        ports = {p.get("name") for c in pod_spec(d)["containers"] for p in c.get("ports", [])}
        if not any(selects(get(mon, "spec.selector"), pod_labels(d)) and
                   all(e.get("port") in ports for e in get(mon, "spec.podMetricsEndpoints", [])) for mon in monitors):
            yield f"no PodMonitor scrapes {name(d)} on one of its named ports"
    for cluster in kinds(docs, "Cluster"):
        if not any(get(mon, "spec.selector.matchLabels", {}).get("cnpg.io/cluster") == cluster["metadata"]["name"]
                   and [e.get("port") for e in get(mon, "spec.podMetricsEndpoints", [])] == ["metrics"]
                   for mon in monitors):
            yield f"no PodMonitor scrapes the CloudNativePG cluster {cluster['metadata']['name']} (port metrics)"


def check_postgres(m: Model, overlay: str, docs: list[dict]):
    cluster = kinds(docs, "Cluster")[0]
    spec, where = cluster["spec"], name(cluster)
    if overlay == PRODUCTION and spec.get("instances", 0) < 3:
        yield f"{where}: instances must be at least 3 (a primary and two replicas)"
    if not guaranteed(spec.get("resources") or {}):
        yield f"{where}: resources requests must equal limits for cpu and memory (Guaranteed QoS)"
    for volume in ("storage", "walStorage"):
        if volume in spec and not spec[volume].get("storageClass"):
            yield f"{where}: {volume}.storageClass not set"
    stores = {s["metadata"]["name"]: s for s in kinds(docs, "ObjectStore")}
    archivers = [p for p in spec.get("plugins") or [] if p.get("name") == BARMAN_PLUGIN and p.get("isWALArchiver")]
    if not archivers:
        yield f"{where}: no WAL archiving ({BARMAN_PLUGIN} with isWALArchiver: true)"
    for store in (stores.get(get(p, "parameters.barmanObjectName"), {}) for p in archivers):
        where_store = f"ObjectStore/{get(store, 'metadata.name')}"
        if not get(store, "spec.retentionPolicy"):
            yield f"{where_store}: no retentionPolicy"
        if not guaranteed(get(store, "spec.instanceSidecarConfiguration.resources", {})):
            yield f"{where_store}: instanceSidecarConfiguration.resources requests must equal limits"
        for field, ref in get(store, "spec.configuration.s3Credentials", {}).items():
            if isinstance(ref, dict) and ref.get("key") not in (m.secret(ref.get("name")) or {}):
                yield f"{where_store}: {field} {ref.get('name')}/{ref.get('key')} is not written by make-secrets.sh"
    backups = [b for b in kinds(docs, "ScheduledBackup") if get(b, "spec.cluster.name") == cluster["metadata"]["name"]
               and get(b, "spec.method") == "plugin" and get(b, "spec.pluginConfiguration.name") == BARMAN_PLUGIN]
    if not backups or not all(re.fullmatch(r"\d+ \d+ \d+ \* \* \*", b["spec"]["schedule"]) for b in backups):
        yield f"{where}: no ScheduledBackup (method plugin, once a day: 'sec min hour * * *')"
    initdb = get(spec, "bootstrap.initdb", {})
    config_maps = {c["metadata"]["name"]: c.get("data") or {} for c in kinds(docs, "ConfigMap")}
    refs = get(initdb, "postInitApplicationSQLRefs.configMapRefs", [])
    if initdb.get("database") != DATABASE or not refs:
        yield f"{where}: bootstrap.initdb must create {DATABASE} and run bootstrap.sql"
    for ref in refs:
        if config_maps.get(ref["name"], {}).get(ref["key"]) != m.bootstrap_sql:
            yield f"ConfigMap {ref['name']}/{ref['key']} differs from deploy/postgres/bootstrap.sql; copy it again"
    roles = {r["name"]: r for r in get(spec, "managed.roles", [])}
    if set(roles) != set(DB_URL_ROLES.values()):
        yield f"{where}: managed roles {sorted(roles)} != {sorted(set(DB_URL_ROLES.values()))}"
    for role_name, role in roles.items():
        secret_name = get(role, "passwordSecret.name")
        secret = next((s for s in m.secrets if s["metadata"]["name"] == secret_name), {})
        if role.get("login") is not True or secret.get("type") != "kubernetes.io/basic-auth" \
                or (m.secret(secret_name) or {}).get("username") != role_name:
            yield f"{where}: role {role_name} needs login and a basic-auth Secret from make-secrets.sh for it"


def check_netpol(m: Model, overlay: str, docs: list[dict]):
    policies = kinds(docs, "NetworkPolicy")
    pods = [(pod_labels(d).get("app.kubernetes.io/name"), pod_labels(d)) for d in workloads(docs)]
    pods += [("postgres", {"cnpg.io/cluster": c["metadata"]["name"]}) for c in kinds(docs, "Cluster")]

    def applying(labels: dict, direction: str, default: list[str]) -> list[dict]:
        return [p for p in policies if selects(p["spec"].get("podSelector"), labels)
                and direction in p["spec"].get("policyTypes", default)]

    def sources(labels: dict):
        """(workloads, namespaces) that may connect, or None when anyone may."""
        found, namespaces = set(), set()
        selected = applying(labels, "Ingress", ["Ingress"])
        rules = [rule for p in selected for rule in p["spec"].get("ingress") or []]
        for peer in (peer for rule in rules for peer in rule.get("from") or [{}]):  # no `from`: anyone
            names = get(peer, "namespaceSelector.matchLabels", {})
            if peer == {} or "ipBlock" in peer or "namespaceSelector" in peer and (
                    list(names) != ["kubernetes.io/metadata.name"] or get(peer, "namespaceSelector.matchExpressions")):
                return None
            if "namespaceSelector" in peer:
                namespaces.add(names["kubernetes.io/metadata.name"])
            else:
                found |= {n for n, labels in pods if selects(peer.get("podSelector"), labels)}
        return (found, namespaces) if selected else None

    for target, expected in EXPECTED_INGRESS.items():
        # The serving pods: a migration Job's pods are only ever sources.
        for labels in [l for n, l in pods if n == target and l.get("app.kubernetes.io/component", "api") == "api"]:
            if sources(labels) != expected:
                yield f"{target} {labels} reachable from {sources(labels) or 'anywhere'}; expected {expected}"
    if any(n == "gateway" and sources(labels) is None for n, labels in pods):
        yield "the gateway is open to any source; admit only the ingress controller"
    for pod, labels in pods:
        selected = applying(labels, "Egress", [])
        reached, dns = set(), False
        for policy in selected:
            for rule in policy["spec"].get("egress") or []:
                ports = {p.get("port") for p in rule.get("ports") or []}
                if not rule.get("to"):
                    yield f"{pod}: NetworkPolicy {policy['metadata']['name']} allows egress to anywhere"
                for peer in rule.get("to") or []:
                    if "podSelector" in peer and "namespaceSelector" not in peer:
                        reached |= {n for n, l in pods if selects(peer["podSelector"], l)}
                    namespace = get(peer, "namespaceSelector.matchLabels", {}).get("kubernetes.io/metadata.name")
                    dns |= namespace == "kube-system" and 53 in ports
        if not selected:
            yield f"{pod} ({labels}): egress unrestricted (no Egress policy selects it)"
        elif reached != EXPECTED_EGRESS.get(pod, set()) or not dns:
            yield f"{pod} {labels} may connect to pods {sorted(reached)}, DNS {dns}; expected " \
                  f"{sorted(EXPECTED_EGRESS.get(pod, set()))} and DNS"
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            ports = {p.get("port") for p in rule.get("ports") or []}
            if any(get(p, "namespaceSelector.matchLabels", {}).get("kubernetes.io/metadata.name") == MONITORING
                   for p in rule.get("from") or []) and not (ports and ports <= METRICS_PORTS):
                yield f"NetworkPolicy {policy['metadata']['name']}: {MONITORING} may reach " \
                      f"{sorted(ports) or 'all ports'}; only metrics ports {sorted(METRICS_PORTS)}"


# --- compose, containers ------------------------------------------------------------------------

def check_compose(m: Model):
    used = set(re.findall(r"\$\{?([A-Za-z_]\w*)", json.dumps(m.compose).replace("$$", "")))
    for var in sorted(used - set(m.env_example)):
        yield f"docker-compose.yml uses ${{{var}}}, which .env.example does not define"
    for var in sorted(set(m.env_example) - used):
        yield f".env.example defines {var}, which docker-compose.yml never uses"
    for service, spec in m.compose["services"].items():
        if spec.get("ports") and service not in COMPOSE_PUBLISHED:
            yield f"service {service} publishes ports; only {sorted(COMPOSE_PUBLISHED)} may"


def k8s_containers(m: Model, overlay: str, docs: list[dict]):
    config_maps = {c["metadata"]["name"]: c.get("data") or {} for c in kinds(docs, "ConfigMap")}
    ca_secrets = {f"{c['metadata']['name']}-ca" for c in kinds(docs, "Cluster")}
    for d in workloads(docs):
        spec = pod_spec(d)
        ca_volumes = {v["name"] for v in spec.get("volumes") or [] if get(v, "secret.secretName") in ca_secrets}
        for c in containers_of(spec):
            env, problems = {}, []
            for source in c.get("envFrom", []):
                if "secretRef" in source:
                    problems.append("envFrom secretRef hides the variable names; use secretKeyRef entries")
                if get(source, "configMapRef.name") not in config_maps and "configMapRef" in source:
                    problems.append(f"envFrom ConfigMap {get(source, 'configMapRef.name')} is not in the overlay")
                env.update(config_maps.get(get(source, "configMapRef.name"), {}))
            for entry in c.get("env", []):
                secret_ref, map_ref = get(entry, "valueFrom.secretKeyRef"), get(entry, "valueFrom.configMapKeyRef")
                env[entry["name"]] = entry.get("value")
                if secret_ref or map_ref:
                    ref = secret_ref or map_ref
                    source = m.secret(ref["name"]) if secret_ref else config_maps.get(ref["name"])
                    env[entry["name"]] = (source or {}).get(ref["key"])
                    if env[entry["name"]] is None:
                        problems.append(f"env {entry['name']} references key {ref['key']} of {ref['name']}, "
                                        f"which neither make-secrets.sh nor a ConfigMap writes")
            argv = (c.get("command") or [])[1:] + (c.get("args") or [])
            binary = image_binary(c["image"])
            mounts = {v["mountPath"].rstrip("/") for v in c.get("volumeMounts") or [] if v["name"] in ca_volumes}
            yield Container(f"{overlay}: {name(d)} container {c['name']}", overlay, binary,
                            argv[0] if argv else "serve", set(env), {**image_env(m, binary), **env},
                            {p["containerPort"] for p in c.get("ports", [])}, docs=docs, problems=problems,
                            ca_mounts=mounts)


def compose_containers(m: Model):
    for service, spec in interpolate(m.compose, m.env_example)["services"].items():
        binary = get(spec, "build.target") or image_binary(spec.get("image", ""))
        if binary not in BINARIES:
            continue
        command = spec.get("command") or ["serve"]
        env = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (spec.get("environment") or {}).items()}
        problems = [f"{key} hides what the binary gets; list the variables under environment"
                    for key in ("entrypoint", "env_file") if spec.get(key)]
        ports = {int(str(p).rsplit(":", 1)[-1].split("/")[0]) for p in spec.get("ports") or []}
        yield Container(f"docker-compose.yml: service {service}", "compose", binary,
                        (shlex.split(command) if isinstance(command, str) else command)[0], set(env),
                        {**image_env(m, binary), **env}, ports, workload=service, problems=problems)


def image_env(m: Model, binary: str) -> dict[str, str]:
    env = {}
    for instruction, argument in stage_chain(dockerfile_stages(m.dockerfile), binary):
        if instruction == "ENV":
            env.update(token.split("=", 1) for token in shlex.split(argument) if "=" in token)
    return env


def accepted(var: str, info) -> bool:
    return var in info[0] or var in ALLOWED_EXTRA_ENV or var.startswith(ALLOWED_EXTRA_PREFIX)


def check_env(m: Model):
    for binary in BINARIES:
        for var in image_env(m, binary):
            if not accepted(var, m.help[(binary, "serve")]):
                yield f"Dockerfile target {binary}: ENV {var} is not accepted by {binary}"
    containers = [c for overlay, docs in m.overlays.items() for c in k8s_containers(m, overlay, docs)]
    containers += list(compose_containers(m))
    for c in containers:
        yield from (f"{c.where}: {problem}" for problem in c.problems)
        info = m.help.get((c.binary, c.subcommand))
        if info is None:
            yield f"{c.where}: `{c.binary} {c.subcommand}` is not a known subcommand"
            continue
        yield from (f"{c.where}: {var} is not accepted by `{c.binary} {c.subcommand}` (not in its --help)"
                    for var in sorted(c.names) if not accepted(var, info))
        for var in sorted(info[1] | set(POLICY_REQUIRED.get((c.binary, c.subcommand), []))):
            if var not in info[0]:
                yield f"this checker requires {var} for `{c.binary} {c.subcommand}`, whose --help no longer lists it"
            elif c.env.get(var) in ("", None):
                yield f"{c.where}: required {var} is not set"
        if c.subcommand == "serve":
            if not any(c.env.get(var) for var in AUTH_KEY_SOURCES):
                yield f"{c.where}: no token key source set (one of {AUTH_KEY_SOURCES})"
            listen = str(c.env.get(LISTEN_VARS[c.binary]))
            host = listen.rsplit(":", 1)[0].strip("[]")
            if host == "localhost" or re.fullmatch(r"[\d.:]+", host) and ipaddress.ip_address(host).is_loopback:
                yield f"{c.where}: {LISTEN_VARS[c.binary]}={listen} listens on loopback only"
            if c.ports and listen_port(listen) not in c.ports:
                yield f"{c.where}: listens on {listen}, but the container ports are {sorted(c.ports)}"
        for var, url in c.env.items():
            if var in DB_URL_ROLES and isinstance(url, str):
                yield from check_db_url(c, var, urllib.parse.urlsplit(url))
        if c.binary == "gateway" and c.subcommand == "serve":
            yield from check_upstreams(c, containers)
    for group in {c.group for c in containers}:
        auth = {json.dumps({k: v for k, v in c.env.items() if k.startswith("AUTH_")}, sort_keys=True)
                for c in containers if c.group == group and c.subcommand == "serve"}
        if len(auth) > 1:
            yield f"{group}: AUTH_* differ between the binaries, tokens would verify differently: {sorted(auth)}"


def check_db_url(c: Container, var: str, url: urllib.parse.SplitResult):
    where = f"{c.where}: {var}"
    if url.username != DB_URL_ROLES[var] or url.path.lstrip("/") != DATABASE:
        yield f"{where}: logs in as {url.username} to {url.path}, must be {DB_URL_ROLES[var]} to {DATABASE}"
    if c.group == "compose":
        return
    query = dict(urllib.parse.parse_qsl(url.query))
    if query.get("sslmode") != "verify-full":
        yield f"{where}: sslmode={query.get('sslmode')}; must be verify-full"
    if not query.get("sslrootcert", "").startswith(PG_CA_MOUNT + "/") or PG_CA_MOUNT not in c.ca_mounts:
        yield f"{where}: sslrootcert {query.get('sslrootcert')}, but the CNPG CA is not mounted at {PG_CA_MOUNT}"
    suffix = "ro" if var == "NEWS_DATABASE_READ_URL" else "rw"
    services = {f"{cluster['metadata']['name']}-{suffix}" for cluster in kinds(c.docs, "Cluster")}
    if (url.hostname or "").split(".")[0] not in services:
        yield f"{where}: host {url.hostname} is not the CNPG {'read-only' if suffix == 'ro' else 'primary'} service"


def check_upstreams(gateway: Container, containers: list[Container]):
    for var, binary in UPSTREAM_VARS.items():
        for url in filter(None, map(str.strip, str(gateway.env.get(var) or "").split(","))):
            parts = urllib.parse.urlsplit(url)
            if gateway.group == "compose":
                served = [listen_port(c.env.get(LISTEN_VARS[binary])) for c in containers if c.group == "compose"
                          and c.workload == parts.hostname and c.binary == binary and c.subcommand == "serve"]
            else:
                services = [s for s in kinds(gateway.docs, "Service")
                            if s["metadata"]["name"] == (parts.hostname or "").split(".")[0]]
                service = services[0] if services else {}
                images = {image_binary(c["image"]) for d in workloads(gateway.docs) for c in pod_spec(d)["containers"]
                          if selects({"matchLabels": get(service, "spec.selector")}, pod_labels(d))}
                served = [p["port"] for p in get(service, "spec.ports", [])] if images == {binary} else []
            if parts.port not in served:
                yield f"{gateway.where}: {var} {url} reaches no {binary} serving on that port"


# --- dockerfile ---------------------------------------------------------------------------------

def check_dockerfile(m: Model):
    stages = dockerfile_stages(m.dockerfile)
    crates = set(m.workspace["binaries"])
    if {b for bins in m.workspace["binaries"].values() for b in bins} != set(BINARIES):
        yield f"the workspace's binaries are not {BINARIES}, which this checker knows"
    runs = [a for _, instructions in stages.values() for i, a in instructions if i == "RUN"]
    if sum(bool(re.search(r"\bcargo build\b", r)) for r in runs) != 1:
        yield "expected exactly one `cargo build` RUN"
    for run in (r for r in runs if re.search(r"\bcargo (build|chef cook)\b", r)):
        command = run.split("&&")[0]
        label = re.search(r"cargo (build|chef cook)", command).group(0)
        packages = set(re.findall(r"(?:-p|--package)[ =]([\w-]+)", command))
        if packages != crates:
            yield f"`{label}` builds {sorted(packages)}, not the binary crates that CI tests: {sorted(crates)}"
        # --no-default-features: release images leave out development code (the gateway's mint-token).
        yield from (f"`{label}` lacks {flag}" for flag in ("--release", "--locked", "--no-default-features")
                    if flag not in command.split())
    for binary in BINARIES:
        chain = stage_chain(stages, binary)
        users = [a.split(":")[0] for i, a in chain if i == "USER"] or ["root"]
        if not any(i == "COPY" and "--from=builder" in a and a.split()[-1].endswith(f"/{binary}") for i, a in chain) \
                or binary not in ([a for i, a in chain if i == "ENTRYPOINT"] or [""])[-1]:
            yield f"target {binary} does not copy and run the built {binary}"
        if not users[-1].isdigit() or users[-1] == "0" or not any(i == "HEALTHCHECK" for i, _ in chain):
            yield f"target {binary}: needs a numeric non-root USER (found {users[-1]}) and a HEALTHCHECK"
    rust = re.search(r"ARG RUST_VERSION=(\d+)\.(\d+)", m.dockerfile)
    minimum = [int(x) for x in (m.workspace["rust_version"] or "0.0").split(".")[:2]]
    if not rust or [int(rust.group(1)), int(rust.group(2))] < minimum:
        yield f"ARG RUST_VERSION=<x.y.z> must pin a toolchain no older than rust-version {m.workspace['rust_version']}"
    needed = ["Cargo.toml", "Cargo.lock", *(f"{d}/Cargo.toml" for d in m.workspace["members"])]
    needed += m.workspace["embedded"]
    yield from (f"Dockerfile.dockerignore leaves {path} out of the build context; the build needs it"
                for path in needed if not in_build_context(path, m.dockerignore))


# --- loading, running, self-test -----------------------------------------------------------------

PER_OVERLAY = [check_pods, check_objects, check_postgres, check_netpol]
ONCE = [check_compose, check_env, check_dockerfile]


def run_checks(m: Model) -> list[tuple[str, str]]:
    """(section, message) of every failure. A crash in a check is a failure, not a pass."""
    found = []

    def run(section: str, messages):
        try:
            found.extend((section, message) for message in messages)
        except Exception as e:
            found.append((section, f"check crashed: {type(e).__name__}: {e}"))
    for check in PER_OVERLAY:
        for overlay, docs in m.overlays.items():
            run(check.__name__[6:], (f"{overlay}: {message}" for message in check(m, overlay, docs)))
    for check in ONCE:
        run(check.__name__[6:], check(m))
    return found


def binary_help(bin_dir: Path, binary: str, subcommand: str) -> tuple[set[str], set[str]]:
    """(accepted, required) env names from clap's `[env: NAME]` and the usage line."""
    # A clean environment: clap prints `[env: NAME=value]` for variables that are set.
    text = subprocess.run([str(bin_dir / binary), subcommand, "--help"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=30, check=True).stdout
    flag_env, option = {}, None
    for line in text.splitlines():  # an option's block runs to the next option or heading
        start = re.match(r"^\s{2,}(?:-\w, )?--([\w-]+)", line)
        option = start.group(1) if start else None if re.match(r"^\S", line) else option
        env = re.search(r"\[env: (\w+)", line)
        if env and option:
            flag_env.setdefault(option, env.group(1))
    usage = re.search(r"Usage:(.*?)(?:\n\s*\n|\Z)", text, re.S).group(1)
    while re.search(r"\[[^\[\]]*\]", usage):
        usage = re.sub(r"\[[^\[\]]*\]", "", usage)
    accepted = set(re.findall(r"\[env: (\w+)", text))
    if not accepted:
        raise RuntimeError(f"`{binary} {subcommand} --help` lists no [env: ...] variable")
    return accepted, {flag_env[f] for f in re.findall(r"--([\w-]+)", usage) if f in flag_env}


def workspace_info(root: Path) -> dict:
    meta = json.loads(subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=root,
                                     capture_output=True, text=True, timeout=120, check=True).stdout)
    packages = [p for p in meta["packages"] if p["id"] in meta["workspace_members"]]
    members = [Path(p["manifest_path"]).parent.relative_to(root).as_posix() for p in packages]
    embedded = set()  # include_str!/include_bytes! (from the source file) and sqlx::migrate! (from the crate)
    for member in members:
        for source in (root / member).glob("**/*.rs"):
            if "target" in source.relative_to(root / member).parts:
                continue
            text = source.read_text(errors="replace")
            for file in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', text):
                embedded.add((source.parent / file).resolve())
            for folder in re.findall(r'migrate!\(\s*(?:"([^"]*)")?\s*\)', text):
                embedded.add((root / member / (folder or "migrations")).resolve())
    files = [f for path in embedded for f in (path.rglob("*") if path.is_dir() else [path]) if f.is_file()]
    return {"members": members, "rust_version": next((p["rust_version"] for p in packages if p["rust_version"]), None),
            "binaries": {p["name"]: [t["name"] for t in p["targets"] if "bin" in t["kind"]] for p in packages
                         if any("bin" in t["kind"] for t in p["targets"])},
            "embedded": sorted(f.relative_to(root).as_posix() for f in files if f.is_relative_to(root))}


def load_model(root: Path, bin_dir: Path, rendered: Path) -> Model:
    read_yaml = lambda path: [d for d in yaml.safe_load_all(path.read_text()) if d]
    env_example = dict(re.findall(r"(?m)^([A-Za-z_]\w*)=(.*)$", (root / ".env.example").read_text()))
    return Model(
        overlays={p.stem: read_yaml(p) for p in sorted((rendered / "overlays").glob("*.yaml"))},
        secrets=read_yaml(rendered / "secrets.yaml"),
        compose=yaml.safe_load((root / "docker-compose.yml").read_text()), env_example=env_example,
        dockerfile=(root / "deploy/docker/Dockerfile").read_text(),
        dockerignore=(root / "deploy/docker/Dockerfile.dockerignore").read_text(),
        bootstrap_sql=(root / "deploy/postgres/bootstrap.sql").read_text(),
        workspace=workspace_info(root),
        help={(b, s): binary_help(bin_dir, b, s) for b, subs in SUBCOMMANDS.items() for s in subs})


def self_test(model: Model) -> list[str]:
    """Breaks a copy of the inputs once per rule; returns the breaks that went unreported."""
    def doc(m, kind, doc_name):  # prod names its migration Jobs per release: news-migrate-<RELEASE>
        return next(d for d in m.overlays[PRODUCTION] if d["kind"] == kind and (
            d["metadata"]["name"] == doc_name or kind == "Job" and d["metadata"]["name"].startswith(doc_name + "-")))

    def at(kind, doc_name, path="", value=None):
        """Sets `path` (`+` appends) of a prod document to value, deletes it (no value), or the document (no path)."""
        def mutate(m):
            node = doc(m, kind, doc_name)
            if not path:
                return m.overlays[PRODUCTION].remove(node)
            *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
            for key in parents:
                node = node[key]
            node.append(value) if last == "+" else node.pop(last) if value is None else node.__setitem__(last, value)
        return mutate

    def edit(mapping, key, old, new):
        mapping[key] = mapping[key].replace(old, new)

    def secret(m, secret_name):
        return next(s for s in m.secrets if s["metadata"]["name"] == secret_name)["stringData"]

    def compose_env(m, service, **values):
        m.compose["services"][service]["environment"].update(values)

    c0 = "spec.template.spec.containers.0."
    news = lambda m: pod_spec(doc(m, "Deployment", "news-service"))["containers"][0]
    egress_policies = lambda d: d["kind"] == "NetworkPolicy" and "Egress" in d["spec"].get("policyTypes", [])
    cases = [
        ("pods", "readinessProbe missing", at("Deployment", "gateway", c0 + "readinessProbe")),
        ("pods", "readOnlyRootFilesystem",
         at("Job", "news-migrate", c0 + "securityContext.readOnlyRootFilesystem", False)),
        ("pods", "Secret committed", lambda m: m.overlays[PRODUCTION].append(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "lingonews"}})),
        ("pods", "is not one of", at("Deployment", "gateway", c0 + "image", "registry.example.com/lingonews/gw:1")),
        ("objects", "maxReplicas 20", at("HorizontalPodAutoscaler", "news-service", "spec.maxReplicas", 5)),
        ("objects", "/metrics", at("HTTPRoute", "gateway", "spec.rules.0.matches.+", {"path": {"value": "/metrics"}})),
        ("objects", "no PodMonitor scrapes the CloudNativePG", at("PodMonitor", "lingonews-pg")),
        ("objects", "has no PodDisruptionBudget", at("PodDisruptionBudget", "gateway")),
        ("objects", "not an Ingress", lambda m: m.overlays[PRODUCTION].append({"kind": "Ingress", "metadata": {
            "name": "x", "namespace": "lingonews"}})),
        ("postgres", "no WAL archiving", at("Cluster", "lingonews-pg", "spec.plugins")),
        ("postgres", "no ScheduledBackup", at("ScheduledBackup", "lingonews-pg-daily")),
        ("postgres", "AWS_KEY",
         at("ObjectStore", "lingonews-backups", "spec.configuration.s3Credentials.accessKeyId.key", "AWS_KEY")),
        ("postgres", "Guaranteed QoS", at("Cluster", "lingonews-pg", "spec.resources.limits.memory", "4Gi")),
        ("postgres", "instanceSidecarConfiguration",
         at("ObjectStore", "lingonews-backups", "spec.instanceSidecarConfiguration.resources.limits")),
        ("postgres", "storageClass", at("Cluster", "lingonews-pg", "spec.storage.storageClass")),
        ("postgres", "differs from", lambda m: edit(vars(m), "bootstrap_sql", "\n", "\n-- changed\n")),
        ("netpol", "news-service", at("NetworkPolicy", "news-from-gateway", "spec.ingress.+", {"from": []})),
        ("netpol", "postgres",
         at("NetworkPolicy", "postgres-from-services-and-jobs", "spec.ingress.0.from.0.podSelector", {})),
        ("netpol", "only metrics ports",
         at("NetworkPolicy", "postgres-metrics-from-monitoring", "spec.ingress.0.ports")),
        ("netpol", "may connect to pods", at("NetworkPolicy", "gateway-egress", "spec.egress.0.to.+",
                                             {"podSelector": {"matchLabels": {"cnpg.io/cluster": "lingonews-pg"}}})),
        ("netpol", "egress unrestricted", lambda m: m.overlays.update(
            {PRODUCTION: [d for d in m.overlays[PRODUCTION] if not egress_policies(d)]})),
        ("compose", "NEWS_APP_PASSWORD", lambda m: m.env_example.pop("NEWS_APP_PASSWORD")),
        ("env", "LINGO_DATABSE_URL is not accepted",
         at("Deployment", "lingo-service", c0 + "env.+", {"name": "LINGO_DATABSE_URL", "value": "x"})),
        ("env", "GATEWAY_PORT is not accepted", lambda m: compose_env(m, "gateway", GATEWAY_PORT="8080")),
        ("env", "required NEWS_DATABASE_READ_URL", lambda m: news(m).update(
            env=[e for e in news(m)["env"] if e["name"] != "NEWS_DATABASE_READ_URL"])),
        ("env", "must be lingo_app", lambda m: compose_env(
            m, "lingo", LINGO_DATABASE_URL="postgres://lingo_owner:x@postgres:5432/lingonews")),
        ("env", "listens on loopback", lambda m: compose_env(m, "news", NEWS_LISTEN_ADDR="127.0.0.1:8082")),
        ("env", "reaches no lingo-service", lambda m: compose_env(m, "gateway", LINGO_UPSTREAMS="http://news:8081")),
        ("env", "must be verify-full", lambda m: edit(secret(m, "lingo-db"), "app-url", "verify-full", "prefer")),
        ("env", "is not mounted", at("Job", "news-migrate", c0 + "volumeMounts", [])),
        ("env", "read-only", lambda m: secret(m, "news-db").update({"read-url": secret(m, "news-db")["app-url"]})),
        ("env", "key nope", at("Deployment", "lingo-service", c0 + "env.1.valueFrom.secretKeyRef.key", "nope")),
        ("env", "AUTH_* differ", lambda m: compose_env(m, "news", AUTH_ISSUER="someone-else")),
        ("dockerfile", "--locked", lambda m: edit(vars(m), "dockerfile", "--release --locked", "--release")),
        ("dockerfile", "cargo build",
         lambda m: setattr(m, "dockerfile", re.sub(r"(cargo build [^&]*?)-p gateway ", r"\1", m.dockerfile))),
        ("dockerfile", "--no-default-features", lambda m: edit(vars(m), "dockerfile", "--locked --no-default-features",
                                                              "--locked")),
        ("dockerfile", "gateway/", lambda m: edit(vars(m), "dockerignore", "!gateway\n", "")),
    ]
    unreported = []
    for section, needle, mutate in cases:
        broken = copy.deepcopy(model)
        mutate(broken)
        errors = run_checks(broken)
        if not any(s == section and needle in message for s, message in errors):
            unreported.append(f"expected a [{section}] error mentioning {needle!r}; got {errors[:3]}")
    return unreported


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--bin-dir", type=Path, required=True)
    parser.add_argument("--rendered", type=Path, required=True,
                        help="holds overlays/<name>.yaml (kubectl kustomize) and secrets.yaml (make-secrets.sh)")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    model = load_model(args.root.resolve(), args.bin_dir.resolve(), args.rendered)
    if args.self_test:
        unreported = self_test(model)
        for line in unreported:
            print(f"self-test: NOT DETECTED: {line}")
        if unreported:
            return 1
        print("self-test: every deliberate break was reported")
    errors = run_checks(model)
    for section, message in errors:
        print(f"[{section}] {message}")
    print(f"check-manifests: {len(errors)} problem(s) in the project's rules for {', '.join(model.overlays)} "
          f"and compose" if errors else "check-manifests: the project's deployment rules hold")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
