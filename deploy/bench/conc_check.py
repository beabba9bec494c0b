#!/usr/bin/env python3
"""Concurrency and arrival-order check of lingo's learning writes (docs/lingo.md, "Phrase
progress"), run by conc-check.sh.

For many learners it generates random histories (two languages of 6 phrases, answers with every
grade and with the grade left out, repeats within a session, `studied_at` from 30 days ago to now,
some sessions at exactly the same instant, some without answers) and posts them concurrently
(`--inflight` requests at once, the sessions of `--batch` learners shuffled together, split across
the replicas), each session in one of these ways:
  plain      no Idempotency-Key;
  key        with a key;
  race       with a key, twice at once on two replicas: one answer is the session, the other its
             replay or 409 `idempotency_key_in_use`;
  drop       no key, the connection closed right after the request (or in the middle of its body):
             the session then exists once or not at all;
  drop_retry with a key, dropped, then posted again with the key until it answers 201.
Two special kinds of learners: `same` (24 sessions at one instant touching one phrase) and
`late` (a history posted in order, then a 10-days-late session racing an in-order one on one
phrase). With `--aged N` (needs `--db-url`), N more learners first get 6-12 sessions 35-60 days old
written directly in the database as its admin (older than the API takes: sessions, review log, the
reference's states and the totals, as the service would hold them), then a random history posted
with the others: in-order and late sessions on phrases answered before 31 days ago, so the service
cuts checkpoints (docs/lingo.md, "Checkpoints"); their fresh in-order learner gets the same aged
part the same way. While the writes run, a reader polls `/me/reviews` and `/me/phrases` of the learners
being written (every answer 200, every phrase state one that some set of the committed sessions
gives: a sample of `--racing-states` of the distinct states read) and two exporters copy `/analytics/phrase-progress` and `/analytics/progress`
incrementally by `updated_since`.

Afterwards, for every learner: its sessions (`/me/study-sessions`, all pages by cursor: each once,
the dropped ones at most once), then `/me/phrases` (all pages), `/me/reviews`, `/me/progress` and
`/me/xp`, compared (a) with the same committed sessions posted one at a time in time order to a
fresh learner (equal answers) and (b) with the Python `fsrs` reference and the contract's
arithmetic (XP, levels, streaks, counters), and each 201's running `total_xp`. The exports
(taken during the writes, plus one run after them) must hold every row's final value. With
`--db-url`, PostgreSQL itself (read as its admin): every session answered 201 has its row and none
has two, the review log holds each committed session's answers once, every checkpoint is the
reference's state before its cut (with `--aged`, the aged learners must have some: none is a
disagreement), every stored key's 201 names a session on record, the `learners`
rows add up, and `phrase_due_days` equals the counts recomputed from `phrase_states`. Prints every
disagreement; exit 1 if any.

With `--crash FOLDER` (conc-check.sh --crash), replicas and PostgreSQL crash during the writes: no
answer (refused, reset, timed out) or a 5xx means "outcome unknown": a keyed session is posted again
with its key until it answers 201 (for `--retry-secs`, else its key is stuck), a session without a
key must exist at most once (like `drop`), reads and exports retry, and 503 `database_unavailable`
is allowed. When the writes are over it says so in FOLDER (`writes-done`) and waits for
conc-check.sh to end its crashes (`crashes-done`) before the comparisons. The batches' sessions
are then posted in waves of `--inflight` at an even pace over `--spread-secs` (30), not all at
once: 500 sessions take 4 s in debug, too short for the crashes to come.
"""

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

from fsrs import Card, Rating, Scheduler

import checks
from checks import NO_ANSWER, all_pages, call, count, counts, drop, get_ok, problem, problems, token, try_call

SCHEDULER = Scheduler(learning_steps=(), relearning_steps=(), enable_fuzzing=False)
GRADES = {"again": 1, "hard": 2, "good": 3, "easy": 4}
PHRASES = {lang: [f"cc-{lang}-{i}" for i in range(1, 7)] for lang in ("es", "fr", "de")}
LEVELS = [0, 60, 120, 200, 300, 450, 750, 1125, 1650, 2250, 3000, 3900, 4900, 6000, 7500, 9000,
          10500, 12000, 13500, 15000, 17000, 19000, 22500, 26000, 30000]
# --- histories -------------------------------------------------------------------------------------

def rfc3339(at):
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def second(at):
    return at.replace(microsecond=0)


def make_answers(rng, lang, k):
    answers = []
    for _ in range(k):
        grade = rng.choice(["again", "hard", "good", "easy", None])
        phrase = rng.choice(PHRASES[lang][:4] if rng.random() < 0.6 else PHRASES[lang])
        answer = {"phrase_id": phrase, "correct": grade != "again" if grade else rng.random() < 0.6}
        if grade:
            answer["grade"] = grade
        answers.append(answer)
    return answers


class Session:
    def __init__(self, learner, index, lang, at, answers, rng, mode):
        self.learner, self.lang, self.at, self.answers, self.mode = learner, lang, at, answers, mode
        self.duration = 1000 * index + rng.randint(1, 999)  # unique per learner: finds it again
        if answers is None:
            seen = rng.randint(0, 12)
            self.seen, self.correct = seen, rng.randint(0, seen)
        else:
            self.seen, self.correct = len(answers), sum(a["correct"] for a in answers)
        self.key = f"k-{learner}-{index}-{rng.randint(0, 1 << 30)}"
        self.id = None  # from a 201 or from the list of sessions
        self.known = False  # a 201 said it was written
        self.created = None  # the body of that 201

    def body(self):
        body = {"duration_seconds": self.duration, "phrases_seen": self.seen,
                "phrases_correct": self.correct, "language_code": self.lang, "studied_at": rfc3339(self.at)}
        if self.answers is not None:
            body["answers"] = self.answers
        return body

    def xp(self):
        if self.seen == 0:
            return 0
        return 10 + self.correct + (5 if self.seen >= 5 and self.correct == self.seen else 0)


MODES = ["plain"] * 4 + ["key"] * 2 + ["race"] * 2 + ["drop", "drop_retry"]


def random_history(rng, learner, now):
    n = rng.randint(10, 26)
    sessions = []
    for i in range(n):
        if sessions and rng.random() < 0.15:
            at = rng.choice(sessions).at  # exactly the same instant as another session
        else:
            at = now - timedelta(days=29.5) * rng.random() - timedelta(seconds=5)
            if rng.random() < 0.03:
                at = now + timedelta(seconds=rng.uniform(0, 30))  # the contract allows 60 s ahead
            if rng.random() < 0.5:
                at = second(at)
        lang = rng.choice(["es", "es", "fr", "fr", "de"])
        answers = None if rng.random() < 0.15 else make_answers(rng, lang, rng.randint(1, 8))
        sessions.append(Session(learner, i, lang, at, answers, rng, rng.choice(MODES)))
    return sessions


def aged_history(rng, learner, now):
    """A history 35-60 days old (`--aged`), older than the API takes: written in the database
    (`write_aged`), each session at its own whole second (no ties to order)."""
    instants = sorted({second(now - timedelta(days=35) - timedelta(days=25) * rng.random()) for _ in range(rng.randint(6, 12))})
    sessions = []
    for i, at in enumerate(instants):
        lang = rng.choice(["es", "es", "fr", "fr", "de"])
        # Indices from 40: durations apart from the recent history's (random_history, < 27).
        sessions.append(Session(learner, 40 + i, lang, at, make_answers(rng, lang, rng.randint(1, 8)), rng, "aged"))
    return sessions


def aged_sql(learner, sessions):
    """SQL writing `sessions` (aged, all with answers) for `learner` as the service would have
    after them: sessions, review-log rows, states (the reference's), the learner's totals (as
    deploy/bench/phrase-progress.sh's copy_histories). Returns it and the sessions' new ids."""
    ids = [str(uuid.uuid4()) for _ in sessions]
    rows = []
    for sid, s in zip(ids, sessions):
        pids, ratings = answer_key(s)
        rows.append({"id": sid, "lang": s.lang, "duration": s.duration, "seen": s.seen, "correct": s.correct,
                     "xp": s.xp(), "at": rfc3339(s.at), "phrase_ids": pids, "grades": ratings})
    states = []
    for pid, st in reference_states(sessions).items():
        card = st["card"]
        states.append({"phrase_id": pid, "lang": st["lang"], "stability": min(card.stability, 36500),
                       "difficulty": card.difficulty, "due_at": rfc3339(second(card.due)), "reviews": st["reviews"],
                       "correct": st["correct"], "lapses": st["lapses"], "first": rfc3339(st["first"]),
                       "last": rfc3339(st["last"]), "grade": GRADES[st["grade"]]})
    doc = json.dumps({"learner": learner, "sessions": rows, "states": states})
    assert "$aged$" not in doc
    sql = f"""
BEGIN;
CREATE TEMP TABLE aged_doc ON COMMIT DROP AS SELECT $aged${doc}$aged$::jsonb AS d;
CREATE TEMP TABLE aged_sessions ON COMMIT DROP AS
  SELECT (d ->> 'learner') AS learner_id, s.*
  FROM aged_doc, jsonb_to_recordset(d -> 'sessions')
    AS s (id uuid, lang text, duration int, seen int, correct int, xp int, at timestamptz,
          phrase_ids text[], grades smallint[]);
INSERT INTO lingo.study_sessions (id, learner_id, language_code, duration_seconds, phrases_seen,
                                  phrases_correct, xp_awarded, created_at, studied_at, answer_count)
  SELECT id, learner_id, lang, duration, seen, correct, xp, at, at, cardinality(phrase_ids) FROM aged_sessions;
INSERT INTO lingo.phrase_review_sessions (learner_id, studied_at, session_id, phrase_ids, grades)
  SELECT learner_id, at, id, phrase_ids, grades FROM aged_sessions;
INSERT INTO lingo.phrase_states (learner_id, phrase_id, language_code, stability, difficulty, due_at,
                                 reviews, correct, lapses, first_reviewed_at, last_reviewed_at,
                                 last_grade, updated_at)
  SELECT d ->> 'learner', s.phrase_id, s.lang, s.stability, s.difficulty, s.due_at, s.reviews, s.correct,
         s.lapses, s.first, s.last, s.grade, s.last
  FROM aged_doc, jsonb_to_recordset(d -> 'states')
    AS s (phrase_id text, lang text, stability real, difficulty real, due_at timestamptz, reviews int,
          correct int, lapses int, first timestamptz, last timestamptz, grade smallint);
INSERT INTO lingo.learners (learner_id, total_xp, sessions, updated_at)
  SELECT learner_id, sum(xp), count(*), max(at) FROM aged_sessions GROUP BY learner_id;
INSERT INTO lingo.learner_language_totals (learner_id, language_code, sessions, total_duration_seconds,
                                           phrases_seen, phrases_correct, xp, first_studied_at,
                                           last_studied_at, updated_at, phrases_started)
  SELECT learner_id, lang, count(*), sum(duration), sum(seen), sum(correct), sum(xp), min(at), max(at),
         max(at), (SELECT count(*) FROM aged_doc, jsonb_array_elements(d -> 'states') e
                   WHERE e ->> 'lang' = a.lang)
  FROM aged_sessions a GROUP BY learner_id, lang;
COMMIT;
"""
    return sql, ids


def write_aged(db, learner, sessions):
    """Writes the aged sessions of `learner` in the database; returns their ids."""
    sql, ids = aged_sql(learner, sessions)
    db.execute(sql)
    return ids


def same_instant_history(rng, learner, now):
    at = now - timedelta(days=rng.uniform(0.1, 20))
    sessions = []
    for i in range(24):
        answers = make_answers(rng, "es", rng.randint(0, 4))
        answers.insert(rng.randint(0, len(answers)), {"phrase_id": "cc-es-1", "correct": True, "grade": rng.choice(["hard", "good", "easy"])})
        sessions.append(Session(learner, i, "es", at, answers, rng, rng.choice(["plain", "plain", "key", "race"])))
    return sessions


def heavy_history(rng, learner, now):
    """40 sessions of 50 to 150 answers on 6 phrases: posted at once, most arrive late."""
    sessions = []
    for i in range(40):
        at = now - timedelta(days=29.5) * rng.random() - timedelta(seconds=5)
        sessions.append(Session(learner, i, "es", at, make_answers(rng, "es", rng.randint(50, 150)), rng,
                                rng.choice(["plain", "key", "race"])))
    return sessions


def late_history(rng, learner, now):
    """Sessions posted first in order (`first`), then a late and an in-order one at once."""
    sessions = []
    for i in range(6):
        at = now - timedelta(days=25 - 3 * i, seconds=rng.randint(0, 40000))
        sessions.append(Session(learner, i, "es", at, make_answers(rng, "es", 3) + [{"phrase_id": "cc-es-2", "correct": True}], rng, "plain"))
    late = Session(learner, 6, "es", now - timedelta(days=10, seconds=rng.randint(0, 40000)),
                   [{"phrase_id": "cc-es-2", "correct": False}] + make_answers(rng, "es", 2), rng, "plain")
    current = Session(learner, 7, "es", now - timedelta(seconds=rng.randint(5, 600)),
                      [{"phrase_id": "cc-es-2", "correct": True, "grade": "easy"}], rng, "plain")
    return sessions, [late, current]


# --- posting ---------------------------------------------------------------------------------------

def unknown(status):
    """No answer, or a 5xx: the session may have been written or not."""
    return status is None or status >= 500


class Poster:
    def __init__(self, args):
        self.urls = args.urls.split(",")
        self.secret = args.secret
        self.retry_secs = args.retry_secs
        self.tokens = {}

    def tok(self, learner):
        if learner not in self.tokens:
            self.tokens[learner] = token(self.secret, learner)
        return self.tokens[learner]

    def post(self, s, url, key=None):
        return try_call(url, "POST", "/me/study-sessions", self.tok(s.learner), s.body(), key)

    def created(self, s, status, hdrs, body, what):
        if status != 201:
            problem(f"{s.learner} {what}: {status} {body}")
            return
        if s.id is not None and s.id != body["id"]:
            problem(f"{s.learner} {what}: a second session {body['id']} (first {s.id})")
        s.id, s.known = body["id"], True
        if hdrs.get("idempotency-replayed") != "true":
            s.created = body

    def run(self, s, rng):
        url = rng.choice(self.urls)
        count(f"mode {s.mode}")
        if s.mode == "plain":
            status, hdrs, body = self.post(s, url)
            if unknown(status):  # overloaded, timed out, cut off: written once or not at all
                s.mode = "unknown"
                return
            self.created(s, status, hdrs, body, "plain")
        elif s.mode == "key":
            status, hdrs, body = self.post(s, url, s.key)
            if unknown(status):  # overloaded, timed out, cut off: the key tells
                self.retry_with_key(s, rng)
            else:
                self.created(s, status, hdrs, body, "key")
        elif s.mode == "race":
            results = [None, None]

            def one(i):
                results[i] = self.post(s, self.urls[i % len(self.urls)], s.key)

            threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if any(unknown(r[0]) for r in results):
                count("race: a 5xx or no answer (then retried with the key)")
                self.retry_with_key(s, rng)
                return
            firsts = [r for r in results if r[0] == 201 and r[1].get("idempotency-replayed") != "true"]
            replays = [r for r in results if r[0] == 201 and r[1].get("idempotency-replayed") == "true"]
            busy = [r for r in results if r[0] == 409 and r[2].get("code") == "idempotency_key_in_use"]
            count(f"race firsts={len(firsts)} replays={len(replays)} in_use={len(busy)}")
            if len(firsts) != 1 or len(firsts) + len(replays) + len(busy) != 2:
                problem(f"{s.learner} race: answers {[(r[0], r[1].get('idempotency-replayed'), r[2]) for r in results]}")
            for r in replays:
                if firsts and r[2] != firsts[0][2]:
                    problem(f"{s.learner} race: replay {r[2]} differs from {firsts[0][2]}")
            if firsts:
                self.created(s, *firsts[0], "race")
        elif s.mode in ("drop", "drop_retry"):
            key = s.key if s.mode == "drop_retry" else None
            try:
                drop(url, "POST", "/me/study-sessions", self.tok(s.learner), s.body(), key,
                     delay=rng.choice([0, 0.001, 0.005, 0.02]), mid_body=rng.random() < 0.3)
            except NO_ANSWER:  # the replica is down: nothing sent, or part of it
                count("drop: no connection")
            if s.mode == "drop_retry":
                self.retry_with_key(s, rng)

    def retry_with_key(self, s, rng):
        """Posts `s` again with its key until it answers 201 (the first answer or its replay),
        for at most `--retry-secs`: a key that never gets there is stuck."""
        give_up = time.time() + self.retry_secs
        while time.time() < give_up:
            status, hdrs, body = self.post(s, rng.choice(self.urls), s.key)
            if status == 201:
                count(f"{s.mode} retried: replayed={hdrs.get('idempotency-replayed') == 'true'}")
                if hdrs.get("idempotency-replayed") == "true" and s.id is None:
                    s.id, s.known, s.created = body["id"], True, body  # its first answer was lost
                else:
                    self.created(s, status, hdrs, body, f"{s.mode} retried")
                return
            if not (status == 409 or unknown(status)):
                problem(f"{s.learner} {s.mode} retried: {status} {body}")
                return
            time.sleep(0.05)
        count("idempotency keys stuck")
        problem(f"{s.learner} {s.mode} (key {s.key}): still no 201 after {self.retry_secs} s of retries")


# --- the reference ---------------------------------------------------------------------------------

def unrounded_interval(stability):
    s = SCHEDULER
    return (stability / s._FACTOR) * ((s.desired_retention ** (1 / s._DECAY)) - 1)


def answer_key(session):
    """A session's answers as the service orders sessions of the very same `studied_at`: their
    phrase ids, then their grades (as ratings), so that arrival order never matters."""
    answers = session.answers or []
    ids = [a["phrase_id"] for a in answers]
    ratings = [GRADES[a.get("grade") or ("good" if a["correct"] else "again")] for a in answers]
    return ids, ratings


def ordered(sessions):
    """Committed sessions in the service's time order: `studied_at`, then their answers, then id."""
    return sorted(sessions, key=lambda s: (s.at, answer_key(s), s.id))


def reference_states(sessions):
    states = {}
    for s in ordered(sessions):
        for a in s.answers or []:
            grade = a.get("grade") or ("good" if a["correct"] else "again")
            st = states.get(a["phrase_id"])
            if st is None:
                st = states[a["phrase_id"]] = {"card": Card(), "reviews": 0, "correct": 0, "lapses": 0,
                                               "first": s.at, "lang": s.lang}
            elif grade == "again":
                st["lapses"] += 1
            st["card"], _ = SCHEDULER.review_card(st["card"], Rating(GRADES[grade]), review_datetime=s.at)
            st["reviews"] += 1
            st["correct"] += a["correct"]
            st["last"], st["grade"] = s.at, grade
    return states


def close(a, b, rel=1e-4):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


def check_state(where, got, ref):
    card = ref["card"]
    for field, want in [("reviews", ref["reviews"]), ("correct", ref["correct"]), ("lapses", ref["lapses"]),
                        ("last_grade", ref["grade"])]:
        if got[field] != want:
            problem(f"{where}: {field} {got[field]} != reference {want}")
    for field, want in [("first_reviewed_at", ref.get("first")), ("last_reviewed_at", ref["last"])]:
        if want is not None and field in got and parse(got[field]) != second(want):
            problem(f"{where}: {field} {got[field]} != reference {want}")
    if not close(got["stability_days"], min(card.stability, 36500)):
        problem(f"{where}: stability {got['stability_days']} != reference {card.stability}")
    if not close(got["difficulty"], card.difficulty):
        problem(f"{where}: difficulty {got['difficulty']} != reference {card.difficulty}")
    due, want = parse(got["due_at"]), second(card.due)
    if due != want:
        frac = unrounded_interval(card.stability) % 1
        if not (abs(frac - 0.5) < 0.01 and abs((due - want).total_seconds()) <= 86400):
            problem(f"{where}: due_at {got['due_at']} != reference {rfc3339(card.due)}")


def level(xp):
    return sum(1 for cut in LEVELS if xp >= cut)


def streaks(days, today):
    days = sorted(set(days))
    longest, run, prev = 0, 0, None
    for d in days:
        run = run + 1 if prev is not None and (d - prev).days == 1 else 1
        longest, prev = max(longest, run), d
    end = today if today in days else today - timedelta(days=1)
    current = 0
    while end in days:
        current, end = current + 1, end - timedelta(days=1)
    return current, longest


# --- reading and comparing -------------------------------------------------------------------------

def read_all(url, tok):
    t0 = datetime.now(timezone.utc)
    out = {
        "phrases": all_pages(url, "/me/phrases", tok),
        "reviews": get_ok(url, "/me/reviews?limit=100", tok),
        "progress": get_ok(url, "/me/progress", tok),
        "xp": get_ok(url, "/me/xp", tok),
    }
    out["t0"], out["t1"] = t0, datetime.now(timezone.utc)
    return out


def strip_learner(value):
    if isinstance(value, dict):
        return {k: strip_learner(v) for k, v in value.items() if k not in ("learner_id", "updated_at")}
    if isinstance(value, list):
        return [strip_learner(v) for v in value]
    return value


def check_against_reference(learner, sessions, got):
    refs = reference_states(sessions)
    phrases = {p["phrase"]["id"]: p for p in got["phrases"]}
    if set(phrases) != set(refs):
        problem(f"{learner}: phrases {sorted(phrases)} != reference {sorted(refs)}")
    order = [(parse(p["due_at"]), p["phrase"]["id"]) for p in got["phrases"]]
    if order != sorted(order):
        problem(f"{learner}: /me/phrases not ordered by (due_at, id)")
    for pid, ref in refs.items():
        if pid in phrases:
            check_state(f"{learner} {pid}", phrases[pid], ref)
    # Due now: anything due by the start of the reads, maybe what fell due during them.
    t0, t1 = second(got["t0"]), got["t1"]
    due_sure = {p for p, st in phrases.items() if parse(st["due_at"]) <= t0}
    due_maybe = {p for p, st in phrases.items() if parse(st["due_at"]) <= t1}
    reviews = got["reviews"]
    ids = [p["phrase"]["id"] for p in reviews["data"]]
    if not (due_sure <= set(ids) <= due_maybe) or not (len(due_sure) <= reviews["due_total"] <= len(due_maybe)):
        problem(f"{learner}: /me/reviews {ids} due_total {reviews['due_total']}, due {sorted(due_sure)}")
    if ids != [p for _, p in sorted((parse(phrases[p]["due_at"]), p) for p in ids if p in phrases)]:
        problem(f"{learner}: /me/reviews not ordered by (due_at, id)")
    for p in reviews["data"]:
        if p != phrases.get(p["phrase"]["id"]):
            problem(f"{learner}: /me/reviews row {p['phrase']['id']} differs from /me/phrases")
    # Counters, XP, streaks.
    prog, xp = got["progress"], got["xp"]
    by_lang = {}
    for s in sessions:
        c = by_lang.setdefault(s.lang, {"sessions": 0, "total_duration_seconds": 0, "phrases_seen": 0,
                                        "phrases_correct": 0, "xp": 0, "first": s.at, "last": s.at})
        c["sessions"] += 1
        c["total_duration_seconds"] += s.duration
        c["phrases_seen"] += s.seen
        c["phrases_correct"] += s.correct
        c["xp"] += s.xp()
        c["first"], c["last"] = min(c["first"], s.at), max(c["last"], s.at)
    totals = {"sessions": 0, "total_duration_seconds": 0, "phrases_seen": 0, "phrases_correct": 0, "xp": 0}
    rows = {r["language_code"]: r for r in prog["data"]}
    if set(rows) != set(by_lang):
        problem(f"{learner}: progress languages {sorted(rows)} != {sorted(by_lang)}")
    for lang, c in by_lang.items():
        r = rows.get(lang, {})
        for k in totals:
            totals[k] += c[k]
            if r.get(k) != c[k]:
                problem(f"{learner} {lang}: progress {k} {r.get(k)} != {c[k]}")
        for k, want in [("first_studied_at", c["first"]), ("last_studied_at", c["last"])]:
            if r.get(k) is None or parse(r[k]) != second(want):
                problem(f"{learner} {lang}: {k} {r.get(k)} != {want}")
        started = {p for p, st in refs.items() if st["lang"] == lang}
        if r.get("phrases_started") != len(started):
            problem(f"{learner} {lang}: phrases_started {r.get('phrases_started')} != {len(started)}")
        lo, hi = len(due_sure & started), len(due_maybe & started)
        if not (lo <= (r.get("phrases_due") or 0) <= hi):
            problem(f"{learner} {lang}: phrases_due {r.get('phrases_due')} not in {lo}..{hi}")
    for k, v in totals.items():
        if prog["totals"].get(k) != v:
            problem(f"{learner}: totals {k} {prog['totals'].get(k)} != {v}")
    if prog["totals"].get("phrases_started") != len(refs):
        problem(f"{learner}: totals phrases_started {prog['totals'].get('phrases_started')} != {len(refs)}")
    today = got["t0"].date()
    current, longest = streaks([s.at.date() for s in sessions], today)
    if (prog["current_streak_days"], prog["longest_streak_days"]) != (current, longest):
        problem(f"{learner}: streaks {prog['current_streak_days']}/{prog['longest_streak_days']} != {current}/{longest}")
    if xp["total_xp"] != totals["xp"] or xp["level"] != level(totals["xp"]):
        problem(f"{learner}: /me/xp {xp['total_xp']} level {xp['level']} != {totals['xp']} level {level(totals['xp'])}")
    got_by = {r["language_code"]: r["xp"] for r in xp["by_language"]}
    want_by = {lang: c["xp"] for lang, c in by_lang.items()}
    if got_by != want_by:
        problem(f"{learner}: /me/xp by_language {got_by} != {want_by}")


def settle_sessions(poster, learner, sessions):
    """Matches the learner's sessions on record with the ones posted: each at most once, every
    known one exactly once. Returns the committed sessions (with their ids)."""
    listed = all_pages(poster.urls[0], "/me/study-sessions", poster.tok(learner))
    by_duration = {s.duration: s for s in sessions}
    seen = {}
    for row in listed:
        s = by_duration.get(row["duration_seconds"])
        if s is None:
            problem(f"{learner}: unexpected session {row}")
            continue
        if row["duration_seconds"] in seen:
            problem(f"{learner}: session of duration {row['duration_seconds']} recorded twice")
            count("double-written sessions")
            continue
        seen[row["duration_seconds"]] = row
        if s.known and row["id"] != s.id:
            problem(f"{learner}: session {s.id} listed as {row['id']}")
        s.id = row["id"]
        want = {"language_code": s.lang, "phrases_seen": s.seen, "phrases_correct": s.correct,
                "xp_awarded": s.xp(), "answer_count": len(s.answers or [])}
        for k, v in want.items():
            if row.get(k) != v:
                problem(f"{learner}: session {row['id']} {k} {row.get(k)} != {v}")
        if parse(row["studied_at"]) != second(s.at):
            problem(f"{learner}: session {row['id']} studied_at {row['studied_at']} != {s.at}")
    committed = []
    for s in sessions:
        if s.duration in seen:
            committed.append(s)
            if not s.known:
                count(f"{s.mode}: written")
        elif s.known:
            problem(f"{learner}: session {s.id} ({s.mode}) answered 201 but is not listed")
        else:
            count(f"{s.mode}: not written")
    return committed


def check_running_totals(learner, sessions):
    """Each 201 says the learner's total XP right after its session: in commit order, each
    session's total is the one before plus its own XP (none lost, none counted twice)."""
    if any(s.created is None for s in sessions):
        count("running totals: learners not checked (a session without its 201)")
        return
    prev = 0
    for s in sorted(sessions, key=lambda s: (s.created["total_xp"], s.xp() == 0)):
        body = s.created
        if body["xp_awarded"] != s.xp() or body["total_xp"] - s.xp() != prev:
            problem(f"{learner}: 201 of {s.id}: total_xp {body['total_xp']} after xp {body['xp_awarded']}, "
                    f"but the total before was {prev}")
        if body["level"] != level(body["total_xp"]) or body["leveled_up"] != (level(body["total_xp"]) > level(prev)):
            problem(f"{learner}: 201 of {s.id}: level {body['level']} leveled_up {body['leveled_up']} after {prev}")
        prev = body["total_xp"]
    count("running totals: learners checked")


def subsets_with_sum(n_of, target, start=0):
    """Every set of indices from `start` on whose `n_of` add up to `target`."""
    if target == 0:
        yield []
        return
    for i in range(start, len(n_of)):
        if 0 < n_of[i] <= target:
            for rest in subsets_with_sum(n_of, target - n_of[i], i + 1):
                yield [i] + rest


def subsets_giving(state, touching):
    """Whether some set of the sessions `touching` (the committed ones that answer this phrase)
    gives `state`, a phrase state read while the writes ran."""
    last = parse(state["last_reviewed_at"])
    touching = [s for s in touching if second(s.at) <= last]
    if len(touching) > 18:
        count("racing reads: phrase states not checked (too many sessions)")
        return True
    pid = state["phrase"]["id"]
    n_of = [sum(1 for a in s.answers if a["phrase_id"] == pid) for s in touching]
    for tried, combo in enumerate(subsets_with_sum(n_of, state["reviews"])):
        if tried == 20000:
            count("racing reads: phrase states not checked (too many sets)")
            return True
        chosen = [touching[i] for i in combo]
        if second(max(s.at for s in chosen)) != last:
            continue
        ref = reference_states(chosen).get(pid)
        if (ref and ref["correct"] == state["correct"] and ref["lapses"] == state["lapses"]
                and ref["grade"] == state["last_grade"]
                and close(ref["card"].stability, state["stability_days"])
                and close(ref["card"].difficulty, state["difficulty"])):
            return True
    return False


# --- the database ----------------------------------------------------------------------------------

GRADE_NAMES = {v: k for k, v in GRADES.items()}


class Database:
    """PostgreSQL read directly as its admin (psql, `--db-url`): what the API does not show."""

    def __init__(self, psql, url):
        self.psql, self.url = psql, url

    def rows(self, sql):
        """A query's rows as dicts (psql prints them as one JSON array; timestamps in UTC)."""
        out = subprocess.run([self.psql, "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", self.url, "-c",
                              f"SELECT coalesce(json_agg(q), '[]') FROM ({sql}) q"],
                             check=True, capture_output=True, text=True, env={**os.environ, "PGTZ": "UTC"})
        return json.loads(out.stdout)

    def execute(self, sql):
        """Runs `sql` (statements, as the admin)."""
        subprocess.run([self.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", self.url], input=sql,
                       check=True, capture_output=True, text=True)


def check_sessions_once(db, learners):
    """Every session answered 201 has its row, and no session has two (a learner's sessions are
    told apart by their durations)."""
    rows = db.rows("SELECT id, learner_id, duration_seconds FROM lingo.study_sessions")
    by_id = {r["id"]: r for r in rows}
    for (learner, duration), n in collections.Counter((r["learner_id"], r["duration_seconds"]) for r in rows).items():
        if n > 1:
            problem(f"study_sessions: {n} rows of {learner} with duration {duration}")
    for name, sessions in learners.items():
        for s in (s for s in sessions if s.known):
            row = by_id.get(s.id)
            if row is None or (row["learner_id"], row["duration_seconds"]) != (name, s.duration):
                problem(f"{name}: session {s.id} ({s.mode}, duration {s.duration}) answered 201, its row: {row}")
            count("database: 201s found once")


def check_review_log(db, committed):
    """One review-log row per committed session with answers, its answers in order; no other row."""
    by_session = collections.defaultdict(list)
    for r in db.rows("SELECT learner_id, session_id, studied_at, phrase_ids, grades FROM lingo.phrase_review_sessions"):
        by_session[r["session_id"]].append(r)
    for name, sessions in committed.items():
        for s in sessions:
            rows = by_session.pop(s.id, [])
            ids, ratings = answer_key(s)
            want = [{"learner_id": name, "session_id": s.id, "phrase_ids": ids, "grades": ratings}] if ids else []
            got = [{k: r[k] for k in ("learner_id", "session_id", "phrase_ids", "grades")} for r in rows]
            if got != want or any(second(parse(r["studied_at"])) != second(s.at) for r in rows):
                problem(f"{name}: review log of session {s.id} ({s.mode}): {rows} != {want} at {s.at}")
            count("database: review-log sessions compared")
    for session_id, rows in by_session.items():
        if rows[0]["learner_id"] in committed:
            problem(f"review log: rows of no committed session: {rows}")


def check_checkpoints(db, committed):
    """Every checkpoint is its phrase's state after exactly the committed answers before its cut
    (the reference's)."""
    for r in db.rows("SELECT * FROM lingo.phrase_checkpoints"):
        if r["learner_id"] not in committed:
            continue
        cut = parse(r["cut"])
        ref = reference_states([s for s in committed[r["learner_id"]] if s.at < cut]).get(r["phrase_id"])
        where = f"checkpoint {r['learner_id']} {r['phrase_id']} cut {r['cut']}"
        if ref is None:
            problem(f"{where}: the phrase has no answer before the cut")
            continue
        got = {"reviews": r["reviews"], "correct": r["correct"], "lapses": r["lapses"],
               "last_grade": GRADE_NAMES[r["last_grade"]], "stability_days": r["stability"],
               "difficulty": r["difficulty"],
               **{k: rfc3339(second(parse(r[k]))) for k in ("first_reviewed_at", "last_reviewed_at", "due_at")}}
        check_state(where, got, ref)
        count("database: checkpoints compared")


def check_due_days(db):
    """`phrase_due_days` (kept by triggers on `phrase_states`) equals the counts recomputed from
    `phrase_states`, for every learner of the database."""
    for row in db.rows("""
            SELECT learner_id, language_code, due_day, s.phrases AS recomputed, d.phrases AS stored
            FROM (SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date AS due_day,
                         count(*)::integer AS phrases
                  FROM lingo.phrase_states GROUP BY 1, 2, 3) s
            FULL JOIN lingo.phrase_due_days d USING (learner_id, language_code, due_day)
            WHERE s.phrases IS DISTINCT FROM d.phrases"""):
        problem(f"phrase_due_days {row['learner_id']} {row['language_code']} {row['due_day']}: "
                f"{row['stored']} stored, {row['recomputed']} in phrase_states")
    count("database: due days compared", db.rows("SELECT count(*) AS n FROM lingo.phrase_due_days")[0]["n"])


def check_idempotency_keys(db, committed):
    """Every stored 201 of a key names a session on record (the key and the session commit
    together), and every committed session sent with a key has its key's record."""
    stored = {}
    for r in db.rows("""
            SELECT k.caller_id, k.key, b.id, s.id IS NOT NULL AS on_record
            FROM lingo.idempotency_keys k
            CROSS JOIN LATERAL (SELECT convert_from(k.response_body, 'UTF8')::json ->> 'id' AS id) b
            LEFT JOIN lingo.study_sessions s ON s.id::text = b.id AND s.learner_id = k.caller_id
            WHERE k.response_status = 201"""):
        stored[(r["caller_id"], r["key"])] = r["id"]
        if not r["on_record"]:
            problem(f"idempotency key {r['caller_id']} {r['key']}: its 201 names session {r['id']}, not on record")
    for name, sessions in committed.items():
        for s in (s for s in sessions if s.mode in ("key", "race", "drop_retry")):
            if stored.get((name, s.key)) != s.id:
                problem(f"{name}: session {s.id} ({s.mode}) committed, its key {s.key} stored for {stored.get((name, s.key))}")
            count("database: keys compared")


def check_learner_rows(db, committed):
    """`learners`' total XP and number of sessions equal the committed sessions'."""
    rows = {r["learner_id"]: r for r in db.rows("SELECT learner_id, total_xp, sessions FROM lingo.learners")}
    for name, sessions in committed.items():
        want = {"total_xp": sum(s.xp() for s in sessions), "sessions": len(sessions)}
        row = rows.get(name, {"total_xp": 0, "sessions": 0})
        if {k: row[k] for k in want} != want:
            problem(f"{name}: learners row {row} != {want}")


def check_aged_checkpoints(db, aged):
    """The aged learners' phrases have checkpoints (else check_checkpoints compared none of theirs)."""
    # A session in time order cuts just after the phrase's last answer, a late one (or an in-order
    # one whose phrase was last answered before then) at 31 days before it arrived.
    row = db.rows("""
        SELECT count(*) AS n, count(*) FILTER (WHERE cut = last_reviewed_at + interval '1 microsecond') AS after_last
        FROM lingo.phrase_checkpoints WHERE learner_id = ANY (ARRAY[%s])""" % ", ".join(f"'{name}'" for name in aged))[0]
    n = row["n"]
    print(f"phrase_checkpoints: {n} rows of the {len(aged)} aged learners, {row['after_last']} of them cut "
          f"just after the phrase's last answer, {n - row['after_last']} at 31 days before a session", file=sys.stderr)
    count("database: checkpoints of aged learners", n)
    if n == 0:
        problem(f"phrase_checkpoints has no row of the {len(aged)} aged learners: the checkpoints went unchecked")


def check_database(db, learners, committed):
    check_sessions_once(db, learners)
    check_review_log(db, committed)
    check_checkpoints(db, committed)
    check_due_days(db)
    check_idempotency_keys(db, committed)
    check_learner_rows(db, committed)


# --- crashes ---------------------------------------------------------------------------------------

def end_crashes(folder, timeout=120):
    """Tells conc-check.sh (`--crash`) that the writes are over, and waits until it has stopped
    crashing processes and both replicas are up again. Returns what it did (its JSON)."""
    open(os.path.join(folder, "writes-done"), "w").close()
    done = os.path.join(folder, "crashes-done")
    give_up = time.time() + timeout
    while not os.path.exists(done):
        if time.time() > give_up:
            problem(f"conc-check.sh did not end its crashes within {timeout} s of the writes' end")
            return {}
        time.sleep(0.2)
    with open(done) as f:  # conc-check.sh renames it into place when it is complete
        return json.load(f)


# --- export ----------------------------------------------------------------------------------------

class Exporter:
    """An incremental copy of an analytics export, rows keyed by (`learner_id`, `second`)."""

    def __init__(self, url, tok, path, second):
        self.url, self.tok, self.path, self.second = url, tok, path, second
        self.rows, self.watermark, self.runs = {}, None, 0

    def run_once(self):
        path = self.path
        if self.watermark:
            path += "?updated_since=" + urllib.parse.quote(self.watermark)
        rows = all_pages(self.url, path, self.tok)
        for row in rows:
            k = (row["learner_id"], row[self.second])
            # Rows come in (updated_at, ...) order: a later one is the newer state.
            self.rows[k] = row
            if self.watermark is None or parse(row["updated_at"]) > parse(self.watermark):
                self.watermark = row["updated_at"]
        self.runs += 1

    def loop(self, stop):
        while not stop.is_set():
            self.run_once()
            time.sleep(0.05)


# --- main ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--learners", type=int, default=30)
    ap.add_argument("--same", type=int, default=4, help="learners with 24 sessions at one instant")
    ap.add_argument("--late", type=int, default=6, help="learners with a late session racing an in-order one")
    ap.add_argument("--heavy", type=int, default=0, help="learners with 40 sessions of 50-150 answers")
    ap.add_argument("--aged", type=int, default=0,
                    help="learners with a history 35-60 days old written in the database first (needs --db-url), "
                         "then recent sessions posted like the others': the service cuts checkpoints")
    ap.add_argument("--burst", type=int, default=0, help="sessions of one learner posted all at once, first")
    ap.add_argument("--batch", type=int, default=3, help="learners whose sessions are shuffled together")
    ap.add_argument("--inflight", type=int, default=48)
    ap.add_argument("--readers", type=int, default=4, help="threads reading while the writes run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--racing-states", type=int, default=400,
                    help="how many of the distinct phrase states read during the writes are checked")
    ap.add_argument("--retry-secs", type=float, default=60,
                    help="how long a keyed session whose outcome is unknown is retried before its key counts as stuck")
    ap.add_argument("--psql", help="psql, to read the database as its admin (with --db-url)")
    ap.add_argument("--db-url", help="the admin's URL of the database: the database's own checks run")
    ap.add_argument("--spread-secs", type=float,
                    help="post the sessions (the batches') in waves of --inflight at an even pace over this long, "
                         "so that crashes meet writes in flight (default: all at once; 30 with --crash)")
    ap.add_argument("--crash", metavar="FOLDER",
                    help="processes crash during the writes (conc-check.sh --crash): 503 database_unavailable "
                         "allowed, reads retried longer; the writes' end is signalled in FOLDER")
    args = ap.parse_args()
    if args.aged and not args.db_url:
        ap.error("--aged writes in the database: it needs --db-url")
    if args.spread_secs is None:
        args.spread_secs = 30 if args.crash else 0
    if args.crash:
        checks.allowed_503.add("database_unavailable")
        checks.patience_secs = args.retry_secs
        checks.request_timeout_secs = 20
    rng = random.Random(args.seed)
    poster = Poster(args)
    now = datetime.now(timezone.utc)
    run = f"r{args.seed}-{int(time.time())}"

    learners = {}
    for i in range(args.learners):
        learners[f"{run}-rand-{i}"] = random_history(rng, f"{run}-rand-{i}", now)
    for i in range(args.same):
        learners[f"{run}-same-{i}"] = same_instant_history(rng, f"{run}-same-{i}", now)
    for i in range(args.heavy):
        learners[f"{run}-heavy-{i}"] = heavy_history(rng, f"{run}-heavy-{i}", now)
    burst = f"{run}-burst"
    if args.burst:
        learners[burst] = []
        while len(learners[burst]) < args.burst:
            learners[burst] += random_history(rng, burst, now)
        learners[burst] = learners[burst][: args.burst]
        for i, s in enumerate(learners[burst]):
            s.duration = 1 + i  # unique again once the histories are joined
    # Aged learners: their old part written in the database now, the recent part posted below.
    db = Database(args.psql or "psql", args.db_url) if args.db_url else None
    aged = {}
    for i in range(args.aged):
        name = f"{run}-aged-{i}"
        aged[name] = aged_history(rng, name, now)
        for s, sid in zip(aged[name], write_aged(db, name, aged[name])):
            s.id, s.known = sid, True
        learners[name] = aged[name] + random_history(rng, name, now)
        count("aged: sessions written in the database", len(aged[name]))
    late_pairs = {}
    for i in range(args.late):
        name = f"{run}-late-{i}"
        first, pair = late_history(rng, name, now)
        learners[name] = first + pair
        late_pairs[name] = (first, pair)

    analytics = token(args.secret, "conc-analytics", "lingo:analytics")
    exporter = Exporter(poster.urls[1 % len(poster.urls)], analytics, "/analytics/phrase-progress", "phrase_id")
    totals_exporter = Exporter(poster.urls[0], analytics, "/analytics/progress", "language_code")
    stop = threading.Event()
    exporter_threads = [threading.Thread(target=e.loop, args=(stop,)) for e in (exporter, totals_exporter)]
    for t in exporter_threads:
        t.start()

    # The late learners: their history in order first, then the pair at once on two replicas.
    for name, (first, pair) in late_pairs.items():
        for s in first:
            poster.run(s, rng)
    with ThreadPoolExecutor(2 * args.late) as pool:
        pair_seeds = [(s, rng.randint(0, 1 << 30)) for _, pair in late_pairs.values() for s in pair]
        list(pool.map(lambda pair: poster.run(pair[0], random.Random(pair[1])), pair_seeds))

    # The burst: one learner's sessions all at once.
    if args.burst:
        with ThreadPoolExecutor(args.burst) as pool:
            seeds = [rng.randint(0, 1 << 30) for _ in learners[burst]]
            list(pool.map(lambda pair: poster.run(pair[0], random.Random(pair[1])), zip(learners[burst], seeds)))

    # Everyone else: batches of learners, their sessions shuffled together, all at once.
    names = [n for n in learners if n not in late_pairs and n != burst]
    rng.shuffle(names)
    tasks = []
    for b in range(0, len(names), args.batch):
        batch = [s for n in names[b:b + args.batch] for s in learners[n] if s.mode != "aged"]
        rng.shuffle(batch)
        tasks.extend(batch)
    racing_reads = []
    reader_stop = threading.Event()

    def reader(i):
        rrng = random.Random(args.seed * 100 + i)
        while not reader_stop.is_set():
            name = rrng.choice(names)
            url = rrng.choice(poster.urls)
            path = rrng.choice(["/me/reviews?limit=100", "/me/phrases?limit=100", "/me/progress"])
            status, _, body = try_call(url, "GET", path, poster.tok(name))
            count("racing reads")
            if status != 200:
                if not unknown(status):
                    problem(f"racing read {path} of {name}: {status} {body}")
                time.sleep(0.05)  # a replica or the database is down: no busy loop meanwhile
                continue
            if path.startswith("/me/reviews") and body["due_total"] < body["count"]:
                problem(f"racing read of {name}: due_total {body['due_total']} < count {body['count']}")
            if not path.startswith("/me/progress"):
                racing_reads.append((name, body["data"]))

    reader_threads = [threading.Thread(target=reader, args=(i,)) for i in range(args.readers)]
    for t in reader_threads:
        t.start()
    seeds = [rng.randint(0, 1 << 30) for _ in tasks]
    started = time.time()

    def post_in_turn(i):
        """Posts task i, not before its wave's turn when the writes are spread over
        `--spread-secs`: waves of `--inflight` sessions at once, so that one learner's sessions
        still race (one at a time, a kill met 1 or 2 requests in flight; in waves, up to 30)."""
        wave = i // args.inflight * args.inflight
        wait = started + wave * args.spread_secs / len(tasks) - time.time()
        if wait > 0:
            time.sleep(wait)
        poster.run(tasks[i], random.Random(seeds[i]))

    with ThreadPoolExecutor(args.inflight) as pool:
        list(pool.map(post_in_turn, range(len(tasks))))
    write_secs = time.time() - started
    reader_stop.set()
    for t in reader_threads:
        t.join()
    stop.set()
    for t in exporter_threads:
        t.join()
    exporter_runs_during = exporter.runs
    if args.crash:
        crashes = end_crashes(args.crash)
        for k, v in crashes.items():
            count(f"crash: {k}", v)
        if crashes.get("postgres_crashes", 0) < 2:
            problem(f"the writes ended after {crashes.get('postgres_crashes', 0)} PostgreSQL crashes of the 2 "
                    "a crash run makes: spread them over longer (--spread-secs)")

    phase_secs, phase_start = {}, time.time()

    def phase_over(name):
        nonlocal phase_start
        phase_secs[name] = round(time.time() - phase_start, 1)
        phase_start = time.time()

    phase_over("end of crashes")
    # Settle, compare with the reference, post the same sessions in order to a fresh learner.
    committed = {name: settle_sessions(poster, name, sessions) for name, sessions in learners.items()}
    finals = {}
    for name, sessions in committed.items():
        got = read_all(poster.urls[0], poster.tok(name))
        finals[name] = got
        check_against_reference(name, sessions, got)
        check_running_totals(name, sessions)
        count("learners checked")
        count("sessions committed", len(sessions))
        count("answers committed", sum(len(s.answers or []) for s in sessions))
        seq = name + "-seq"
        if name in aged:  # older than the API takes: written as for the learner
            write_aged(db, seq, [s for s in sessions if s.mode == "aged"])
        for s in ordered([s for s in sessions if s.mode != "aged"]):
            status, hdrs, body = call(poster.urls[1 % len(poster.urls)], "POST", "/me/study-sessions", poster.tok(seq), s.body())
            if status != 201:
                problem(f"{seq}: {status} {body}")
        again = read_all(poster.urls[1 % len(poster.urls)], poster.tok(seq))
        for k in ("phrases", "reviews", "progress", "xp"):
            a, b = strip_learner(got[k]), strip_learner(again[k])
            if a != b and got["t0"].date() == again["t0"].date():
                problem(f"{name}: {k} differs from the same sessions posted in order:\n  {json.dumps(a)[:1500]}\n  {json.dumps(b)[:1500]}")

    phase_over("learners compared")
    # States read while the writes ran: each one some set of the committed sessions gives. Each
    # costs up to seconds of the reference: a sample of `--racing-states` of them (spread writes
    # are read thousands of times).
    distinct = {}
    for name, rows in racing_reads:
        for state in rows:
            pid = state["phrase"]["id"]
            distinct.setdefault((name, pid, state["reviews"], state["last_reviewed_at"], state["stability_days"]),
                                (name, state))
    sample = sorted(distinct)
    random.Random(args.seed).shuffle(sample)
    count("racing reads: phrase states not checked (beyond the sample)", max(0, len(sample) - args.racing_states))
    for key in sample[: args.racing_states]:
        name, state = distinct[key]
        pid = state["phrase"]["id"]
        touching = [s for s in committed[name] if any(a["phrase_id"] == pid for a in s.answers or [])]
        count("racing reads: phrase states checked")
        if not subsets_giving(state, touching):
            problem(f"racing read of {name} {pid}: {state} is no set of the committed sessions")

    phase_over("racing reads")
    # The export: what was copied during the writes plus one run after them.
    exporter.run_once()
    for name, got in finals.items():
        for p in got["phrases"]:
            row = exporter.rows.get((name, p["phrase"]["id"]))
            if row is None:
                problem(f"export lacks {name} {p['phrase']['id']}")
                continue
            for k in ("reviews", "correct", "lapses", "last_reviewed_at", "last_grade", "stability_days",
                      "difficulty", "due_at"):
                if row[k] != p[k]:
                    problem(f"export {name} {p['phrase']['id']}: {k} {row[k]} != final {p[k]}")
        count("export rows compared", len(got["phrases"]))

    # The same for the learners' totals per language (`/analytics/progress`).
    totals_exporter.run_once()
    for name, got in finals.items():
        for r in got["progress"]["data"]:
            row = totals_exporter.rows.get((name, r["language_code"]))
            if row is None:
                problem(f"progress export lacks {name} {r['language_code']}")
                continue
            for k in ("sessions", "total_duration_seconds", "phrases_seen", "phrases_correct", "xp",
                      "phrases_started", "first_studied_at", "last_studied_at"):
                if row[k] != r[k]:
                    problem(f"progress export {name} {r['language_code']}: {k} {row[k]} != final {r[k]}")
            count("progress export rows compared")

    phase_over("exports")
    if args.db_url:
        check_database(db, learners, committed)
        if args.aged:
            check_aged_checkpoints(db, aged)
        phase_over("database")

    print(json.dumps({"write_secs": round(write_secs, 1), "secs_after_the_writes": phase_secs, "exporter_runs_during_writes": exporter_runs_during,
                      "progress_exporter_runs": totals_exporter.runs,
                      "counts": dict(sorted(counts.items())), "disagreements": len(problems)}, indent=1))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
