"""Slots: lines that state several facts each between the same words, read into fields."""

from __future__ import annotations

import random
import time

from rlm_runtime.context import records, slots

SHIPS = [(f"ship-{i:02d}", random.Random(i).choice(["Lagos", "Tromso", "Perth"]), f"dock {i % 7}",
          random.Random(i * 7).choice(["iron ore", "wheat", "cars"]), f"{2 + i % 5}.{i % 10} t")
         for i in range(30)]


def shipping_log() -> str:
    return "".join(f"[09:{k:02d}] ARRIVAL vessel {n} from {port} berthed at {dock}; unloading {cargo} (draft {draft})\n"
                   for k, (n, port, dock, cargo, draft) in enumerate(SHIPS))


def labelled_cells() -> str:
    return "".join(f"{n} | port {port} | {dock} | cargo {cargo}\n" for n, port, dock, cargo, _ in SHIPS)


def test_it_reads_a_log_line_into_named_fields():
    """It names each value of a log line by the words before it, the line's start included."""
    recs = records.parse_text(shipping_log())
    assert recs.shape == "slots"
    first = recs[0]
    assert first["start"] == "09:00"
    assert first["arrival vessel"] == "ship-00"
    assert first["from"] == SHIPS[0][1]
    assert first["unloading"] == SHIPS[0][3]
    assert recs.count("from", "Perth") == sum(s[1] == "Perth" for s in SHIPS)
    assert recs.find("ship-07")[0]["from"] == SHIPS[7][1]


def test_cells_that_name_themselves_are_not_a_table():
    """It reads "x | port Lagos | cargo wheat" lines as slots, not as a table whose header is the first ship."""
    recs = records.parse_text(labelled_cells())
    assert recs.shape == "slots"
    assert len(recs) == len(SHIPS)
    assert recs.tally("cargo") == dict(records.Counter(s[3] for s in SHIPS).most_common())
    assert recs.where("port", "Tromso")[0]["start"] == next(s[0] for s in SHIPS if s[1] == "Tromso")


def test_a_value_on_most_lines_stays_a_value():
    """It keeps a value most lines share ("status up" on 80% of them) a value, not a frame word."""
    lines = "".join(f"host h{i} status {'up' if i % 5 else 'down'} rack r{i % 4}\n" for i in range(40))
    recs = records.parse_text(lines)
    assert recs.shape == "slots"
    assert recs.tally("status") == {"up": 32, "down": 8}


def test_ordinary_lines_are_not_slots():
    """It leaves lines of ordinary prose alone."""
    story = ["The ferry left before dawn with the mail on board.",
             "Nobody on the quay had seen the captain since Tuesday.",
             "By noon the wind had turned and the gulls came inland.",
             "A boy ran along the harbour wall shouting the news.",
             "The harbour master wrote three letters and sent none.",
             "Rain came in the evening and the lamps were lit early."]
    assert slots.mine(story) is None
    assert records.parse_text("\n".join(story)).shape == "paragraphs"


def test_a_hostile_line_is_kept_whole_and_fast():
    """It keeps a line of a million words whole, in text, and reads the others."""
    text = shipping_log() + "[10:00] ARRIVAL vessel " + "x " * 1_000_000 + "\n"
    started = time.perf_counter()
    recs = records.parse_text(text)
    assert time.perf_counter() - started < 20
    assert recs.shape == "slots" and len(recs) == len(SHIPS) + 1
    assert recs[-1]["text"].startswith("[10:00] ARRIVAL vessel x x")
