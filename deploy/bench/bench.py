"""Helpers of deploy/bench/run.sh: tokens, the JWKS of a PEM key, the cursor of a deep page, and
the report (RESULTS.md tables, target verdicts, results.png) built from the run's results.jsonl."""

import argparse
import base64
import datetime
import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

NOTES_MARKER = "<!-- notes: everything below this line is kept when the report is regenerated -->"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(secret, sub, issuer, audience, ttl):
    now = int(time.time())
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": sub, "iss": issuer, "aud": audience, "iat": now,
                                 "exp": now + ttl}).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


def cmd_tokens(a):
    with open(a.out, "w") as out:
        for n in range(a.count):
            out.write(hs256(a.secret, f"{a.prefix}-{n:05d}", a.issuer, a.audience, a.ttl) + "\n")


def cmd_jwks(a):
    text = subprocess.run(["openssl", "rsa", "-pubin", "-in", a.pem, "-modulus", "-noout"],
                          capture_output=True, text=True, check=True).stdout
    modulus = bytes.fromhex(text.strip().split("=", 1)[1])
    jwk = {"kty": "RSA", "kid": a.kid, "alg": "RS256", "use": "sig",
           "n": b64url(modulus), "e": b64url((65537).to_bytes(3, "big"))}
    with open(a.out, "w") as out:
        json.dump({"keys": [jwk]}, out)


def cmd_cursor(a):
    """Walks `pages - 1` pages by cursor and prints the cursor of page `pages`."""
    cursor = None
    for _ in range(a.pages - 1):
        url = a.url + (f"&cursor={cursor}" if cursor else "")
        with urllib.request.urlopen(url) as response:
            cursor = json.load(response)["next_cursor"]
    print(urllib.parse.quote(cursor, safe="") if cursor else "None")


def cmd_writes(a):
    """Exactly `count` study sessions and `count` likes through the gateway, `connections` at a
    time, each awaited; then the rows of these callers are counted in PostgreSQL."""
    import asyncio

    import aiohttp

    tokens = [hs256(a.secret, f"{a.prefix}-{n:05d}", a.issuer, a.audience, 7200) for n in range(1000)]
    session_body = {"duration_seconds": 300, "phrases_seen": 12, "phrases_correct": 10,
                    "language_code": "es"}

    async def run(kind):
        ok, latencies, queue = 0, [], list(range(a.count))

        async def client(http):
            nonlocal ok
            while queue:
                n = queue.pop()
                headers = {"Authorization": f"Bearer {tokens[n % len(tokens)]}"}
                if kind == "sessions":
                    url, body = f"{a.gateway}/v1/lingo/me/study-sessions", session_body
                else:
                    url, body = f"{a.gateway}/v1/news/articles/art-{n % a.articles + 1:06d}/like", None
                t0 = time.monotonic()
                async with http.post(url, headers=headers, json=body) as response:
                    await response.read()
                    ok += 200 <= response.status < 300
                latencies.append(time.monotonic() - t0)

        connector = aiohttp.TCPConnector(limit=a.connections)
        async with aiohttp.ClientSession(connector=connector) as http:
            t0 = time.monotonic()
            await asyncio.gather(*(client(http) for _ in range(a.connections)))
            elapsed = time.monotonic() - t0
        latencies.sort()
        return ok, elapsed, latencies

    sql = {"sessions": f"SELECT count(*) FROM lingo.study_sessions WHERE learner_id LIKE '{a.prefix}-%'",
           "likes": f"SELECT count(*) FROM news.likes WHERE user_id LIKE '{a.prefix}-%'"}
    with open(a.results, "a") as out:
        for kind in ("sessions", "likes"):
            ok, elapsed, lat = asyncio.run(run(kind))
            rows = int(subprocess.run([a.psql, "-X", "-tA", a.db_url, "-c", sql[kind]],
                                      capture_output=True, text=True, check=True).stdout)
            name = f"{'study sessions' if kind == 'sessions' else 'likes'} (exact: {a.count:,} awaited requests)"
            out.write(json.dumps({"group": "check", "name": name, "ok": ok, "rows": rows,
                                  "rps": a.count / elapsed, "p50_ms": lat[len(lat) // 2] * 1000,
                                  "p99_ms": lat[int(len(lat) * 0.99)] * 1000}) + "\n")
            print(f"  {name}: {ok} responses 2xx, {rows} in the database "
                  f"({a.count / elapsed:.0f} req/s with the Python client)", file=sys.stderr)


def cmd_show(a):
    w = json.loads(a.result)
    sock = w["connect_errors"] + w["read_errors"] + w["write_errors"] + w["timeouts"]
    print(f"  {a.label:<44} {w['rps']:>9.0f} req/s  p50 {w['p50_ms']:7.3f} ms  p99 {w['p99_ms']:8.3f} ms"
          f"  non-2xx {w['non_2xx_3xx']}  socket errors {sock}  (load {a.load})")


# --- report ----------------------------------------------------------------------------------

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt(x, digits=2):
    return "–" if x is None else f"{x:,.{digits}f}"


def errors(w):
    n = w["connect_errors"] + w["read_errors"] + w["write_errors"] + w["timeouts"] + w["non_2xx_3xx"]
    return f"{n:,}"


def step_table(steps, extra_cols=()):
    head = "| step | conc. | req/s | p50 ms | p99 ms | errors / non-2xx |" + "".join(
        f" {c} |" for c, _ in extra_cols) + " load avg before |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for s in steps:
        w = s["wrk"]
        rows.append(f"| {s['label']} | {s['conc']} | {fmt(w['rps'], 0)} | {fmt(w['p50_ms'], 3)} | "
                    f"{fmt(w['p99_ms'], 3)} | {errors(w)} |" + "".join(
                        f" {fn(s)} |" for _, fn in extra_cols) + f" {s['load']} |")
    return "\n".join(rows)


def cmd_report(a):
    records = load(a.results)
    meta = next(r for r in records if r["group"] == "meta")
    steps = [r for r in records if r["group"] == "step"]
    by = {r["name"]: r for r in steps}
    checks = [r for r in records if r["group"] == "check"]
    memory = [r for r in records if r["group"] == "memory"]
    w = lambda name, key: by[name]["wrk"][key] if name in by else None  # noqa: E731

    out = [f"# Benchmark results", "",
           f"- **Date**: {meta['date']}",
           f"- **Machine**: {meta['cpu']}, {meta['cores']} cores, {meta['mem']} RAM; {meta['kernel']}",
           f"- **Command**: `{meta['command']}` (commit {meta['commit']}{meta['dirty']})",
           f"- **Tools**: {meta['wrk']}; {meta['haproxy']}; PostgreSQL {meta['pg']}",
           f"- **Data**: {meta['articles']:,} articles, {meta['learners']:,} learners with "
           f"{meta['sessions']:,} study sessions",
           f"- **Shape**: every process (load generator, gateway, HAProxy, services, PostgreSQL) on "
           f"the same {meta['cores']}-core machine over loopback; wrk with 2 threads, "
           f"{meta['step_secs']} s per step ({meta['latency_secs']} s for the single-connection "
           f"latency steps). The load generator competes for the same cores, so absolute numbers "
           f"are lower bounds; ratios between rows of one table are the meaningful part.",
           f"- **Other work on the machine**: load average before each step is in the tables "
           f"(at start: {meta['load_start']}). {meta['other_work']}", ""]

    out += ["## 1. Gateway against a real peer (JWT verify + proxy)", "",
            "Route `GET /v1/lingo/languages` with a bearer token, the same lingo-service replica "
            "behind every path (the service verifies the token again itself on every path). "
            "*HAProxy*: 2.6 with `jwt_verify` plus `iss`, `aud`, `exp` checks in ACLs, then "
            "`proxy`. *gateway*: ours with its default token cache; *gateway, no cache*: "
            "`TOKEN_CACHE_CAPACITY=0`, i.e. the same per-request signature check HAProxy does.", ""]
    for alg in ("hs", "rs"):
        alg_steps = [by[n] for n in (f"direct-{alg}", f"gateway-{alg}", f"gateway-nocache-{alg}",
                                     f"haproxy-{alg}") if n in by]
        ha = w(f"haproxy-{alg}", "rps")
        direct = w(f"direct-{alg}", "rps")
        out += [f"### {alg.upper()}256, {by[f'direct-{alg}']['conc']} connections", "",
                step_table(alg_steps, [
                    ("vs HAProxy req/s", lambda s, ha=ha: fmt(s["wrk"]["rps"] / ha) + "×" if ha else "–"),
                    ("vs direct req/s", lambda s, d=direct: fmt(s["wrk"]["rps"] / d) + "×" if d else "–"),
                ]), ""]
        lat = [by[n] for n in (f"lat-direct-{alg}", f"lat-gateway-{alg}", f"lat-gateway-nocache-{alg}",
                               f"lat-haproxy-{alg}") if n in by]
        if lat:
            d50 = w(f"lat-direct-{alg}", "p50_ms")
            out += [f"Single connection (`-c 1`), {alg.upper()}256: latency added over the direct call", "",
                    step_table(lat, [("added p50 ms", lambda s, d=d50: fmt(s["wrk"]["p50_ms"] - d, 3))]), ""]

    news = [by[n] for n in ("news-anon", "news-token", "news-page500-offset", "news-page500-cursor",
                            "news-page1-direct", "news-page500-cursor-direct") if n in by]
    out += ["## 2. News reads", "",
            f"`GET /v1/news/articles?limit=20` through the gateway over {meta['articles']:,} articles; "
            "page 500 = `offset=9980` or the `next_cursor` reached by walking 499 pages.", "",
            step_table(news), ""]

    out += ["## 3. Writes (64 connections), checked against the database", "",
            "Study sessions: `POST /v1/lingo/me/study-sessions` for 1,000 learners in rotation. "
            "Likes: `POST /v1/news/articles/{id}/like`, a new (caller, article) pair on every request. "
            "Afterwards the rows for this run's callers are counted in PostgreSQL.", "",
            step_table([by[n] for n in ("write-sessions", "write-likes") if n in by]), "",
            "| check | 2xx responses | rows in the database | equal |", "|---|---|---|---|"]
    for c in checks:
        extra = c["rows"] - c["ok"]
        if extra == 0:
            verdict = "yes"
        elif "in_flight" in c and 0 < extra <= c["in_flight"]:
            verdict = f"+{extra} rows: requests wrk abandoned in flight at its deadline (≤ {c['in_flight']})"
        else:
            verdict = "**NO**"
        out.append(f"| {c['name']} | {c['ok']:,} | {c['rows']:,} | {verdict} |")
    exact = [c for c in checks if "rps" in c]
    if exact:
        out += ["", "The exact runs (Python aiohttp client, every request awaited): " + "; ".join(
            f"{c['name'].split(' (')[0]} {c['rps']:,.0f} req/s, p50 {c['p50_ms']:.1f} ms, "
            f"p99 {c['p99_ms']:.1f} ms" for c in exact) + "."]
    out.append("")

    out += ["## 4. Memory", "",
            "Peak resident set (`VmHWM`) of each process over the whole run, which includes the "
            "256-connection steps below.", "",
            step_table([by[n] for n in ("c256-gateway-news", "c256-gateway-lingo", "c256-direct-news",
                                        "c256-direct-lingo") if n in by]), "",
            "| process | peak RSS MiB |", "|---|---|"]
    for m in memory:
        out.append(f"| {m['name']} | {m['vmhwm_kib'] / 1024:.1f} |")
    out.append("")

    # --- targets ---
    mem = {m["name"]: m["vmhwm_kib"] / 1024 for m in memory}
    targets = []

    def target(what, ok, detail):
        targets.append(f"| {what} | {'met' if ok else '**missed**'} | {detail} |")

    for alg in ("hs", "rs"):
        g, gn, h = w(f"gateway-{alg}", "rps"), w(f"gateway-nocache-{alg}", "rps"), w(f"haproxy-{alg}", "rps")
        if g and h:
            target(f"gateway req/s ≥ HAProxy ({alg.upper()}256)", g >= h,
                   f"{g:,.0f} vs {h:,.0f} req/s ({g / h:.2f}×); without the token cache {gn:,.0f} ({gn / h:.2f}×)")
        d, gl = w(f"lat-direct-{alg}", "p50_ms"), w(f"lat-gateway-{alg}", "p50_ms")
        if d is not None and gl is not None:
            target(f"gateway adds ≤ 0.2 ms at p50 ({alg.upper()}256, 1 connection)", gl - d <= 0.2,
                   f"{gl:.3f} vs {d:.3f} ms direct: +{gl - d:.3f} ms")
        d64, g64 = w(f"direct-{alg}", "p50_ms"), w(f"gateway-{alg}", "p50_ms")
        if d64 is not None and g64 is not None:
            target(f"gateway adds ≤ 0.2 ms at p50 ({alg.upper()}256, 64 connections)", g64 - d64 <= 0.2,
                   f"{g64:.3f} vs {d64:.3f} ms direct: +{g64 - d64:.3f} ms")
    p1, p500 = w("news-anon", "p50_ms"), w("news-page500-cursor", "p50_ms")
    if p1 and p500:
        target("page 500 by cursor ≤ 1.5× page 1", p500 <= 1.5 * p1,
               f"p50 {p500:.2f} vs {p1:.2f} ms ({p500 / p1:.2f}×)")
    if "gateway" in mem:
        target("gateway RSS < 50 MiB at 256 connections", mem["gateway"] < 50, f"{mem['gateway']:.1f} MiB")
    for svc in ("lingo-service", "news-service"):
        if svc in mem:
            target(f"{svc} RSS < 100 MiB at 256 connections", mem[svc] < 100, f"{mem[svc]:.1f} MiB")
    if exact:
        target("write totals in the database equal the 2xx responses (exact runs)",
               all(c["ok"] == c["rows"] for c in exact),
               "; ".join(f"{c['name'].split(' (')[0]}: {c['ok']:,} 2xx / {c['rows']:,} rows" for c in exact))
    out += ["## Targets", "", "| target | verdict | measured |", "|---|---|---|"] + targets + [""]

    if a.profile:
        try:
            with open(a.profile) as f:
                # perf pads its columns to the terminal width: keep the words only.
                prof = "\n".join(re.sub(r"\s{2,}", "  ", re.sub(r"\s+-\s+-\s*$", "", line)).strip()
                                 for line in f if line.strip())
            out += ["## Profile of the gateway", "",
                    "`perf record -F 999 -g` of the gateway process during a repeat of the "
                    "64-connection HS256 gateway step (flat, self time; top symbols):", "",
                    "```", prof, "```", ""]
        except FileNotFoundError:
            pass

    out += ["![throughput and latency](results.png)", ""]

    notes = ""
    try:
        with open(a.out) as f:
            old = f.read()
        if NOTES_MARKER in old:
            notes = old.split(NOTES_MARKER, 1)[1]
    except FileNotFoundError:
        pass
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n" + NOTES_MARKER + (notes or "\n"))
    plot(steps, a.png)
    print("\n".join(["", "Targets:"] + targets))


def plot(steps, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [s["label"] for s in steps]
    rps = [s["wrk"]["rps"] for s in steps]
    p50 = [s["wrk"]["p50_ms"] for s in steps]
    p99 = [s["wrk"]["p99_ms"] for s in steps]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 10), sharex=True)
    x = range(len(steps))
    top.bar(x, rps, color="#4C72B0")
    top.set_ylabel("requests / s")
    top.set_title("Throughput per step")
    top.grid(axis="y", alpha=0.3)
    width = 0.4
    bottom.bar([i - width / 2 for i in x], p50, width, label="p50", color="#55A868")
    bottom.bar([i + width / 2 for i in x], p99, width, label="p99", color="#C44E52")
    bottom.set_yscale("log")
    bottom.set_ylabel("latency, ms (log)")
    bottom.set_title("Latency per step")
    bottom.legend()
    bottom.grid(axis="y", alpha=0.3)
    bottom.set_xticks(list(x))
    bottom.set_xticklabels([f"{l} (c{s['conc']})" for l, s in zip(labels, steps)], rotation=60,
                           ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokens")
    t.add_argument("--secret", required=True)
    t.add_argument("--prefix", required=True)
    t.add_argument("--count", type=int, default=1000)
    t.add_argument("--issuer", default="lingo-news-dev")
    t.add_argument("--audience", default="lingo-news")
    t.add_argument("--ttl", type=int, default=7200)
    t.add_argument("--out", required=True)
    j = sub.add_parser("jwks")
    j.add_argument("--pem", required=True)
    j.add_argument("--kid", required=True)
    j.add_argument("--out", required=True)
    c = sub.add_parser("cursor")
    c.add_argument("--url", required=True)
    c.add_argument("--pages", type=int, default=500)
    s = sub.add_parser("show")
    for name in ("label", "result", "load"):
        s.add_argument(name)
    w = sub.add_parser("writes")
    for flag in ("--gateway", "--secret", "--prefix", "--results", "--psql", "--db-url"):
        w.add_argument(flag, required=True)
    w.add_argument("--tokens")
    w.add_argument("--issuer", default="lingo-news-dev")
    w.add_argument("--audience", default="lingo-news")
    w.add_argument("--articles", type=int, required=True)
    w.add_argument("--count", type=int, default=4000)
    w.add_argument("--connections", type=int, default=64)
    r = sub.add_parser("report")
    r.add_argument("--results", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--png", required=True)
    r.add_argument("--profile")
    a = p.parse_args()
    {"tokens": cmd_tokens, "jwks": cmd_jwks, "cursor": cmd_cursor, "writes": cmd_writes, "show": cmd_show,
     "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
