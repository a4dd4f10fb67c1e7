"""The core families over several text shapes and question wordings, split into dev and held-out.

``rlm eval make core --split dev|heldout`` (or ``needle``, ``aggregation``, ``multi-hop``
with ``--split``) writes these instead of the prose suites. Each task draws a domain of
records (``records.py``), a naming style for its keys, a text shape (``shapes.py``) and a
question template, and fills the context with records up to the length asked for. Gold
answers are exact and follow from the records:

* needle (lookup): a value of one record ("What is the rack of db-07?"); contains;
* aggregation: how many records carry a label (numeric), or the most common label (contains);
* multi-hop: a value of the record that a record's reference names, two hops from the
  question's key ("What is the office of Ada Kamir's manager?"), never the same as the
  start's own value of that field when another start allows it; contains.

The split is by shape and by template, so no (shape, template) pair is in both parts:

* dev: shapes ``line``, ``csv``, ``markdown``; templates 0, 2, 4 of each family's list;
* heldout: shapes ``block``, ``tsv``, ``jsonl``, ``prose``; templates 1, 3, 5.

A held-out set is for measuring a lever once it is final; a set whose trajectories were read
is no longer held out. Without ``--split`` nothing here is used and the suites write what
they always wrote.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rlm_runtime.eval.suites.base import Generated, Suite
from rlm_runtime.eval.suites.records import DOMAINS, NAMING, Domain, build
from rlm_runtime.eval.suites.shapes import SHAPES, Record


@dataclass(frozen=True)
class Split:
    """A part of the shaped suites: the shapes and the template numbers its tasks draw from."""

    shapes: tuple[str, ...]
    templates: tuple[int, ...]


SPLITS: dict[str, Split] = {
    "dev": Split(("line", "csv", "markdown"), (0, 2, 4)),
    "heldout": Split(("block", "tsv", "jsonl", "prose"), (1, 3, 5)),
}

LOOKUP = (
    "What is the {field} of {key}?",
    "Which {field} does {key} have?",
    "Tell me the {field} of {key}.",
    "Look up the {noun} {key}: what {field} is recorded for it?",
    "Give the {field} listed for {key}.",
    "In these records, {key} has a {field}. What is it?",
)
COUNT = (
    "How many {plural} have the {field} {label}?",
    "Count the {plural} whose {field} is {label}.",
    "What number of {plural} are listed with {field} {label}?",
    "How many records give {label} as the {field}?",
    "Give the count of {plural} with {field} {label}.",
    "Of all the {plural}, how many have {label} for their {field}?",
)
TOP = (
    "Which {field} is the most common among the {plural}?",
    "What {field} do the most {plural} have?",
    "Name the {field} that occurs most often across the {plural}.",
    "Across all {plural}, which {field} value appears the most times?",
    "Which {field} is shared by more {plural} than any other?",
    "Among the {plural}, what is the commonest {field}?",
)
HOPS = (
    "What is the {field} of the {ref} of {key}?",
    "{key} has a {ref}. What is that {noun}'s {field}?",
    "Find the {ref} of {key}, then give the {field} of that {noun}.",
    "Which {field} belongs to the {noun} that is the {ref} of {key}?",
    "Follow the {ref} of {key}: what {field} is recorded there?",
    "Tell me the {field} of {key}'s {ref}.",
)
TEMPLATES = {"lookup": LOOKUP, "count": COUNT, "most_common": TOP, "multi-hop": HOPS}


def _setup(rng: random.Random, split: str, length: int) -> tuple[Domain, list[Record], str, int, dict[str, Any]]:
    part = SPLITS[split]
    domain = DOMAINS[rng.choice(sorted(DOMAINS))]
    style = rng.choice(sorted(NAMING))
    shape = rng.choice(part.shapes)
    records = build(rng, domain, style, SHAPES[shape], length)
    meta = {"split": split, "shape": shape, "domain": domain.plural, "naming": style, "records": len(records)}
    return domain, records, SHAPES[shape].render(records), rng.choice(part.templates), meta


def _ask(template: str, **fields: str) -> str:
    q = template.format(**fields)
    return q[0].upper() + q[1:]


def lookup(split: str, rng: random.Random, length: int) -> Generated:
    domain, records, context, ti, meta = _setup(rng, split, length)
    record = rng.choice(records)
    # A plain value, not the label: a label of five or six is too often right by chance.
    field = rng.choice([name for name, _ in domain.values])
    key = record[domain.noun]
    q = _ask(LOOKUP[ti], field=field, key=key, noun=domain.noun)
    return Generated(q, record[field], "contains", context,
                     metadata={**meta, "question": "lookup", "question_template": ti, "key": key, "field": field})


def aggregation(split: str, rng: random.Random, length: int) -> Generated:
    domain, records, context, ti, meta = _setup(rng, split, length)
    counts = Counter(r[domain.label] for r in records)
    meta = {**meta, "field": domain.label, "counts": dict(counts), "question_template": ti}
    if rng.random() < 0.7:
        label = rng.choice(sorted(counts))
        q = _ask(COUNT[ti], plural=domain.plural, field=domain.label, label=label)
        return Generated(q, counts[label], "numeric", context, metadata={**meta, "question": "count", "label": label})
    q = _ask(TOP[ti], plural=domain.plural, field=domain.label)
    return Generated(q, counts.most_common(1)[0][0], "contains", context, metadata={**meta, "question": "most_common"})


def multihop(split: str, rng: random.Random, length: int) -> Generated:
    domain, records, context, ti, meta = _setup(rng, split, length)
    by_key = {r[domain.noun]: r for r in records}
    field = rng.choice([name for name, _ in domain.values])
    # A start whose own value differs from the answer, so stopping after one hop scores 0.
    starts = [r for r in records if r[field] != by_key[r[domain.ref]][field]]
    start = rng.choice(starts or records)
    bridge = start[domain.ref]
    q = _ask(HOPS[ti], field=field, ref=domain.ref, key=start[domain.noun], noun=domain.noun)
    return Generated(q, by_key[bridge][field], "contains", context,
                     metadata={**meta, "question": "multi-hop", "question_template": ti, "hops": 2,
                               "start": start[domain.noun], "bridges": [bridge], "ref": domain.ref, "field": field})


_SOURCE = "records drawn per task from the word and syllable lists in the code (no outside text)"
FAMILIES = {"needle": lookup, "aggregation": aggregation, "multi-hop": multihop}
_WHAT = {"needle": "look up one field of one record (contains)",
         "aggregation": "count records with a label (numeric 0.75^|diff|) or name the commonest label (contains)",
         "multi-hop": "a field of the record another record refers to, two hops (contains)"}


def shaped_suite(name: str, split: str) -> Suite:
    """The shaped counterpart of core suite ``name`` (``needle``, ``aggregation``, ``multi-hop``) for ``split``."""
    generate = FAMILIES[name]
    return Suite(name, name, f"{_WHAT[name]}, over text shapes; {split} part", _SOURCE,
                 lambda rng, length: generate(split, rng, length))


def describe() -> list[str]:
    """One line per split: its shapes and templates (for ``rlm eval suites``)."""
    return [f"{name}: shapes {', '.join(p.shapes)}; question templates {', '.join(map(str, p.templates))} of each "
            "family's six" for name, p in SPLITS.items()]
