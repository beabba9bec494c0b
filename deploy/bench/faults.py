"""Load and fault scenarios against a running stack (started by deploy/bench/faults.sh).

Each scenario drives mixed traffic through the gateway with asyncio + aiohttp, injects its fault
at a fixed moment, records every request (start, end, status, problem code), then checks the
stated properties and, for writes, asks PostgreSQL (psql) whether every successful write is
present exactly once. Prints one PASS/FAIL line per property; exits 1 when any fails.

`faults.py blackhole --port P` is the upstream that accepts connections and never answers.
"""

import argparse
import asyncio
import base64
import collections
import hashlib
import hmac
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid

import aiohttp

FAILURES = []


def check(ok, what):
    print(f"  {'PASS' if ok else 'FAIL'}: {what}", flush=True)
    if not ok:
        FAILURES.append(what)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_token(secret, sub, issuer, audience):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    now = int(time.time())
    claims = {"sub": sub, "iss": issuer, "aud": audience, "iat": now, "exp": now + 3600}
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = hmac.new(secret.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


class Record:
    __slots__ = ("t0", "t1", "kind", "target", "status", "problem", "code", "error")

    def __init__(self, t0, kind, target):
        self.t0, self.kind, self.target = t0, kind, target
        self.t1 = None
        self.status = 0  # 0: no HTTP answer (connection error or client timeout)
        self.problem = False
        self.code = None
        self.error = None

    @property
    def latency(self):
        return self.t1 - self.t0

    @property
    def ok(self):
        return 200 <= self.status < 300


class Run:
    """One scenario's traffic: what was sent, what came back, and the writes that succeeded."""

    def __init__(self, args, name):
        self.args = args
        self.prefix = f"flt-{args.run_id}-{name}"
        self.records = []
        self.sessions = []  # (id, learner)
        self.comments = []  # (id, author, article)
        self.likes = set()  # (article, user)
        self.start = time.monotonic()

    def sub(self, worker):
        return f"{self.prefix}-w{worker:02d}"

    def at(self, t):
        return t - self.start


async def call(session, run, kind, target, method, url, token=None, body=None):
    record = Record(time.monotonic(), kind, target)
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        async with session.request(method, url, headers=headers, json=body) as response:
            record.status = response.status
            payload = await response.read()
            content_type = response.headers.get("Content-Type", "")
            record.problem = content_type.startswith("application/problem+json")
            doc = None
            if payload and "json" in content_type:
                doc = json.loads(payload)
                if record.problem:
                    record.code = doc.get("code")
    except (aiohttp.ClientError, asyncio.TimeoutError) as error:
        record.error = type(error).__name__
        doc = None
    record.t1 = time.monotonic()
    run.records.append(record)
    return record, doc


WEIGHTS = [
    ("articles_anon", 15), ("articles_token", 10), ("article", 10), ("languages", 10),
    ("xp", 5), ("like", 20), ("comment", 15), ("session", 15),
]
# What the overload step sends straight at one news instance: its reads and writes only.
NEWS_WEIGHTS = [(k, w) for k, w in WEIGHTS
                if k in ("articles_anon", "articles_token", "article", "like", "comment")]


async def one_request(session, run, worker, rng, token, gateway, weights=WEIGHTS):
    a = run.args
    kind = rng.choices([k for k, _ in weights], weights=[w for _, w in weights])[0]
    article = f"art-{rng.randint(1, a.articles):06d}"
    if kind == "articles_anon":
        await call(session, run, kind, "news", "GET", f"{gateway}/v1/news/articles?limit=20")
    elif kind == "articles_token":
        await call(session, run, kind, "news", "GET", f"{gateway}/v1/news/articles?limit=20", token)
    elif kind == "article":
        await call(session, run, kind, "news", "GET", f"{gateway}/v1/news/articles/{article}", token)
    elif kind == "languages":
        await call(session, run, kind, "lingo", "GET", f"{gateway}/v1/lingo/languages")
    elif kind == "xp":
        await call(session, run, kind, "lingo", "GET", f"{gateway}/v1/lingo/me/xp", token)
    elif kind == "like":
        record, doc = await call(session, run, kind, "news", "POST",
                                 f"{gateway}/v1/news/articles/{article}/like", token)
        if record.ok:
            run.likes.add((article, run.sub(worker)))
    elif kind == "comment":
        text = f"load {uuid.uuid4()}"
        record, doc = await call(session, run, kind, "news", "POST", f"{gateway}/v1/news/comments",
                                 token, {"article_id": article, "text": text})
        if record.status == 201:
            run.comments.append((doc["id"], run.sub(worker), article))
    else:
        seen = rng.randint(0, 20)
        body = {"duration_seconds": rng.randint(1, 900), "phrases_seen": seen,
                "phrases_correct": rng.randint(0, seen), "language_code": rng.choice(["es", "fr", "de"])}
        record, doc = await call(session, run, kind, "lingo", "POST",
                                 f"{gateway}/v1/lingo/me/study-sessions", token, body)
        if record.status == 201:
            run.sessions.append((doc["id"], run.sub(worker)))


async def traffic(run, seconds, gateway=None):
    """`workers` clients, each with its own caller, sending the weighted mix until time is up."""
    a = run.args
    gateway = gateway or a.gateway
    deadline = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=a.client_timeout)
    connector = aiohttp.TCPConnector(limit=a.workers * 2)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async def worker(n):
            rng = random.Random(f"{run.prefix}-{n}")
            token = hs256_token(a.secret, run.sub(n), a.issuer, a.audience)
            while time.monotonic() < deadline:
                await one_request(session, run, n, rng, token, gateway)
        await asyncio.gather(*(worker(n) for n in range(a.workers)))


def summarize(run, records=None):
    records = run.records if records is None else records
    statuses = collections.Counter(r.status if r.status else f"no-answer:{r.error}" for r in records)
    lat = sorted(r.latency for r in records)
    p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: 0)
    elapsed = max(r.t1 for r in records) - min(r.t0 for r in records) if records else 0
    print(f"  {len(records)} requests in {elapsed:.1f} s ({len(records) / max(elapsed, 1e-9):.0f}/s), "
          f"p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {p(1.0):.0f} ms; statuses {dict(statuses)}",
          flush=True)


# --- database verification ---------------------------------------------------------------------

def psql(args, sql):
    out = subprocess.run([args.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-tA", "-F", "\t",
                          args.db_url], input=sql, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {out.stderr}")
    return dict(line.split("\t") for line in out.stdout.splitlines() if "\t" in line)


def copy_block(table, rows):
    lines = "".join("\t".join(row) + "\n" for row in rows)
    return f"COPY {table} FROM STDIN;\n{lines}\\.\n"


def verify_writes(run):
    """Every 2xx write is in the database exactly once; rows beyond the successes must be
    explained by requests whose outcome the client cannot know: no answer, or a 5xx other than
    the gateway's 503 upstream_unavailable (sent nowhere). A 5xx promises nothing was done only
    in that one case (RFC 9110 leaves it open); the rows such requests did commit are shown."""
    unknown = collections.Counter(
        r.kind for r in run.records if r.kind in ("like", "comment", "session")
        and (r.status == 0 or (r.status >= 500
                               and not (r.status == 503 and r.code == "upstream_unavailable"))))
    subs = {run.sub(n) for n in range(run.args.workers)}
    sql = ("CREATE TEMP TABLE subs (sub text);\n" + copy_block("subs", [(s,) for s in subs])
           + "CREATE TEMP TABLE ok_sessions (id uuid, learner text);\n"
           + copy_block("ok_sessions", run.sessions)
           + "CREATE TEMP TABLE ok_comments (id uuid, author text, article text);\n"
           + copy_block("ok_comments", run.comments)
           + "CREATE TEMP TABLE ok_likes (article text, sub text);\n"
           + copy_block("ok_likes", sorted(run.likes))
           + """
SELECT 'sessions_matched', count(*) FROM ok_sessions o
  JOIN lingo.study_sessions s ON s.id = o.id AND s.learner_id = o.learner;
SELECT 'sessions_rows', count(*) FROM lingo.study_sessions WHERE learner_id IN (SELECT sub FROM subs);
SELECT 'learner_totals_wrong', count(*) FROM lingo.learners l
  LEFT JOIN (SELECT learner_id, count(*) AS n, sum(xp_awarded) AS xp FROM lingo.study_sessions
              WHERE learner_id IN (SELECT sub FROM subs) GROUP BY learner_id) s USING (learner_id)
  WHERE l.learner_id IN (SELECT sub FROM subs)
    AND (l.sessions, l.total_xp) IS DISTINCT FROM (coalesce(s.n, 0), coalesce(s.xp, 0));
SELECT 'comments_matched', count(*) FROM ok_comments o
  JOIN news.comments c ON c.id = o.id AND c.author_id = o.author AND c.article_id = o.article;
SELECT 'comments_rows', count(*) FROM news.comments WHERE author_id IN (SELECT sub FROM subs);
SELECT 'likes_matched', count(*) FROM ok_likes o
  JOIN news.likes l ON l.article_id = o.article AND l.user_id = o.sub;
SELECT 'likes_rows', count(*) FROM news.likes WHERE user_id IN (SELECT sub FROM subs);
""")
    got = {k: int(v) for k, v in psql(run.args, sql).items()}
    for name, ok_rows, kind in (("sessions", run.sessions, "session"),
                                ("comments", run.comments, "comment"),
                                ("likes", run.likes, "like")):
        ids = [row[0] for row in ok_rows] if name != "likes" else list(ok_rows)
        extra = got[f"{name}_rows"] - len(ok_rows)
        check(len(set(ids)) == len(ids) and got[f"{name}_matched"] == len(ok_rows),
              f"{name}: all {len(ok_rows)} successful writes found in the database, each once "
              f"(matched {got[f'{name}_matched']})")
        if extra > 0:
            print(f"  note: {extra} {name} committed although the client got no 2xx for them")
        check(0 <= extra <= unknown[kind],
              f"{name}: {got[f'{name}_rows']} rows for this run's callers = {len(ok_rows)} successes"
              f" + {extra} (allowed: {unknown[kind]} requests with an unknown outcome)")
    check(got["learner_totals_wrong"] == 0,
          f"learner totals (sessions, total_xp) equal their study sessions "
          f"({got['learner_totals_wrong']} learners wrong)")


# --- scenarios ---------------------------------------------------------------------------------

async def scenario_mixed(args):
    print(f"\n--- mixed traffic through the gateway, {args.mixed_secs} s, {args.workers} clients",
          flush=True)
    run = Run(args, "mixed")
    await traffic(run, args.mixed_secs)
    summarize(run)
    bad = [r for r in run.records if r.status >= 500 or r.status == 0]
    check(not bad, f"no 5xx and no unanswered request ({len(bad)} seen: "
                   f"{collections.Counter((r.status, r.code, r.error) for r in bad).most_common(3)})")
    check(len(run.records) > 0 and all(r.ok for r in run.records),
          f"every request succeeded ({sum(not r.ok for r in run.records)} did not)")
    verify_writes(run)


async def run_shell(command):
    proc = await asyncio.create_subprocess_shell(command, stdout=asyncio.subprocess.DEVNULL,
                                                 stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{command!r} failed: {err.decode()}")


async def probe_services(args, run, stop):
    """Direct calls to each service every 100 ms: a DB-backed read per service, and /readyz."""
    token = hs256_token(args.secret, f"{run.prefix}-probe", args.issuer, args.audience)
    timeout = aiohttp.ClientTimeout(total=args.client_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            news = args.news[0]
            await asyncio.gather(
                call(session, run, "probe", "lingo", "GET", f"{args.lingo}/v1/lingo/me/xp", token),
                call(session, run, "probe", "news", "GET",
                     f"{news}/v1/news/articles/art-000001", token),
                call(session, run, "ready", "lingo", "GET", f"{args.lingo}/readyz"),
                call(session, run, "ready", "news", "GET", f"{news}/readyz"),
            )
            await asyncio.sleep(0.1)


async def scenario_pg_outage(args):
    before, down_for = args.outage_before_secs, 5.0
    after = args.outage_after_secs
    print(f"\n--- PostgreSQL stopped for {down_for:.0f} s, {before:.0f} s into "
          f"{before + down_for + after:.0f} s of mixed traffic", flush=True)
    run = Run(args, "pgout")
    stop = asyncio.Event()

    async def fault():
        await asyncio.sleep(before)
        await run_shell(args.pg_stop)
        times["down"] = time.monotonic()
        print(f"  PostgreSQL stopped at t={run.at(times['down']):.1f} s", flush=True)
        await asyncio.sleep(down_for)
        await run_shell(args.pg_start)
        times["up"] = time.monotonic()
        print(f"  PostgreSQL accepting connections again at t={run.at(times['up']):.1f} s", flush=True)

    times = {}
    prober = asyncio.create_task(probe_services(args, run, stop))
    await asyncio.gather(traffic(run, before + down_for + after), fault())
    stop.set()
    await prober
    summarize(run, [r for r in run.records if r.kind not in ("probe", "ready")])
    down, up = times["down"], times["up"]
    during = [r for r in run.records if r.t1 > down + 0.5 and r.t0 < up]
    failed = [r for r in run.records if not r.ok]
    wrong = [r for r in failed if not (r.status == 503 and r.problem)]
    check(not wrong, "every failure is a 503 problem, none is another status, a hang or a crash "
                     f"({len(wrong)} others: "
                     f"{collections.Counter((r.status, r.code, r.error) for r in wrong).most_common(4)})")
    outage_503 = [r for r in during if r.status == 503 and r.problem]
    check(len(outage_503) > 0, f"the outage was seen: {len(outage_503)} 503 problems while it lasted, "
                               f"codes {dict(collections.Counter(r.code for r in outage_503))}")
    slowest = max((r.latency for r in run.records), default=0)
    check(slowest <= args.max_answer_secs,
          f"no request hung: slowest answer {slowest:.1f} s (limit {args.max_answer_secs:.0f} s)")
    for target in ("lingo", "news"):
        for kind in ("probe", "ready"):
            after_up = sorted((r for r in run.records if r.kind == kind and r.target == target
                               and r.t0 >= up), key=lambda r: r.t0)
            # Recovered from the first request after which every later one succeeded.
            recovered_at = None
            for r in after_up:
                if r.ok and recovered_at is None:
                    recovered_at = r.t1
                elif not r.ok:
                    recovered_at = None
            what = "DB-backed read" if kind == "probe" else "/readyz"
            if recovered_at is None:
                check(False, f"{target} {what} recovered after PostgreSQL returned (it did not)")
            else:
                took = recovered_at - up
                check(took <= 5.0, f"{target} {what} recovered {took:.2f} s after PostgreSQL returned"
                                   " (limit 5 s)")
    gw_after = sorted((r for r in run.records if r.kind not in ("probe", "ready") and r.t0 >= up),
                      key=lambda r: r.t0)
    last_bad = max((r.t1 for r in gw_after if not r.ok), default=up)
    print(f"  through the gateway: last failure {last_bad - up:.2f} s after PostgreSQL returned",
          flush=True)
    check(last_bad - up <= 5.0 + args.max_answer_secs / 2,
          "traffic through the gateway recovered by itself")
    for pid in args.alive_pids:
        check(pid_alive(pid), f"process {pid} still running")
    verify_writes(run)


async def calibrate(args, run, base, seconds):
    """Closed loop at the instance's in-flight limit: the rate it can serve (requests/s)."""
    deadline = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=args.client_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def worker(n):
            rng = random.Random(f"{run.prefix}-cal-{n}")
            token = hs256_token(args.secret, run.sub(n), args.issuer, args.audience)
            while time.monotonic() < deadline:
                await one_request(session, run, n, rng, token, base, NEWS_WEIGHTS)
        await asyncio.gather(*(worker(n) for n in range(args.overload_in_flight)))


async def open_loop(args, run, base, rate, seconds, max_outstanding=1000):
    """Requests started at `rate` per second whatever the answers (an open loop: a closed one
    would slow down with the server and never overload it), at most `max_outstanding` at once."""
    tokens = [hs256_token(args.secret, run.sub(n), args.issuer, args.audience)
              for n in range(args.workers)]
    timeout = aiohttp.ClientTimeout(total=args.client_timeout)
    connector = aiohttp.TCPConnector(limit=max_outstanding)
    pending = set()
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        start, i = time.monotonic(), 0
        while (now := time.monotonic()) < start + seconds:
            due = start + i / rate
            if due > now:
                await asyncio.sleep(due - now)
            if len(pending) >= max_outstanding:
                await asyncio.sleep(0.001)
                continue
            n = i % args.workers
            rng = random.Random(f"{run.prefix}-{i}")
            task = asyncio.create_task(
                one_request(session, run, n, rng, tokens[n], base, NEWS_WEIGHTS))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
        await asyncio.gather(*pending)


def percentile_ms(records, q):
    lat = sorted(r.latency for r in records)
    return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else 0.0


ANSI = re.compile(r"\x1b\[[0-9;]*m")
ELAPSED = re.compile(r"status=503\b.*?elapsed_ms=([0-9.]+)")


def shed_times_ms(log_path, start):
    """The service's own time for each 503 it logged since byte `start` of its log, sorted."""
    with open(log_path, "rb") as log:
        log.seek(start)
        text = ANSI.sub("", log.read().decode("utf-8", "replace"))
    return sorted(float(m.group(1)) for m in ELAPSED.finditer(text))


async def scenario_overload(args):
    """A news instance with a small in-flight limit and pool, driven at about 4x what it serves:
    the excess must be refused at once with 503 overloaded, what is admitted must stay fast, no
    other 5xx, and the instance must serve normally as soon as the load stops."""
    base, secs = args.overload_news, args.overload_secs
    print(f"\n--- overload: news at {base} (in-flight limit {args.overload_in_flight}) driven at "
          f"{args.overload_factor:.0f}x its capacity for {secs:.0f} s", flush=True)
    # One run (one set of callers) for all three phases, so its writes are checked together.
    run = Run(args, "overload")
    await calibrate(args, run, base, args.overload_calibrate_secs)
    cal = list(run.records)
    capacity = sum(r.ok for r in cal) / args.overload_calibrate_secs
    check(capacity > 0 and all(r.ok for r in cal),
          f"calibration at the limit: {capacity:.0f} requests/s, every one answered 2xx "
          f"({sum(not r.ok for r in cal)} not)")
    rate = max(capacity, 1.0) * args.overload_factor
    log_start = os.path.getsize(args.overload_log) if args.overload_log else 0
    await open_loop(args, run, base, rate, secs)
    stopped = time.monotonic()
    load = run.records[len(cal):]
    summarize(run, load)
    offered = len(load) / secs
    print(f"  offered {offered:.0f} requests/s = {offered / max(capacity, 1):.1f}x capacity",
          flush=True)
    admitted = [r for r in load if r.ok]
    shed = [r for r in load if r.status == 503 and r.problem and r.code == "overloaded"]
    other = [r for r in load if not r.ok and not (r.status == 503 and r.code == "overloaded")]
    check(len(shed) > 0 and len(admitted) > 0,
          f"the excess was shed: {len(shed)} 503 overloaded, {len(admitted)} admitted")
    check(not other, f"no other failure, 5xx or unanswered request ({len(other)}: "
                     f"{collections.Counter((r.status, r.code, r.error) for r in other).most_common(4)})")
    # Seen from this client, a shed answer waits behind everything else the client is doing at
    # 4x load on the same cores; whether the service refused at once is in its own log, which
    # records every 5xx with the time the service spent on it.
    print(f"  client-side p99 of the 503s: {percentile_ms(shed, 0.99):.0f} ms", flush=True)
    if args.overload_log:
        served = shed_times_ms(args.overload_log, log_start)
        served_p99 = served[min(len(served) - 1, int(0.99 * len(served)))] if served else 0.0
        check(served and served_p99 <= args.overload_shed_p99_ms,
              f"shed at once: the service answered {len(served)} 503s with p99 {served_p99:.1f} ms "
              f"of its own time (limit {args.overload_shed_p99_ms:.0f} ms)")
    admitted_p99 = percentile_ms(admitted, 0.99)
    check(admitted_p99 <= args.overload_admitted_p99_ms,
          f"admitted requests stay bounded: p99 {admitted_p99:.0f} ms, p50 "
          f"{percentile_ms(admitted, 0.5):.0f} ms (limit p99 {args.overload_admitted_p99_ms:.0f} ms)")
    before_after = len(run.records)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        token = hs256_token(args.secret, run.sub(0), args.issuer, args.audience)
        rng = random.Random(f"{run.prefix}-after")
        for _ in range(20):
            await one_request(session, run, 0, rng, token, base, NEWS_WEIGHTS)
    after = run.records[before_after:]
    check(all(r.ok for r in after),
          f"recovered by itself: {sum(r.ok for r in after)}/{len(after)} requests "
          f"ok within {time.monotonic() - stopped:.1f} s of the load stopping")
    verify_writes(run)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


async def scenario_blackhole(args):
    """The stub upstream first hangs every API request while its /readyz still answers (a stuck
    handler pool): each stalled request must get 504 at the gateway's timeout (concurrent misses
    for the cacheable URL share one upstream request, and its 504). Then it stops answering
    /readyz too: once the gateway's probe marks it down the gateway still tries it (panic
    routing), so 504 at the timeout again, or 503 upstream_unavailable at once. Meanwhile the
    gateway's other routes must keep answering promptly."""
    timeout = args.upstream_timeout_ms / 1000
    print(f"\n--- an upstream that stops answering (gateway timeout {timeout:.1f} s)", flush=True)
    run = Run(args, "hole")
    gw = args.gateway2
    stalled = f"{gw}/v1/lingo/languages"
    done = asyncio.Event()

    async def others(session):
        token = hs256_token(args.secret, run.sub(0), args.issuer, args.audience)
        while not done.is_set():
            await call(session, run, "other", "news", "GET", f"{gw}/v1/news/articles?limit=20", token)
            await call(session, run, "other", "gateway", "GET", f"{gw}/healthz")

    async def stall(session):
        # Part 1: API stuck, health check fine.
        await asyncio.gather(*(call(session, run, "hung", "lingo", "GET", stalled) for _ in range(8)))
        # Part 2: the whole process stops answering; keep calling past the probe's detection.
        os.kill(args.hole_pid, signal.SIGUSR1)
        end = time.monotonic() + args.probe_detect_secs + 2 * timeout
        while time.monotonic() < end:
            await asyncio.gather(*(call(session, run, "dead", "lingo", "GET", stalled) for _ in range(4)))
        done.set()

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        await asyncio.gather(stall(session), *(others(session) for _ in range(4)))
    hung = [r for r in run.records if r.kind == "hung"]
    ok_504 = [r for r in hung if r.status == 504 and r.problem and r.code == "upstream_timeout"]
    lat = [r.latency for r in hung]
    check(len(ok_504) == len(hung) == 8,
          f"a stalled upstream: 504 upstream_timeout ({len(ok_504)}/{len(hung)}; got "
          f"{collections.Counter((r.status, r.code) for r in hung)})")
    check(all(timeout - 0.05 <= x <= timeout + 1.0 for x in lat),
          f"at the timeout: {min(lat):.2f}..{max(lat):.2f} s (timeout {timeout:.1f} s, +1 s allowed)")
    dead = [r for r in run.records if r.kind == "dead"]
    shapes = collections.Counter((r.status, r.code) for r in dead)
    fine = all((r.status == 504 and r.code == "upstream_timeout" and r.latency <= timeout + 1.0)
               or (r.status == 503 and r.code == "upstream_unavailable") for r in dead)
    fast = [r for r in dead if r.status == 503]
    check(fine, f"an upstream that stopped answering entirely: 504 at the timeout (tried even when "
                f"marked down) or 503 upstream_unavailable ({dict(shapes)}; the 503s in at most "
                f"{max((r.latency for r in fast), default=0) * 1000:.0f} ms)")
    other = [r for r in run.records if r.kind == "other"]
    slow = max((r.latency for r in other), default=0)
    check(len(other) >= 20 and all(r.ok for r in other),
          f"other routes kept answering meanwhile: {sum(r.ok for r in other)}/{len(other)} ok")
    check(slow < 1.0, f"and promptly (slowest {slow * 1000:.0f} ms < 1000 ms)")


async def news_metric(session, base, name):
    """The sum of metric `name` (over its labels) at one news service's /metrics."""
    async with session.get(f"{base}/metrics") as response:
        text = await response.text()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


async def probe_news_anonymous(args, run, stop):
    """Direct anonymous reads and /readyz at each news service every 100 ms."""
    timeout = aiohttp.ClientTimeout(total=args.client_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            calls = []
            for news in args.news:
                calls.append(call(session, run, "probe", "news", "GET",
                                  f"{news}/v1/news/articles?limit=5"))
                calls.append(call(session, run, "ready", "news", "GET", f"{news}/readyz"))
            await asyncio.gather(*calls)
            await asyncio.sleep(0.1)


async def scenario_db_replica(args):
    before, down_for, after = args.db_replica_before_secs, 10.0, args.db_replica_after_secs
    print(f"\n--- the PostgreSQL read replica killed for {down_for:.0f} s, {before:.0f} s into "
          f"{before + down_for + after:.0f} s of mixed traffic", flush=True)
    run = Run(args, "dbrepl")
    stop = asyncio.Event()
    times = {}

    async def fault():
        await asyncio.sleep(before)
        await run_shell(args.db_replica_kill)
        times["down"] = time.monotonic()
        print(f"  replica killed at t={run.at(times['down']):.1f} s", flush=True)
        await asyncio.sleep(down_for)
        await run_shell(args.db_replica_start)
        times["up"] = time.monotonic()
        print(f"  replica accepting connections again at t={run.at(times['up']):.1f} s", flush=True)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        fallbacks_before = [await news_metric(session, n, "news_db_read_fallback_total")
                            for n in args.news]
        prober = asyncio.create_task(probe_news_anonymous(args, run, stop))
        await asyncio.gather(traffic(run, before + down_for + after), fault())
        stop.set()
        await prober
        fallbacks = [await news_metric(session, n, "news_db_read_fallback_total") - b
                     for n, b in zip(args.news, fallbacks_before)]
        diverted = [await news_metric(session, n, "news_db_read_diverted") for n in args.news]
    summarize(run, [r for r in run.records if r.kind not in ("probe", "ready")])
    bad = [r for r in run.records if r.status >= 500 or r.status == 0]
    check(not bad, f"no 5xx and no unanswered request, through the gateway or direct ({len(bad)} seen: "
                   f"{collections.Counter((r.kind, r.status, r.code, r.error) for r in bad).most_common(3)})")
    check(all(r.ok for r in run.records),
          f"every request succeeded ({sum(not r.ok for r in run.records)} did not)")
    down, up = times["down"], times["up"]
    anonymous = [r for r in run.records if r.kind in ("articles_anon", "probe")
                 and r.t0 > down + 0.5 and r.t1 < up]
    check(len(anonymous) >= 20 and all(r.ok for r in anonymous),
          f"anonymous reads while the replica was down: {sum(r.ok for r in anonymous)}/"
          f"{len(anonymous)} ok")
    ready = [r for r in run.records if r.kind == "ready"]
    check(ready and all(r.status == 200 for r in ready),
          f"news /readyz stayed 200 throughout ({sum(r.status == 200 for r in ready)}/{len(ready)})")
    check(sum(fallbacks) > 0, f"the news services counted the fallback: db_read_fallback_total "
                              f"+{'/+'.join(f'{f:.0f}' for f in fallbacks)}")
    check(all(d == 0 for d in diverted),
          f"anonymous reads are back on the replica {after:.0f} s after it returned (cool-down "
          f"{args.db_replica_cooldown_secs:.0f} s; news_db_read_diverted {diverted})")
    verify_writes(run)


async def scenario_replica_kill(args):
    secs = args.kill_secs
    print(f"\n--- one news replica killed with SIGKILL {secs / 3:.0f} s into {secs:.0f} s of mixed traffic",
          flush=True)
    run = Run(args, "kill")
    times = {}

    async def fault():
        await asyncio.sleep(secs / 3)
        os.kill(args.kill_pid, signal.SIGKILL)
        times["kill"] = time.monotonic()
        print(f"  news replica (pid {args.kill_pid}) killed at t={run.at(times['kill']):.1f} s",
              flush=True)

    await asyncio.gather(traffic(run, secs), fault())
    summarize(run)
    kill = times["kill"]
    errors = [r for r in run.records if not r.ok]
    rate = len(errors) / max(len(run.records), 1)
    check(rate < 0.01, f"errors {len(errors)}/{len(run.records)} = {rate:.3%} < 1% "
                       f"({collections.Counter((r.status, r.code, r.error) for r in errors).most_common(3)})")
    news_after = [r for r in run.records if r.target == "news" and r.t0 > kill + 0.5]
    check(len(news_after) >= 50 and sum(r.ok for r in news_after) / len(news_after) > 0.99,
          f"news traffic continued on the other replica: {sum(r.ok for r in news_after)}/"
          f"{len(news_after)} ok after the kill")
    check(not pid_alive(args.kill_pid) or is_zombie(args.kill_pid), "the killed replica is gone")
    verify_writes(run)


def is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


# --- the upstream that never answers -----------------------------------------------------------

async def blackhole(port):
    """Answers `GET /readyz` until SIGUSR1, never anything else: connections are accepted, the
    request is read, and no byte is ever written back."""
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stopped.set)

    async def accept(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
                if path == b"/readyz" and not stopped.is_set():
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                                 b"content-length: 2\r\n\r\nok")
                    await writer.drain()
                    continue
                await asyncio.Event().wait()  # hold the connection, answer nothing
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", port)
    # Held connections would make a graceful exit noisy: leave at once.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: os._exit(0))
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    hole = sub.add_parser("blackhole")
    hole.add_argument("--port", type=int, required=True)
    run = sub.add_parser("run")
    run.add_argument("--scenarios",
                     default="mixed,pg-outage,blackhole,db-replica,overload,replica-kill")
    run.add_argument("--gateway", required=True)
    run.add_argument("--gateway2", required=True)
    run.add_argument("--lingo", required=True)
    run.add_argument("--news", required=True, type=lambda s: s.split(","))
    run.add_argument("--secret", default=os.environ.get("AUTH_HS256_SECRET"))
    run.add_argument("--issuer", default=os.environ.get("AUTH_ISSUER", "lingo-news-dev"))
    run.add_argument("--audience", default=os.environ.get("AUTH_AUDIENCE", "lingo-news"))
    run.add_argument("--psql", default="psql")
    run.add_argument("--db-url", required=True)
    run.add_argument("--articles", type=int, required=True)
    run.add_argument("--workers", type=int, default=16)
    run.add_argument("--client-timeout", type=float, default=20)
    run.add_argument("--mixed-secs", type=float, default=60)
    run.add_argument("--kill-secs", type=float, default=30)
    run.add_argument("--kill-pid", type=int)
    run.add_argument("--outage-before-secs", type=float, default=5)
    run.add_argument("--outage-after-secs", type=float, default=10)
    run.add_argument("--max-answer-secs", type=float, default=8)
    run.add_argument("--pg-stop")
    run.add_argument("--pg-start")
    run.add_argument("--db-replica-kill", help="shell command killing the read replica")
    run.add_argument("--db-replica-start", help="shell command starting it again")
    run.add_argument("--db-replica-before-secs", type=float, default=5)
    run.add_argument("--db-replica-after-secs", type=float, default=10)
    run.add_argument("--db-replica-cooldown-secs", type=float, default=3)
    run.add_argument("--alive-pids", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    run.add_argument("--upstream-timeout-ms", type=int, default=1000)
    run.add_argument("--hole-pid", type=int)
    run.add_argument("--probe-detect-secs", type=float, default=4,
                     help="probe interval + probe timeout of the second gateway")
    run.add_argument("--overload-news", help="a news instance with a small in-flight limit")
    run.add_argument("--overload-log", help="the overload instance's log (human format)")
    run.add_argument("--overload-in-flight", type=int, default=4,
                     help="that instance's NEWS_MAX_IN_FLIGHT")
    run.add_argument("--overload-secs", type=float, default=20)
    run.add_argument("--overload-calibrate-secs", type=float, default=3)
    run.add_argument("--overload-factor", type=float, default=4)
    run.add_argument("--overload-shed-p99-ms", type=float, default=500)
    run.add_argument("--overload-admitted-p99-ms", type=float, default=2000)
    run.add_argument("--run-id", default=uuid.uuid4().hex[:8])
    args = parser.parse_args()
    if args.command == "blackhole":
        asyncio.run(blackhole(args.port))
        return
    scenarios = {"mixed": scenario_mixed, "pg-outage": scenario_pg_outage,
                 "blackhole": scenario_blackhole, "db-replica": scenario_db_replica,
                 "overload": scenario_overload, "replica-kill": scenario_replica_kill}
    for name in args.scenarios.split(","):
        asyncio.run(scenarios[name](args))
    print()
    if FAILURES:
        print(f"FAILED: {len(FAILURES)} propert{'y' if len(FAILURES) == 1 else 'ies'}:")
        for what in FAILURES:
            print(f"  - {what}")
        sys.exit(1)
    print("all load and fault properties hold")


if __name__ == "__main__":
    main()
