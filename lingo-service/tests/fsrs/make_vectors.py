#!/usr/bin/env python3
"""Reference vectors for lingo's FSRS-6 scheduling, made by the Python reference implementation.

Regenerate (from the repository root) with:

    pip install 'fsrs>=6,<7' && python3 lingo-service/tests/fsrs/make_vectors.py > lingo-service/tests/fsrs/vectors.json

Each case is one phrase's history: answers (`grade` 1..=4 = again/hard/good/easy, `at` = the
session's `studied_at`) in time order, and after every answer the reference's stability,
difficulty, `due` and the interval before rounding (to spot rounding boundaries). The scheduler
is the one docs/lingo.md ("Phrase progress") names: default parameters, desired retention 0.9,
no learning or relearning steps, no fuzz. The output is deterministic (fixed seed, fixed start time).
"""

import json
from importlib.metadata import version
import random
from datetime import datetime, timedelta, timezone

from fsrs import Card, Rating, Scheduler

START = datetime(2026, 1, 5, 8, 30, 15, tzinfo=timezone.utc)
SCHEDULER = Scheduler(learning_steps=(), relearning_steps=(), enable_fuzzing=False)


def rfc3339(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unrounded_interval(stability: float) -> float:
    # The expression of Scheduler._next_interval before its round().
    s = SCHEDULER
    return (stability / s._FACTOR) * ((s.desired_retention ** (1 / s._DECAY)) - 1)


def run(name: str, history: list[tuple[int, timedelta]]) -> dict:
    """`history`: (grade, time since the previous answer) pairs; the first one's is from START."""
    card = Card()
    at = START
    answers = []
    for grade, gap in history:
        at = at + gap
        card, _ = SCHEDULER.review_card(card, Rating(grade), review_datetime=at)
        answers.append(
            {
                "grade": grade,
                "at": rfc3339(at),
                "stability": card.stability,
                "difficulty": card.difficulty,
                "due": rfc3339(card.due),
                "interval_unrounded": unrounded_interval(card.stability),
            }
        )
    return {"name": name, "answers": answers}


def days(n: float) -> timedelta:
    return timedelta(days=n)


def main() -> None:
    rng = random.Random(20261127)
    cases = []
    # One answer of every grade.
    for g in range(1, 5):
        cases.append(run(f"one answer, grade {g}", [(g, days(0))]))
    # Two answers: every pair of grades, the second a few days later.
    for g1 in range(1, 5):
        for g2 in range(1, 5):
            cases.append(run(f"two answers {g1},{g2}", [(g1, days(0)), (g2, days(3) + timedelta(hours=5))]))
    # Five answers following the schedule (answered on the due day), with lapses.
    for grades in ([3, 3, 3, 3, 3], [3, 1, 3, 1, 3], [4, 4, 1, 2, 3], [1, 1, 1, 1, 1], [2, 2, 2, 2, 2], [4, 4, 4, 4, 4]):
        history = [(grades[0], days(0))]
        card = Card()
        card, _ = SCHEDULER.review_card(card, Rating(grades[0]), review_datetime=START)
        at = START
        for g in grades[1:]:
            gap = card.due - at
            at = card.due
            card, _ = SCHEDULER.review_card(card, Rating(g), review_datetime=at)
            history.append((g, gap))
        cases.append(run(f"five answers on their due days {grades}", history))
    # Same-day repeats: elapsed 0 days (hours apart, and 1 s short of a day).
    cases.append(run("same-day repeats", [(3, days(0)), (1, timedelta(hours=2)), (3, timedelta(hours=3)), (4, timedelta(hours=23, minutes=59, seconds=59)), (2, timedelta(seconds=1))]))
    # Several answers within one session: the same `studied_at`.
    cases.append(run("one session, same phrase four times", [(1, days(0)), (2, days(0)), (3, days(0)), (3, days(0)), (3, days(2))]))
    # Long gaps, up to the maximum interval.
    cases.append(run("long gaps", [(3, days(0)), (3, days(400)), (1, days(3000)), (4, days(30)), (4, days(10000))]))
    cases.append(run("maximum interval", [(4, days(0))] + [(4, days(36500))] * 6))
    # Thirty answers: random grades and gaps from minutes to years.
    for i in range(12):
        history = []
        for j in range(30):
            gap = days(0) if j == 0 else timedelta(seconds=rng.choice([
                rng.randint(0, 3600), rng.randint(0, 86400 * 2), rng.randint(86400, 86400 * 40),
                rng.randint(86400 * 30, 86400 * 800)]))
            grade = rng.choices([1, 2, 3, 4], weights=[2, 2, 5, 1])[0]
            history.append((grade, gap))
        cases.append(run(f"thirty random answers #{i}", history))
    print(json.dumps({"reference": f"fsrs {version('fsrs')}",
                      "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
