"""Helpers of deploy/bench/phrase-progress.sh: the template histories posted through the service,
and the sequential late / in-order session timings (goal 3)."""

import argparse
import datetime
import http.client
import json
import random
import statistics
import sys
import time
import urllib.parse

GRADES = ["again", "hard", "good", "easy"]


def phrase(n):
    return f"bench-es-{n:06d}"


def iso(at):
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def random_grade(rng):
    """Mostly `good`, with some `again`, `hard` and `easy`, as a learner answers."""
    return rng.choices(GRADES, weights=[15, 15, 55, 15])[0]


def answers(phrase_ids, grades):
    return [{"phrase_id": p, "correct": g != "again", "grade": g} for p, g in zip(phrase_ids, grades)]


def session_body(answer_list, studied_at=None):
    body = {"duration_seconds": 60 + 6 * len(answer_list), "phrases_seen": len(answer_list),
            "phrases_correct": sum(a["correct"] for a in answer_list), "language_code": "es",
            "answers": answer_list}
    if studied_at is not None:
        body["studied_at"] = iso(studied_at)
    return body


class Client:
    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def post_session(self, token, body):
        """POSTs one study session; returns the seconds it took (checks for 201)."""
        data = json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        start = time.perf_counter()
        self.conn.request("POST", "/v1/lingo/me/study-sessions", data, headers)
        response = self.conn.getresponse()
        text = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 201:
            sys.exit(f"POST study session: {response.status} {text[:300]!r}")
        return elapsed


# The template sets: (first phrase number, templates, grid of answer times as offsets from the
# grid's start, 29 days ago). Template k of a set answers phrase first + k at the grid's times
# (the first `answers(k)` of them) with its own random grades.
DAY = datetime.timedelta(days=1)
HEAVY = (1, 20, [d * DAY for d in (0, 1, 3, 6, 9, 13, 17, 21, 25, 28)], lambda k: 10)
OTHERS = (21, 8, [d * DAY for d in (0, 2, 9)], lambda k: 1 + k % 3)
REPLAY = (29, 4, [j * datetime.timedelta(hours=14) for j in range(50)], lambda k: 50)


def cmd_templates(a):
    """Posts the template histories as the template learner, session by session in time order:
    the service computes their states, which the bulk SQL then copies (shifted in time)."""
    token = open(a.token).read().strip()
    client = Client(a.url)
    start = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - 29 * DAY
    rng = random.Random(42)
    posted = 0
    for first, count, grid, length in (HEAVY, OTHERS, REPLAY):
        grades = {k: [random_grade(rng) for _ in range(length(k))] for k in range(count)}
        for j, offset in enumerate(grid):
            ks = [k for k in range(count) if j < length(k)]
            if not ks:
                continue
            body = session_body(answers([phrase(first + k) for k in ks], [grades[k][j] for k in ks]),
                                start + offset)
            client.post_session(token, body)
            posted += 1
    print(posted)


def cmd_replay(a):
    """Goal 3: pairs of sessions posted one at a time, each to a learner of its own with the same
    history (100 phrases with 50 answers each): a late one (studied_at 10 days ago) and an in-order
    one (studied_at absent: now). Prints the seconds of each, per round, as JSON."""
    late_tokens = open(a.late_tokens).read().split()
    inorder_tokens = open(a.inorder_tokens).read().split()
    client = Client(a.url)
    rng = random.Random(7)
    ids = [phrase(n) for n in range(1, 101)]
    grades = [random_grade(rng) for _ in ids]
    warm, rounds = a.warm, []
    for n in range(warm):
        client.post_session(late_tokens[n], session_body(answers(ids, grades), late_at()))
        client.post_session(inorder_tokens[n], session_body(answers(ids, grades)))
    for r in range(a.rounds):
        late, inorder = [], []
        for i in range(a.samples):
            n = warm + r * a.samples + i
            pair = [(late, late_tokens[n], late_at), (inorder, inorder_tokens[n], lambda: None)]
            for times, token, at in pair if i % 2 == 0 else reversed(pair):
                times.append(client.post_session(token, session_body(answers(ids, grades), at())))
        rounds.append({"late": late, "inorder": inorder})
    print(json.dumps(rounds))


def late_at():
    return datetime.datetime.now(datetime.timezone.utc) - 10 * DAY


def cmd_summary(a):
    """The p50s (ms) and ratios of `replay`'s output."""
    rounds = json.load(open(a.results))
    out = {"rounds": []}
    for r in rounds:
        late, inorder = statistics.median(r["late"]) * 1e3, statistics.median(r["inorder"]) * 1e3
        out["rounds"].append({"late_p50": late, "inorder_p50": inorder, "ratio": late / inorder,
                              "late_p90": statistics.quantiles(r["late"], n=10)[-1] * 1e3,
                              "inorder_p90": statistics.quantiles(r["inorder"], n=10)[-1] * 1e3})
    every_late = [t for r in rounds for t in r["late"]]
    every_inorder = [t for r in rounds for t in r["inorder"]]
    out["late_p50"] = statistics.median(every_late) * 1e3
    out["inorder_p50"] = statistics.median(every_inorder) * 1e3
    out["ratio"] = out["late_p50"] / out["inorder_p50"]
    out["samples"] = len(every_late)
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("templates")
    t.add_argument("--url", required=True)
    t.add_argument("--token", required=True)
    r = sub.add_parser("replay")
    r.add_argument("--url", required=True)
    r.add_argument("--late-tokens", required=True)
    r.add_argument("--inorder-tokens", required=True)
    r.add_argument("--rounds", type=int, default=2)
    r.add_argument("--samples", type=int, default=40)
    r.add_argument("--warm", type=int, default=4)
    s = sub.add_parser("summary")
    s.add_argument("results")
    a = parser.parse_args()
    {"templates": cmd_templates, "replay": cmd_replay, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    main()
