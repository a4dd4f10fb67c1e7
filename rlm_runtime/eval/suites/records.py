"""The records the shaped suites write: entities with fields, in a few domains and naming styles.

A domain gives a record's fields: its key (the entity), a label (a lower-case word of a few,
for counting), a reference to another record of the same domain (for two hops) and two plain
values. A naming style says how keys look, so the suites do not only use the capitalised
invented names of the prose suites: lower-case ids (``kamir-042``), codes (``QX-4821``),
several lower-case words (``amber falcon``), invented names, and people's full names.
``build`` draws records until their text in a given shape reaches a target length.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from rlm_runtime.eval.suites import text
from rlm_runtime.eval.suites.multihop import CITIES
from rlm_runtime.eval.suites.shapes import Record, Shape

ValueMaker = Callable[[random.Random], str]


@dataclass(frozen=True)
class Domain:
    """What one record is about: its fields and how their values are drawn."""

    noun: str  # also the key field's name
    plural: str
    label: str
    labels: tuple[str, ...]
    ref: str
    values: tuple[tuple[str, ValueMaker], tuple[str, ValueMaker]]

    def fields(self) -> list[str]:
        return [self.noun, self.label, self.ref, *(name for name, _ in self.values)]


def _city(rng: random.Random) -> str:
    return rng.choice(CITIES)


_TEAMS = ("payments", "search", "platform", "data", "identity", "edge", "storage", "billing")
_WORDS_A = ("amber", "north", "silent", "little", "iron", "cedar", "copper", "hollow", "bright", "quiet", "rusty",
            "velvet", "winter", "salt", "stone", "swift", "pale", "olive", "misty", "lunar")
_WORDS_B = ("harbour", "falcon", "ledger", "meadow", "signal", "lantern", "orchard", "anchor", "beacon", "bridge",
            "comet", "ember", "garden", "heron", "island", "kettle", "marble", "needle", "pepper", "quarry")

DOMAINS: dict[str, Domain] = {d.plural: d for d in (
    Domain("employee", "employees", "department", ("billing", "research", "legal", "support", "design", "logistics"),
           "manager", (("office", _city), ("badge", lambda r: str(r.randint(10000, 99999))))),
    Domain("package", "packages", "license", ("mit", "apache", "gpl", "bsd", "mpl"), "dependency",
           (("maintainer", lambda r: text.people(r, 1)[0]), ("release", lambda r: f"{r.randint(2015, 2025)}-{r.randint(1, 12):02d}"))),
    Domain("host", "hosts", "status", ("up", "down", "degraded", "draining", "maintenance"), "failover",
           (("rack", lambda r: f"r{r.randint(1, 40)}-{r.choice('abcd')}"), ("owner", lambda r: r.choice(_TEAMS) + " team"))),
    Domain("vessel", "vessels", "cargo", ("grain", "timber", "coal", "salt", "cement", "wool"), "escort",
           (("home port", _city), ("berth", lambda r: f"B-{r.randint(1, 99)}"))),
)}


def _lower_id(rng: random.Random) -> str:
    return text.made_up_names(rng, 1, syllables=(2, 2))[0].lower() + f"-{rng.randint(0, 999):03d}"


def _code(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(2)) + f"-{rng.randint(1000, 9999)}"


def _words(rng: random.Random) -> str:
    return " ".join([rng.choice(_WORDS_A), rng.choice(_WORDS_B), *([rng.choice(_WORDS_B)] if rng.random() < 0.5 else [])])


#: naming style -> a maker of one key (``names`` makes them distinct).
NAMING: dict[str, ValueMaker] = {
    "lower-id": _lower_id,
    "code": _code,
    "words": _words,
    "invented": lambda r: text.made_up_names(r, 1)[0],
    "people": lambda r: text.people(r, 1)[0],
}


def names(rng: random.Random, style: str, taken: set[str]) -> str:
    """One key of ``style`` not in ``taken`` (added to it).

    A style has room for some thousands of keys (``invented`` ~28,000, ``words`` ~8,400);
    after 20 draws in a row that were taken, a key is two draws joined, so long contexts
    (up to 50M characters) still get distinct keys.
    """
    misses = 0
    while True:
        name = NAMING[style](rng)
        if misses >= 20:
            name += ("-" if style in ("lower-id", "code") else " ") + NAMING[style](rng)
        if name not in taken:
            taken.add(name)
            return name
        misses += 1


def build(rng: random.Random, domain: Domain, style: str, shape: Shape, length: int, *, least: int = 4) -> list[Record]:
    """Records of ``domain`` whose text in ``shape`` is about ``length`` characters (at least ``least``).

    One label is the most common by a clear margin (so "which is the most common" has one
    answer); every record's reference names another record.
    """
    weights = [rng.uniform(0.5, 1.5) for _ in domain.labels]
    weights[rng.randrange(len(weights))] = max(weights) * 1.6
    taken: set[str] = set()
    records: list[Record] = []
    size = len(shape.head(domain.fields()))
    while True:
        key = names(rng, style, taken)
        # The reference is drawn once all keys exist; its own key stands in for its length meanwhile.
        record = {domain.noun: key, domain.label: rng.choices(domain.labels, weights=weights)[0], domain.ref: key,
                  **{name: make(rng) for name, make in domain.values}}
        piece = len(shape.row(record))
        if size + piece > length and len(records) >= least:
            break
        records.append(record)
        size += piece
    for i, record in enumerate(records):
        j = rng.randrange(len(records) - 1)
        record[domain.ref] = records[j if j < i else j + 1][domain.noun]
    ranked = Counter(r[domain.label] for r in records).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:  # break a tie: one of the runner-up's records joins the leader
        next(r for r in records if r[domain.label] == ranked[1][0])[domain.label] = ranked[0][0]
    return records
