"""Needle suites (RULER-style): facts about made-up names planted in real prose.

``needle``: one fact answers the question; a few facts of the same kind about other names are
distractors. Scored by ``contains`` (string match).
``needle-multi``: three facts of the same kind about one name at different places; the
answer is all three values, scored by ``set`` F1 over the values found in the reply.
"""

from __future__ import annotations

import random
import string

from rlm_runtime.eval.suites import text
from rlm_runtime.eval.suites.base import Generated, Suite, pick

#: Kinds of fact: (noun, plural, value maker, regex of a value).
KINDS: tuple[tuple[str, str, str], ...] = (
    ("access code", "access codes", "code"),
    ("serial number", "serial numbers", "serial"),
    ("vault combination", "vault combinations", "combo"),
)
PATTERNS = {"code": r"[A-Z]{2}-\d{4}", "serial": r"SN\d{6}", "combo": r"\d{2}-\d{2}-\d{2}"}

STATEMENTS = (
    "The {kind} for {name} is {value}.",
    "Remember this: {name} uses {value} as its {kind}.",
    "According to the registry, the {kind} of {name} reads {value}.",
    "{name} was assigned the {kind} {value} last spring.",
    "Note that {value} is the {kind} that belongs to {name}.",
)
QUESTIONS = (
    "What is the {kind} for {name}?",
    "Which {kind} was assigned to {name}?",
    "The text mentions the {kind} of {name}. What is it?",
    "{name} has a {kind}. What is it?",
)
MULTI_STATEMENTS = (
    "One of the {kinds} for {name} is {value}.",
    "{name} also holds the {kind} {value}.",
    "Among the {kinds} of {name} is {value}.",
)
MULTI_QUESTIONS = (
    "What are all the {kinds} for {name}? List every one.",
    "List each {kind} that {name} holds.",
    "{name} has several {kinds}. Which are they?",
)
ENTITY = ("project {}", "the {} account", "{}")


def value(rng: random.Random, kind: str) -> str:
    if kind == "code":
        return "".join(rng.choice(string.ascii_uppercase) for _ in range(2)) + f"-{rng.randint(1000, 9999)}"
    if kind == "serial":
        return f"SN{rng.randint(100000, 999999)}"
    return f"{rng.randint(10, 99)}-{rng.randint(10, 99)}-{rng.randint(10, 99)}"


def _values(rng: random.Random, kind: str, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        v = value(rng, kind)
        if v not in out:
            out.append(v)
    return out


def _entities(rng: random.Random, n: int) -> list[str]:
    form = rng.choice(ENTITY)
    return [form.format(name) for name in text.made_up_names(rng, n)]


def single(rng: random.Random, length: int) -> Generated:
    kind, _, vkind = rng.choice(KINDS)
    n_distractors = rng.randint(1, 4)
    names = _entities(rng, 1 + n_distractors)
    values = _values(rng, vkind, len(names))
    si, statement = pick(rng, STATEMENTS)
    qi, question = pick(rng, QUESTIONS)
    facts = [statement.format(kind=kind, name=n, value=v) for n, v in zip(names, values, strict=True)]
    facts = [f[0].upper() + f[1:] for f in facts]
    budget = length - sum(len(f) + 1 for f in facts)
    lines = text.plant(text.prose_lines(rng, budget), facts, rng)
    q = question.format(kind=kind, name=names[0])
    return Generated(q[0].upper() + q[1:], values[0], "contains", text.join(lines),
                     metadata={"kind": kind, "key": names[0], "statement_template": si, "question_template": qi,
                               "distractors": n_distractors})


def multi(rng: random.Random, length: int) -> Generated:
    kind, kinds, vkind = rng.choice(KINDS)
    names = _entities(rng, 3)
    values = _values(rng, vkind, 3 + 4)
    si, statement = pick(rng, MULTI_STATEMENTS)
    qi, question = pick(rng, MULTI_QUESTIONS)
    facts = [statement.format(kind=kind, kinds=kinds, name=names[0], value=v) for v in values[:3]]
    # Distractors: the same kind of fact about other names.
    facts += [STATEMENTS[0].format(kind=kind, name=rng.choice(names[1:]), value=v) for v in values[3:]]
    facts = [f[0].upper() + f[1:] for f in facts]
    budget = length - sum(len(f) + 1 for f in facts)
    lines = text.plant(text.prose_lines(rng, budget), facts, rng)
    q = question.format(kind=kind, kinds=kinds, name=names[0])
    return Generated(q[0].upper() + q[1:], values[:3], "set", text.join(lines),
                     options={"item_pattern": PATTERNS[vkind]},
                     metadata={"kind": kind, "key": names[0], "statement_template": si, "question_template": qi,
                               "values": 3})


SUITES = (
    Suite("needle", "needle", "one fact about a made-up name in real prose, a few distractors (contains)", text.TEXT_SOURCE,
          single),
    Suite("needle-multi", "needle", "three facts of one kind about one name, all asked for (set F1)", text.TEXT_SOURCE,
          multi),
)
