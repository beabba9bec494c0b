#!/usr/bin/env python3
"""Concurrency, cancellation and idempotency check of news's writes (docs/news.md), run by
news-conc-check.sh against two replicas of news-service sharing one database.

1. Engagement: `--users` readers like/unlike, bookmark/unbookmark and follow/unfollow the same few
   targets (3 hot articles, 2 journalists, 2 organisations) at once, split across the replicas,
   some requests dropped (the connection reset right after sending, or after a short client
   deadline). Every 200 must answer the requested state, and a count that some order of the
   committed requests gives: for each answer, the other readers' edges that were on at some
   instant of the request's life bound it from above, those on during all of it from below
   (a request with no clear outcome, dropped or 503, may commit any time up to the service's
   deadline after it was sent). Afterwards every reader's edge must be a state its requests
   allow, and every count (`like_count`, `bookmark_count`, `follower_count` on the article, the
   article list, the journalist and organisation lists, /me/bookmarks, /me/following, /me/feed),
   every `viewer` flag and the lists /me/bookmarks, /me/following and /me/feed must equal the
   rows (read as the admin), and `news-service recount` must report `total drift fixed: 0`.
2. Keyed comments (`Idempotency-Key`), at the same time: the same key and body posted at once on
   both replicas (exactly one comment; every answer 201 with that comment, replayed, or 409
   `idempotency_key_in_use`), the same key with two bodies at once (one comment; the other 422
   `idempotency_key_reused` or 409), bursts of different keys of one caller whose old keys were
   expired with SQL (the sweep-versus-post deadlock class), dropped keyed posts (retried with
   their key afterwards: 201, never 409 once nothing runs), and replies posted concurrently to
   a growing thread (afterwards: thread order, `depth`, and the same list by cursor and by offset).
3. Cancellation: after the load, no connection of the service sits `idle in transaction`, no
   advisory lock is held, and no key stays "in use"; during it, no answer is a 500 and every 503
   is `overloaded` or `timeout` (a dropped request must never make a later one fail).
Prints every disagreement; exit 1 if any.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from checks import all_pages, call, count, counts, drop, get_ok, problem, problems, token

# Guards what the worker threads record: engagement operations and dropped comment keys.
lock = threading.Lock()


class Sql:
    def __init__(self, psql, url):
        self.psql, self.url = psql, url

    # The service's tables are in schema `news`; the admin's queries name them unqualified.
    ENV = dict(os.environ, PGOPTIONS="-c search_path=news")

    def rows(self, query):
        out = subprocess.run([self.psql, "-X", "-q", "-tA", "-F", "\t", "-v", "ON_ERROR_STOP=1", self.url, "-c", query],
                             check=True, capture_output=True, text=True, env=self.ENV).stdout
        return [line.split("\t") for line in out.splitlines() if line]

    def run(self, query):
        subprocess.run([self.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", self.url, "-c", query],
                       check=True, capture_output=True, text=True, env=self.ENV)


# --- 1. engagement ---------------------------------------------------------------------------------

# edge name -> (path template, answer's flag field, answer's count field, table, target column)
EDGES = {
    "like": ("/articles/{}/like", "liked", "like_count", "likes", "article_id"),
    "bookmark": ("/articles/{}/bookmark", "bookmarked", "bookmark_count", "bookmarks", "article_id"),
    "follow_j": ("/journalists/{}/follow", "following", "follower_count", "journalist_follows", "journalist_id"),
    "follow_o": ("/organizations/{}/follow", "following", "follower_count", "organization_follows", "organization_id"),
}


class Op:
    """One engagement request of one reader: `on`, sent at `start`, over by `end` (a clear
    200), or of unknown outcome that may commit until `end` (dropped, 503)."""

    def __init__(self, user, on, start, end, certain):
        self.user, self.on, self.start, self.end, self.certain = user, on, start, end, certain


def possible(ops, t):
    """The states a reader's edge may have at time t, given all its requests `ops`: an op whose
    commit may lie before t counts unless a certain op certainly committed after it and before t."""
    states = set()
    certain_done = [o for o in ops if o.certain and o.end <= t]
    if not any(True for _ in certain_done):
        states.add(False)
    for o in ops:
        if o.start > t:
            continue
        if any(c.start >= o.end and c.end <= t for c in certain_done):
            continue
        states.add(o.on)
    return states


def bounds(ops_by_user, me, s, e):
    """(certainly on during all of [s, e], possibly on at some instant of it) over other readers."""
    low = high = 0
    for user, ops in ops_by_user.items():
        if user == me:
            continue
        points = [s] + [p for o in ops for p in (o.start, o.end) if s < p < e] + [e]
        states = [possible(ops, t) for t in points]
        # Between points the set can only be what it is just after the previous point.
        if all(st == {True} for st in states):
            low += 1
        if any(True in st for st in states):
            high += 1
    return low, high


def engagement(args, urls, tokens, targets, deadline_s, stop_at):
    """Readers' threads hammering the targets; returns (ops per (edge, target, user), answers)."""
    ops = {}
    answers = []
    rng_seed = args.seed

    def reader(user, index):
        rng = random.Random(f"{rng_seed}-{user}-{index}")
        tok = tokens[user]
        while time.monotonic() < stop_at:
            edge = rng.choice(list(EDGES))
            target = rng.choice(targets[edge])
            on = rng.random() < 0.55
            path = EDGES[edge][0].format(target)
            url = rng.choice(urls)
            method = "POST" if on else "DELETE"
            start = time.monotonic()
            if rng.random() < args.drop:
                drop(url, method, path, tok, delay=rng.choice([0, 0, 0.001, 0.005, 0.02, 0.08]))
                count("engagement dropped")
                op = Op(user, on, start, time.monotonic() + deadline_s + 1.0, False)
            else:
                status, _, body = call(url, method, path, tok)
                end = time.monotonic()
                count(f"engagement {status}")
                if status == 200:
                    flag, cnt = EDGES[edge][1], EDGES[edge][2]
                    if body.get(flag) is not on or body.get(EDGES[edge][4]) != target:
                        problem(f"{method} {path} by {user}: {body}")
                    answers.append((edge, target, user, on, start, end, body.get(cnt)))
                    op = Op(user, on, start, end, True)
                elif status == 503:
                    op = Op(user, on, start, end + deadline_s + 1.0, False)
                else:
                    problem(f"{method} {path} by {user}: {status} {body}")
                    continue
            with lock:
                ops.setdefault((edge, target), {}).setdefault(user, []).append(op)

    with ThreadPoolExecutor(args.threads) as pool:
        futures = [pool.submit(reader, user, i) for user in tokens for i in range(args.per_user)]
        for f in futures:
            f.result()
    return ops, answers


def check_answers(ops, answers):
    checked = 0
    for edge, target, user, on, s, e, cnt in answers:
        low, high = bounds(ops[(edge, target)], user, s, e)
        own = 1 if on else 0
        if not isinstance(cnt, int) or not (low + own <= cnt <= high + own):
            problem(f"{edge} {target} by {user} ({'on' if on else 'off'}) answered count {cnt}; "
                    f"the committed requests allow {low + own}..={high + own}")
        checked += 1
    return checked


def check_final(args, urls, tokens, targets, ops, sql):
    """Rows versus every reader's requests, every endpoint showing a count, viewer flags, lists."""
    rows = {}
    for edge, (_, _, _, table, col) in EDGES.items():
        for target, user in sql.rows(f"SELECT {col}, user_id FROM {table}"):
            rows.setdefault((edge, target), set()).add(user)
    end = time.monotonic() + 1e9
    for (edge, target), by_user in ops.items():
        for user, user_ops in by_user.items():
            state = user in rows.get((edge, target), set())
            if state not in possible(user_ops, end):
                problem(f"{edge} {target}: {user}'s edge is {state}, its requests allow {possible(user_ops, end)}")
    want = {key: len(users) for key, users in rows.items()}

    def expect(what, got, key):
        if got != want.get(key, 0):
            problem(f"{what}: {got}, the rows count {want.get(key, 0)}")

    url = urls[0]
    anon_art = {a: get_ok(url, f"/articles/{a}") for a in targets["like"]}
    for a, art in anon_art.items():
        expect(f"GET /articles/{a} like_count", art["like_count"], ("like", a))
        expect(f"GET /articles/{a} bookmark_count", art["bookmark_count"], ("bookmark", a))
    listed = all_pages(url, "/articles")
    for art in listed:
        if art["id"] in anon_art:
            expect(f"GET /articles (list) {art['id']} like_count", art["like_count"], ("like", art["id"]))
            expect(f"GET /articles (list) {art['id']} bookmark_count", art["bookmark_count"], ("bookmark", art["id"]))
    for org in all_pages(url, "/organizations"):
        expect(f"GET /organizations {org['id']} follower_count", org["follower_count"], ("follow_o", org["id"]))
    for j in all_pages(url, "/journalists"):
        expect(f"GET /journalists {j['id']} follower_count", j["follower_count"], ("follow_j", j["id"]))
    article_by = {a: (j, o) for a, j, o in sql.rows("SELECT id, journalist_id, organization_id FROM articles")}
    checked = 0
    for user, tok in tokens.items():
        u_url = urls[hash(user) % len(urls)]
        for a in targets["like"]:
            art = get_ok(u_url, f"/articles/{a}", tok)
            v = art["viewer"]
            j, o = article_by[a]
            for flag, key in (("liked", ("like", a)), ("bookmarked", ("bookmark", a)),
                              ("following_journalist", ("follow_j", j)), ("following_organization", ("follow_o", o))):
                if v[flag] != (user in rows.get(key, set())):
                    problem(f"{user}: GET /articles/{a} viewer.{flag} {v[flag]}, rows say otherwise")
            expect(f"GET /articles/{a} (as {user}) like_count", art["like_count"], ("like", a))
        marks = all_pages(u_url, "/me/bookmarks", tok, limit=7)
        mine = {a for (edge, a), users in rows.items() if edge == "bookmark" and user in users}
        if sorted(m["id"] for m in marks) != sorted(mine):
            problem(f"{user}: /me/bookmarks {[m['id'] for m in marks]}, rows {sorted(mine)}")
        for m in marks:
            expect(f"{user} /me/bookmarks {m['id']} bookmark_count", m["bookmark_count"], ("bookmark", m["id"]))
            if not m["viewer"]["bookmarked"]:
                problem(f"{user}: /me/bookmarks {m['id']} viewer.bookmarked false")
        following = get_ok(u_url, "/me/following", tok)
        fj = {j for (edge, j), users in rows.items() if edge == "follow_j" and user in users}
        fo = {o for (edge, o), users in rows.items() if edge == "follow_o" and user in users}
        if {j["id"] for j in following["journalists"]} != fj or {o["id"] for o in following["organizations"]} != fo:
            problem(f"{user}: /me/following {following}, rows {fj} {fo}")
        for j in following["journalists"]:
            expect(f"{user} /me/following {j['id']} follower_count", j["follower_count"], ("follow_j", j["id"]))
        for o in following["organizations"]:
            expect(f"{user} /me/following {o['id']} follower_count", o["follower_count"], ("follow_o", o["id"]))
        feed = all_pages(u_url, "/me/feed", tok, limit=9)
        expected_feed = {a for a, (j, o) in article_by.items() if j in fj or o in fo}
        ids = [f["id"] for f in feed]
        if len(ids) != len(set(ids)) or set(ids) != expected_feed:
            problem(f"{user}: /me/feed has {len(ids)} items ({len(set(ids))} distinct), rows give {len(expected_feed)}")
        for f in feed:
            if f["id"] in anon_art:
                expect(f"{user} /me/feed {f['id']} like_count", f["like_count"], ("like", f["id"]))
        checked += 1
    # The journalists' viewer flags, by organisation.
    some_user, some_tok = next(iter(tokens.items()))
    for o in targets["follow_o"]:
        for j in all_pages(url, f"/journalists?organization_id={o}", some_tok):
            if j["viewer"]["following"] != (some_user in rows.get(("follow_j", j["id"]), set())):
                problem(f"{some_user}: /journalists viewer.following of {j['id']} disagrees with the rows")
    return checked


# --- 2. comments -----------------------------------------------------------------------------------

def comments(args, urls, tokens, article, sql, stop_at, deadline_s):
    """Keyed posts racing, and a thread growing by concurrent replies; returns the thread's ids."""
    rng = random.Random(f"{args.seed}-comments")
    users = list(tokens)
    tokens = dict(tokens)
    thread = []  # ids of the comments of `article` (with their depth) that answered 201
    thread_lock = threading.Lock()
    pending_keys = []  # (user, key, body) of dropped keyed posts, retried at the end

    def post(url, user, body, key=None):
        return call(url, "POST", "/comments", tokens[user], body, key)

    def same_key_same_body(n):
        user = rng.choice(users)
        key = f"same-{n}-{rng.randint(0, 1 << 30)}"
        body = {"article_id": article, "text": f"same body {key}", "parent_id": None}
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda u: post(u, user, body, key), urls * 2))
        created = [r for r in results if r[0] == 201]
        fresh = [r for r in created if r[1].get("idempotency-replayed") != "true"]
        if len(fresh) > 1 or len({json.dumps(r[2], sort_keys=True) for r in created}) > 1:
            problem(f"same key {key}, same body: {[(r[0], r[2]) for r in results]}")
        for status, _, payload in results:
            if status not in (201, 409, 503) or (status == 409 and payload.get("code") != "idempotency_key_in_use"):
                problem(f"same key {key}, same body: answered {status} {payload}")
        n_rows = int(sql.rows(f"SELECT count(*) FROM comments WHERE text = 'same body {key}'")[0][0])
        if n_rows > 1 or (created and n_rows != 1):
            problem(f"same key {key}: {n_rows} comments, answers {[r[0] for r in results]}")
        count("comments same-key-same-body races")

    def same_key_other_body(n):
        user = rng.choice(users)
        key = f"other-{n}-{rng.randint(0, 1 << 30)}"
        bodies = [{"article_id": article, "text": f"body {i} {key}"} for i in range(2)]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda i: post(urls[i], user, bodies[i], key), range(2)))
        ok = [i for i, r in enumerate(results) if r[0] == 201]
        for i, (status, _, payload) in enumerate(results):
            if status == 201 or status == 503:
                continue
            if status == 409 and payload.get("code") == "idempotency_key_in_use":
                continue
            if status == 422 and payload.get("code") == "idempotency_key_reused":
                continue
            problem(f"same key {key}, two bodies: answered {status} {payload}")
        if len(ok) > 1:
            problem(f"same key {key} with two bodies: both created {[r[2] for r in results]}")
        n_rows = int(sql.rows(f"SELECT count(*) FROM comments WHERE text LIKE 'body _ {key}'")[0][0])
        if n_rows > 1:
            problem(f"same key {key} with two bodies: {n_rows} comments")
        # A later repeat of the other body is 422 once the first is stored.
        if ok:
            status, _, payload = post(urls[0], user, bodies[1 - ok[0]], key)
            if status != 503 and (status != 422 or payload.get("code") != "idempotency_key_reused"):
                problem(f"key {key} reused with another body answered {status} {payload}")
        count("comments same-key-two-bodies races")

    def expired_burst(n):
        # Callers of their own: expiring a caller's keys would let its other keyed posts in.
        user = f"burster-{args.seed}-{n % 4}"
        tokens.setdefault(user, token(args.secret, user))
        sql.run(f"UPDATE idempotency_keys SET expires_at = now() - interval '1 hour' WHERE caller_id = '{user}'")
        keys = [f"burst-{n}-{i}-{rng.randint(0, 1 << 30)}" for i in range(4)]
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(
                lambda i: post(urls[i % 2], user, {"article_id": article, "text": f"burst {keys[i]}"}, keys[i]),
                range(4)))
        for (status, _, payload), key in zip(results, keys):
            count(f"comments burst {status}")
            if status not in (201, 503):
                problem(f"burst of different keys, expired old keys: {key} answered {status} {payload}")
        count("comments expired-key bursts")

    def dropped_keyed(n):
        user = rng.choice(users)
        key = f"drop-{n}-{rng.randint(0, 1 << 30)}"
        body = {"article_id": article, "text": f"dropped {key}"}
        drop(rng.choice(urls), "POST", "/comments", tokens[user], body, key, delay=rng.choice([0, 0.002, 0.01, 0.05]))
        with lock:
            pending_keys.append((user, key, body))
        count("comments dropped keyed")

    def reply(n):
        user = rng.choice(users)
        with thread_lock:
            parents = [c for c in thread if c[1] < 10]
        parent = rng.choice(parents)[0] if parents and rng.random() < 0.8 else None
        body = {"article_id": article, "text": f"reply {n}", "parent_id": parent}
        status, _, payload = post(rng.choice(urls), user, body)
        if status == 201:
            with thread_lock:
                thread.append((payload["id"], payload["depth"]))
        elif status != 503:
            problem(f"reply {body}: {status} {payload}")
        count("comments replies")

    kinds = [same_key_same_body, same_key_other_body, expired_burst, dropped_keyed, reply, reply, reply]
    n = 0
    with ThreadPoolExecutor(6) as pool:
        futures = []
        while time.monotonic() < stop_at:
            futures = [f for f in futures if not f.done()]
            if len(futures) < 6:
                futures.append(pool.submit(rng.choice(kinds), n))
                n += 1
            else:
                time.sleep(0.005)
        for f in futures:
            f.result()
    return pending_keys


def check_thread(urls, article, sql):
    rows = sql.rows(f"SELECT id, coalesce(parent_id::text, ''), depth FROM comments WHERE article_id = '{article}'")
    children = {}
    depth = {}
    for cid, parent, d in rows:
        children.setdefault(parent, []).append(cid)
        depth[cid] = int(d)
    order = []

    def walk(parent, d):
        for cid in sorted(children.get(parent, [])):  # UUIDv7: id order is creation order
            if depth[cid] != d:
                problem(f"comment {cid} has depth {depth[cid]}, its place in the thread says {d}")
            order.append(cid)
            walk(cid, d + 1)

    walk("", 0)
    by_cursor = [c["id"] for c in all_pages(urls[0], f"/articles/{article}/comments", limit=7)]
    by_offset = []
    offset = 0
    while True:
        page = get_ok(urls[1], f"/articles/{article}/comments?limit=13&offset={offset}")
        by_offset += [c["id"] for c in page["data"]]
        if page["next_offset"] is None:
            break
        offset = page["next_offset"]
    if by_cursor != order:
        problem(f"thread by cursor ({len(by_cursor)}) is not thread order ({len(order)})")
    if by_offset != by_cursor:
        problem(f"thread by offset ({len(by_offset)}) differs from by cursor ({len(by_cursor)})")
    return len(order)


# --- 3. cancellation leftovers ----------------------------------------------------------------------

# A transaction of the service's idle this long (between two statements of a request) has lost
# its request: every request's transactions are a few short statements back to back.
STUCK_IDLE = "interval '1 second'"


def idle_in_transaction(sql):
    return sql.rows("SELECT pid, now() - state_change, left(query, 80) FROM pg_stat_activity "
                    "WHERE usename = 'news_app' AND state LIKE 'idle in transaction%' "
                    f"AND now() - state_change > {STUCK_IDLE}")


def sample_connections(sql, stop_at):
    """While the load runs: connections of the service stuck idle in a transaction."""
    samples = 0
    while time.monotonic() < stop_at:
        stuck = idle_in_transaction(sql)
        samples += 1
        if stuck:
            problem(f"connections idle in transaction for over 1 s during the load: {stuck}")
        time.sleep(0.25)
    count("pg_stat_activity samples", samples)


# --- ----------------------------------------------------------------------

def check_leftovers(sql):
    """A second after the load: nothing idle in a transaction, no advisory lock held by a
    connection that is not running a statement (a running one is a request still in flight)."""
    idle = idle_in_transaction(sql)
    if idle:
        problem(f"connections idle in transaction after the load: {idle}")
    advisory = sql.rows("SELECT l.pid, l.objid, a.state FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                        "WHERE l.locktype = 'advisory' AND a.state <> 'active'")
    if advisory:
        problem(f"advisory locks held after the load: {advisory}")


def retry_dropped_keys(sql, urls, tokens, pending_keys):
    """Once every dropped request is past its deadline: no key is still "in use"."""
    for user, key, body in pending_keys:
        status, hdrs, payload = call(urls[0], "POST", "/comments", tokens[user], body, key)
        count(f"dropped keyed retried {status}" + (" replayed" if hdrs.get("idempotency-replayed") == "true" else ""))
        if status != 201:
            problem(f"dropped keyed post {key} retried with its key after the load: {status} {payload}")
        n_rows = int(sql.rows(f"SELECT count(*) FROM comments WHERE text = 'dropped {key}'")[0][0])
        if n_rows != 1:
            problem(f"dropped keyed post {key}: {n_rows} comments after its retry")
    return len(pending_keys)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret", required=True)
    ap.add_argument("--urls", required=True)
    ap.add_argument("--admin-url", required=True)
    ap.add_argument("--psql", default="psql")
    ap.add_argument("--recount", required=True, help="the recount command")
    ap.add_argument("--users", type=int, default=24)
    ap.add_argument("--per-user", type=int, default=2, help="threads per reader")
    ap.add_argument("--threads", type=int, default=48)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--drop", type=float, default=0.15, help="share of engagement requests dropped")
    ap.add_argument("--deadline-ms", type=int, default=None, help="the services' NEWS_REQUEST_TIMEOUT_MS")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    deadline_ms = args.deadline_ms or int(os.environ.get("NEWS_REQUEST_TIMEOUT_MS", "5000"))
    deadline_s = deadline_ms / 1000
    urls = args.urls.split(",")
    sql = Sql(args.psql, args.admin_url)
    tokens = {f"reader-{args.seed}-{i:03}": token(args.secret, f"reader-{args.seed}-{i:03}") for i in range(args.users)}
    newest = [r[0] for r in sql.rows("SELECT id FROM articles ORDER BY published_at DESC, id DESC LIMIT 3")]
    targets = {"like": newest, "bookmark": newest, "follow_j": ["jrn-0001", "jrn-0002"], "follow_o": ["org-001", "org-002"]}
    thread_article = sql.rows("SELECT id FROM articles ORDER BY id LIMIT 1")[0][0]
    print(f"deadline {deadline_ms} ms, {args.users} readers x {args.per_user} threads, {args.seconds} s", flush=True)

    stop_at = time.monotonic() + args.seconds
    comment_result = {}
    commenter = threading.Thread(target=lambda: comment_result.setdefault(
        "pending", comments(args, urls, tokens, thread_article, sql, stop_at, deadline_s)))
    commenter.start()
    sampler = threading.Thread(target=sample_connections, args=(sql, stop_at))
    sampler.start()
    ops, answers = engagement(args, urls, tokens, targets, deadline_s, stop_at)
    commenter.join()
    sampler.join()
    pending = comment_result.get("pending", [])
    # Leftovers first (a second after the load, before the server's idle_in_transaction timeout
    # could hide them), then the checks of state, once requests of unknown outcome are past
    # their deadline.
    time.sleep(1.2)
    check_leftovers(sql)
    time.sleep(deadline_s + 1.5)
    n_leftovers = retry_dropped_keys(sql, urls, tokens, pending)

    n_answers = check_answers(ops, answers)
    n_readers = check_final(args, urls, tokens, targets, ops, sql)
    n_thread = check_thread(urls, thread_article, sql)
    recount = subprocess.run(args.recount.split(), capture_output=True, text=True)
    if "total drift fixed: 0" not in recount.stdout + recount.stderr:
        problem(f"recount: {recount.stdout.strip()} {recount.stderr.strip()[-300:]}")

    print(f"checked {n_answers} engagement answers against the committed requests, {n_readers} readers' "
          f"counts, flags and lists, a thread of {n_thread} comments, {n_leftovers} dropped keyed posts retried")
    for name in sorted(counts):
        print(f"  {name}: {counts[name]}")
    print(f"{len(problems)} disagreement(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
