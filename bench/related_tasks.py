"""Questions whose answer is in a memory note linked to the one search finds (issue 43, item 5):
what ``related(id)`` does to answers, as ``rlm eval`` tasks over a memory store each.

    python bench/related_tasks.py --n 20 --seed 3 -o DIR
    rlm eval DIR/tasks.jsonl -m local:qwen2.5-coder-1.5b --allow-memory --out DIR/run

Each task's store holds about forty notes of facts about made-up projects (an attribute and
its value a note), among them the note the question's words find ("The launch date of Orchid
is March 3.") and a later note that corrects it, linked to it the way a person links them
(``rlm memory link NEW OLD contradicts``), written in words the question does not use ("Moved
after the design review: May 12."). The gold answer is the corrected value: an answer from
the first note alone is wrong. Some of the other projects' notes are corrected the same way,
so a link is no tell by itself. Scored ``contains``. These are generated text, development
data: the family (an answer one link away), not a held-out format.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

PROJECTS = ["Orchid", "Basalt", "Juniper", "Tamarack", "Halyard", "Quillon", "Marram", "Sorrel", "Ostrava", "Pewter",
            "Lantana", "Corvid", "Fescue", "Gimbal", "Heron", "Ibex", "Kestrel", "Lodestar", "Mistral", "Nettle"]
ATTRIBUTES = {
    "launch date": ["March 3", "May 12", "June 30", "August 14", "September 2", "October 21", "November 8", "January 19"],
    "budget owner": ["Dana Whitfield", "Ravi Menon", "Ines Carvalho", "Tom Okafor", "Mei Tanaka", "Lars Eklund"],
    "staging host": ["stg-04", "stg-11", "stg-17", "stg-22", "stg-31", "stg-38"],
    "review room": ["Room 4B", "Room 2A", "Room 7C", "Room 5D", "Room 3E", "Room 6F"],
    "vendor": ["Keller Systems", "Northwind Labs", "Arcadia Tools", "Bluefin Data", "Corsa Networks", "Ember Works"],
}
#: The values corrections give: none of them in any other note, so only the linked note holds the answer.
NEW_VALUES = {
    "launch date": ["April 9", "July 27", "December 5", "February 11", "May 29"],
    "budget owner": ["Priya Natarajan", "Owen Gallagher", "Sofia Lindqvist", "Kwame Mensah", "Hana Sato"],
    "staging host": ["stg-52", "stg-63", "stg-74", "stg-85", "stg-96"],
    "review room": ["Room 9G", "Room 8H", "Room 1J", "Room 9K", "Room 8L"],
    "vendor": ["Driftwood Partners", "Granite Analytics", "Heliotrope Inc", "Larchmont Forge", "Kilnworth Ltd"],
}
#: How a correction says it, in words no question uses.
CORRECTIONS = ["Moved after the design review: {new}.", "Changed at Thursday's sync, now {new}.",
               "Correction, agreed with finance: {new}.", "Updated per the steering group: {new}.",
               "Revised after the audit: {new}.", "Swapped last week; it is {new} from here on."]


def store_for(task: int, rng: random.Random, path: Path) -> tuple[str, str]:
    """Write one task's store at ``path``; return (question, gold answer)."""
    from rlm_runtime.memory import MemoryStore

    projects = rng.sample(PROJECTS, 8)
    facts = [(p, a, rng.choice(vs)) for p in projects for a, vs in ATTRIBUTES.items()]
    rng.shuffle(facts)
    asked = facts[0]
    corrected = [asked, *rng.sample(facts[1:], 4)]
    with MemoryStore(path) as st:
        ids: dict[tuple[str, str], int] = {}
        for project, attribute, value in facts:
            [ids[(project, attribute)]] = st.add_text(f"The {attribute} of {project} is {value}.")
        answer = ""
        for project, attribute, _value in corrected:
            new = rng.choice(NEW_VALUES[attribute])
            [fix] = st.add_text(rng.choice(CORRECTIONS).format(new=new), dedup=False)
            st.link(fix, ids[(project, attribute)], "contradicts")
            if (project, attribute) == asked[:2]:
                answer = new
    return f"What is the {asked[1]} of {asked[0]}?", answer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    (args.out / "stores").mkdir(parents=True, exist_ok=True)
    tasks = []
    for k in range(args.n):
        task_id = f"related-{k:02d}"
        question, answer = store_for(k, rng, args.out / "stores" / f"{task_id}.db")
        tasks.append({"id": task_id, "question": question, "context": f"memory:stores/{task_id}.db", "answer": answer,
                      "scorer": "contains", "metadata": {"family": "multi-hop", "link": "contradicts"}})
    (args.out / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    print(f"{len(tasks)} tasks in {args.out / 'tasks.jsonl'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
