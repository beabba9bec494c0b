#!/usr/bin/env python3
"""Reference vectors for lingo's FSRS-6 scheduling, made by the Python reference implementation.

Regenerate (from the repository root) with:

    pip install 'fsrs>=6,<7' && python3 lingo-service/tests/fsrs/make_vectors.py > lingo-service/tests/fsrs/vectors.json

Each case is one phrase's history: answers (`grade` 1..=4 = again/hard/good/easy, `at` = the
session's `studied_at`) in time order, and after every answer the reference's stability,
difficulty, `due` and the interval before rounding (to spot rounding boundaries). The scheduler
is the one docs/lingo.md ("Phrase progress") names: default parameters, desired retention 0.9,
no learning or relearning steps, no fuzz. The output is deterministic (fixed seed, fixed start time).

Each learner is a whole study history as an app posts it: sessions over four weeks (distinct
`studied_at`, several phrases of one or two languages, a phrase answered several times in one
session, sessions an hour apart across UTC midnight, grades sent or left to their default), the
order in which they are posted (in time order, reversed, shuffled: late sessions), and the
reference's final state of every phrase after replaying its answers in time order (`studied_at`,
then position in the session). Its times lie within days 0..27 after START's day, so a test may move
them by whole days to end before now inside the 30 days `studied_at` allows.
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


GRADE_NAMES = ["again", "hard", "good", "easy"]


def learner(name: str, rng: random.Random, index: int) -> dict:
    """One learner's sessions, their posting order and the reference's final states."""
    day0 = START.replace(hour=0, minute=0, second=0, microsecond=0)
    languages = ["es"] if index % 2 == 0 else ["es", "fr"]
    pools = {lang: [f"ph-{lang}-{n:03d}" for n in rng.sample(range(1, 49), 5)] for lang in languages}
    times: set[datetime] = set()

    def at(day: int, seconds: float) -> datetime:
        moment = day0 + timedelta(days=day, seconds=seconds)
        if rng.random() < 0.5:
            moment = moment.replace(microsecond=0)
        while moment in times:
            moment += timedelta(microseconds=1)
        times.add(moment)
        return moment

    moments = []
    for _ in range(rng.randint(8, 12)):
        moments.append(at(rng.randint(0, 27), rng.uniform(0, 86400)))
    for _ in range(2):
        # An hour apart across UTC midnight: 0 whole days between them.
        day = rng.randint(1, 27)
        moments.append(at(day - 1, 86400 - rng.uniform(60, 1800)))
        moments.append(at(day, rng.uniform(60, 1800)))
    # Same-day repeats: a few hours after an earlier session.
    base = rng.choice(moments)
    moments.append(at((base - day0).days, min((base - day0).seconds + rng.uniform(600, 7200), 86399)))
    sessions = []
    for moment in sorted(moments):
        language = rng.choice(languages)
        answers = []
        for _ in range(rng.randint(1, 6)):
            grade = rng.choices([1, 2, 3, 4], weights=[3, 2, 5, 2])[0]
            # Hard and easy must be sent; again and good are the defaults of wrong and correct.
            sent = grade in (2, 4) or rng.random() < 0.5
            answers.append({"phrase": rng.choice(pools[language]), "grade": grade, "sent": sent})
        sessions.append({"at": rfc3339(moment), "language": language, "answers": answers,
                         "_moment": moment})
    order = list(range(len(sessions)))
    if index % 3 == 1:
        order.reverse()
    elif index % 3 == 2:
        rng.shuffle(order)
    # The reference: every phrase's answers in time order, then by position in its session.
    per_phrase: dict[str, list[tuple[datetime, int, int]]] = {}
    for session in sessions:
        for position, answer in enumerate(session["answers"]):
            per_phrase.setdefault(answer["phrase"], []).append(
                (session["_moment"], position, answer["grade"]))
    states = []
    for phrase in sorted(per_phrase):
        card = Card()
        answers = sorted(per_phrase[phrase])
        for moment, _, grade in answers:
            card, _ = SCHEDULER.review_card(card, Rating(grade), review_datetime=moment)
        grades = [grade for _, _, grade in answers]
        states.append({
            "phrase": phrase,
            "stability": card.stability,
            "difficulty": card.difficulty,
            "due": rfc3339(card.due),
            "interval_unrounded": unrounded_interval(card.stability),
            "reviews": len(grades),
            "correct": sum(1 for g in grades if g != 1),
            "lapses": sum(1 for g in grades[1:] if g == 1),
            "first": rfc3339(answers[0][0]),
            "last": rfc3339(answers[-1][0]),
            "last_grade": GRADE_NAMES[grades[-1] - 1],
        })
    for session in sessions:
        del session["_moment"]
    return {"name": name, "sessions": sessions, "post_order": order, "states": states}


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
    learners = [learner(f"learner #{i}", random.Random(20261128 + i), i) for i in range(6)]
    print(json.dumps({"reference": f"fsrs {version('fsrs')}",
                      "cases": cases, "learners": learners}, indent=1))


if __name__ == "__main__":
    main()
