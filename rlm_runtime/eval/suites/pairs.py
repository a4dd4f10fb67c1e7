"""Pairs (OOLONG-Pairs-like): entries by users, each with a label; list the pairs of users
that satisfy a relation. The answer is a list of pairs, scored by ``set`` F1 (each pair
unordered; user ids are found in the reply with a pattern).

Relation: both users have at least one entry with the label asked about. Three to five users
qualify (three to ten pairs); the other users' entries carry other labels only.
"""

from __future__ import annotations

import random
from itertools import combinations

from rlm_runtime.eval.suites import text
from rlm_runtime.eval.suites.base import Generated, Suite, pick

LABELS = ("urgent", "routine", "deferred", "escalated", "archived", "flagged")
FORMATS = (
    "Entry {n}: user {user} filed a request marked {label} about {words}.",
    "Log {n} | user={user} | status={label} | {words}",
    "At step {n}, {user} marked an item as {label} ({words}).",
)
FORMAT_PATTERNS = (
    r"^Entry \d+: user (U\d{{4}}) filed a request marked (\w+) about ",
    r"^Log \d+ \| user=(U\d{{4}}) \| status=(\w+) \|",
    r"^At step \d+, (U\d{{4}}) marked an item as (\w+) \(",
)
QUESTIONS = (
    "List every pair of users who both have at least one {label} entry.",
    "Which pairs of users each have one or more entries labelled {label}? List all the pairs.",
    "Find all pairs of distinct users such that both users have an entry with the label {label}.",
)
USER_PATTERN = r"U\d{4}"


def generate(rng: random.Random, length: int) -> Generated:
    label = rng.choice(LABELS)
    others = [x for x in LABELS if x != label]
    fi, fmt = pick(rng, FORMATS)
    n_users = max(8, min(400, length // 2000))
    users = [f"U{u}" for u in rng.sample(range(1000, 10000), n_users)]
    chosen = sorted(rng.sample(users, rng.randint(3, 5)))
    n_entries = max(20, min(3000, length // 300))
    entries: list[tuple[str, str]] = [(u, label) for u in chosen]  # each chosen user has one at least
    while len(entries) < n_entries:
        user = rng.choice(users)
        lab = rng.choice(others) if user not in chosen or rng.random() < 0.6 else label
        entries.append((user, lab))
    rng.shuffle(entries)
    lines = [fmt.format(n=i + 1, user=u, label=lab, words=text.words(rng, rng.randint(3, 7)))
             for i, (u, lab) in enumerate(entries)]
    budget = length - sum(len(x) + 1 for x in lines)
    # Entries keep their order (their numbers run upwards) but are spread through the prose.
    prose = text.prose_lines(rng, max(0, budget))
    slots = sorted(rng.randint(0, len(prose)) for _ in lines)
    out: list[str] = []
    last = 0
    for entry, at in zip(lines, slots, strict=True):
        out += prose[last:at]
        out.append(entry)
        last = at
    out += prose[last:]
    pairs = [f"{a} {b}" for a, b in combinations(chosen, 2)]
    qi, q = pick(rng, QUESTIONS)
    return Generated(q.format(label=label), pairs, "set", text.join(out), options={"item_pattern": USER_PATTERN, "group": 2},
                     metadata={"label": label, "users": chosen, "entries": len(lines), "format_template": fi,
                               "question_template": qi, "item_pattern": FORMAT_PATTERNS[fi].format()})


SUITES = (
    Suite("pairs", "pairs", "pairs of users who both have an entry with a label (list answers, set F1)", text.TEXT_SOURCE,
          generate),
)
