"""Multi-hop: a chain of two or three facts, each found only through the one before.

A question names the first entity only. The first fact links it to a bridge entity (named
nowhere else but in the next fact), the last fact gives the answer. Many other chains of the
same relations, about other made-up names, are planted as distractors, so the answer cannot
be read off the last relation alone: the answer value occurs once in the context, the bridge
twice. Three domains, each with several wordings of each relation:

* people: A reports to B; B works in city C (three hops: A reports to B, B to C, C works in D);
* packages: package A depends on library B; B is maintained by person C;
* projects: project A is led by person B; B's badge number is N.
"""

from __future__ import annotations

import random

from rlm_runtime.eval.suites import text
from rlm_runtime.eval.suites.base import Generated, Suite

CITIES = ("Lisbon", "Oslo", "Tunis", "Quito", "Hanoi", "Perth", "Dakar", "Lima", "Riga", "Porto", "Bergen", "Malmo",
          "Turku", "Graz", "Ghent", "Leeds", "Cork", "Brno", "Kyoto", "Sapporo", "Accra", "Nairobi", "Denver", "Austin",
          "Boise", "Tampa", "Halifax", "Regina", "Darwin", "Hobart", "Nantes", "Lyon", "Basel", "Bern", "Kotor",
          "Izmir", "Cusco", "Recife", "Natal")

#: domain -> (link wordings {a}->{b}, value wordings {b}->{v}, question wordings (2 hops), question wordings (3 hops))
DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "people": (
        ("{a} reports to {b}.", "{b} is the manager of {a}.", "The supervisor of {a} is {b}."),
        ("{b} works in the {v} office.", "The {v} office is where {b} works.", "{b} is based in {v}."),
        ("In which city does the manager of {a} work?", "{a} reports to someone. Where is that person based?",
         "What city is {a}'s supervisor based in?"),
        ("In which city does the manager of {a}'s manager work?",
         "{a} reports to someone, who reports to someone else. Where is that second person based?"),
    ),
    "packages": (
        ("Package {a} depends on the library {b}.", "The library {b} is a dependency of package {a}.",
         "{a} cannot be installed without the library {b}."),
        ("The library {b} is maintained by {v}.", "{v} maintains the library {b}.", "Maintainer of {b}: {v}."),
        ("Who maintains the library that package {a} depends on?",
         "Package {a} has a dependency. Who is that dependency's maintainer?"),
        (),
    ),
    "projects": (
        ("Project {a} is led by {b}.", "{b} leads project {a}.", "The lead of project {a} is {b}."),
        ("{b} has badge number {v}.", "The badge number of {b} is {v}.", "Badge {v} belongs to {b}."),
        ("What is the badge number of the person who leads project {a}?",
         "Project {a} has a lead. What is that person's badge number?"),
        (),
    ),
}


def chains_for(length: int) -> int:
    """Distractor chains in a context of ``length`` characters: one per 2,000, 3 to 300."""
    return max(3, min(300, length // 2000))


def _values(rng: random.Random, domain: str, n: int, taken: set[str]) -> list[str]:
    if domain == "people":
        return [rng.choice(CITIES) for _ in range(n)]
    if domain == "packages":
        return text.people(rng, n, taken)
    out: list[str] = []
    while len(out) < n:
        v = str(rng.randint(10000, 99999))
        if v not in out:
            out.append(v)
    return out


def generate(rng: random.Random, length: int) -> Generated:
    domain = rng.choice(list(DOMAINS))
    links, values, q2, q3 = DOMAINS[domain]
    hops = 3 if q3 and rng.random() < 0.4 else 2
    n_chains = 1 + chains_for(length)
    taken: set[str] = set()
    if domain == "people":
        names = text.people(rng, n_chains * hops, taken)
    else:
        names = [n for n in text.made_up_names(rng, n_chains * hops, taken=taken)]
        if domain == "projects":
            names = [n if i % hops == 0 else p for i, (n, p) in enumerate(zip(names, text.people(rng, len(names), taken),
                                                                                strict=True))]
    vals = _values(rng, domain, n_chains, taken)
    answer = vals[0]
    # The answer value occurs once: distractor chains draw other values.
    for i in range(1, n_chains):
        while vals[i] == answer:
            vals[i] = _values(rng, domain, 1, taken)[0]
    facts: list[str] = []
    for c in range(n_chains):
        chain = names[c * hops:(c + 1) * hops]
        for a, b in zip(chain, chain[1:], strict=False):
            facts.append(rng.choice(links).format(a=a, b=b))
        facts.append(rng.choice(values).format(b=chain[-1], v=vals[c]))
    facts = [f[0].upper() + f[1:] for f in facts]
    budget = length - sum(len(f) + 1 for f in facts)
    lines = text.plant(text.prose_lines(rng, max(0, budget)), facts, rng)
    qi = rng.randrange(len(q3 if hops == 3 else q2))
    question = (q3 if hops == 3 else q2)[qi].format(a=names[0])
    return Generated(question, answer, "contains", text.join(lines),
                     metadata={"domain": domain, "hops": hops, "start": names[0], "bridges": names[1:hops],
                               "chains": n_chains, "question_template": qi})


SUITES = (
    Suite("multi-hop", "multi-hop", "two or three linked facts about made-up names, each found through the previous one "
          "(contains)", text.TEXT_SOURCE, generate),
)
