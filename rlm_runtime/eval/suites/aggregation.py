"""Aggregation (OOLONG-like): labelled items spread through real prose; count or classify them.

Each task draws a domain (support tickets, product reviews, sightings), a line format for its
items (one format per task, so one pattern finds them all, but a different one from task to
task) and a number of items that grows with the length. Questions: how many items carry a
label (numeric, scored 0.75^|gold - prediction|), or which label is the most common (exact;
the counts are drawn so that one label wins clearly).
"""

from __future__ import annotations

import random
from collections import Counter

from rlm_runtime.eval.suites import text
from rlm_runtime.eval.suites.base import Generated, Suite, pick

#: (item noun, plural, labels, word for a label).
DOMAINS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("ticket", "tickets", ("billing", "shipping", "login", "refund", "hardware", "outage"), "category"),
    ("review", "reviews", ("positive", "negative", "neutral", "mixed"), "sentiment"),
    ("sighting", "sightings", ("heron", "kestrel", "otter", "badger", "marten"), "species"),
)
#: Item line formats; ``{id}`` is a number unique in the task.
FORMATS = (
    "{Noun} #{id} [{label}]: {words}.",
    "{Noun} {id} was filed under {label} ({words}).",
    "Record {id} | {word}={label} | {words}",
    "[{noun}-{id}] {word}: {label}; note: {words}.",
)
#: The regex of each format that finds its items and their label (for checks and tests).
FORMAT_PATTERNS = (
    r"^{Noun} #\d+ \[(\w+)\]: ",
    r"^{Noun} \d+ was filed under (\w+) \(",
    r"^Record \d+ \| {word}=(\w+) \| ",
    r"^\[{noun}-\d+\] {word}: (\w+); note: ",
)
COUNT_QUESTIONS = (
    "How many {plural} are labelled {label}?",
    "Count the {plural} whose {word} is {label}. How many are there?",
    "What is the number of {label} {plural} in the text?",
    "In total, how many {plural} have the {word} {label}?",
)
TOP_QUESTIONS = (
    "Which {word} occurs most often among the {plural}?",
    "What is the most common {word} of the {plural}?",
    "Among all {plural}, which {word} appears the most times?",
)


def item_pattern(format_index: int, noun: str, word: str) -> str:
    return FORMAT_PATTERNS[format_index].format(Noun=noun.capitalize(), noun=noun, word=word)


def items_for(length: int) -> int:
    """Items in a context of ``length`` characters: about one per 400 characters, 12 to 2,500."""
    return max(12, min(2500, length // 400))


def generate(rng: random.Random, length: int) -> Generated:
    noun, plural, labels, word = rng.choice(DOMAINS)
    fi, fmt = pick(rng, FORMATS)
    n = items_for(length)
    # Weights with a clear winner, so "most common" has one answer.
    weights = [rng.uniform(0.5, 1.5) for _ in labels]
    top = rng.randrange(len(labels))
    weights[top] = max(weights) * 1.6
    drawn = rng.choices(range(len(labels)), weights=weights, k=n)
    counts = Counter(labels[i] for i in drawn)
    ranked = counts.most_common()
    while len(ranked) > 1 and ranked[0][1] == ranked[1][1]:  # break a tie by one more item of the leader
        drawn.append(labels.index(ranked[0][0]))
        counts = Counter(labels[i] for i in drawn)
        ranked = counts.most_common()
    ids = rng.sample(range(1000, 1000 + 10 * len(drawn)), len(drawn))
    items = [fmt.format(Noun=noun.capitalize(), noun=noun, word=word, id=i, label=labels[k], words=text.words(rng, rng.randint(4, 9)))
             for i, k in zip(ids, drawn, strict=True)]
    budget = length - sum(len(x) + 1 for x in items)
    lines = text.plant(text.prose_lines(rng, max(0, budget)), items, rng)
    meta = {"domain": plural, "format_template": fi, "items": len(items), "counts": dict(counts),
            "item_pattern": item_pattern(fi, noun, word)}
    if rng.random() < 0.7:
        label = rng.choice([lab for lab in labels if counts[lab] > 0])
        qi, q = pick(rng, COUNT_QUESTIONS)
        meta.update(question="count", label=label, question_template=qi)
        return Generated(q.format(plural=plural, label=label, word=word), counts[label], "numeric", text.join(lines),
                         metadata=meta)
    qi, q = pick(rng, TOP_QUESTIONS)
    meta.update(question="most_common", question_template=qi)
    return Generated(q.format(plural=plural, word=word), ranked[0][0], "contains", text.join(lines), metadata=meta)


SUITES = (
    Suite("aggregation", "aggregation", "count labelled items spread through prose, or name the commonest label "
          "(numeric 0.75^|diff|, contains)", text.TEXT_SOURCE, generate),
)
