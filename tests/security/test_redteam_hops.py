"""Attacks on the lookups over the records (``Sandbox.lookup``), first found by a helper
session attacking the follow_link change (the assist is gone; the ``read`` lookup stays):
model code must not run inside the host's lookup, and a huge field value must not make a
lookup slow or wrong."""

from __future__ import annotations

import json
import time

import pytest

from rlm_runtime.sandbox import CellLimits, Sandbox

QUESTION = "What is the soil of bed 4?"  # bed 4's soil is s1


def test_a_finalizer_in_a_garbage_cycle_does_not_run_inside_a_lookup() -> None:
    """It keeps the cyclic collector off between cells: a generator left in a cycle, whose
    ``finally`` loops, runs only in a later cell, under that cell's timer, not in the host's
    lookup (which took 11 s and lost the worker's variables before)."""
    text = "".join(f"bed={i} companion={(i + 1) % 40} soil=s{i % 3}\n" for i in range(4000))
    code = ("recs = records()\nkept = 'still here'\ndef g(box):\n    try:\n        yield 1\n    finally:\n"
            "        n = 0\n        while n < 60000000:\n            n += 1\n"
            "box = []\nx = g(box)\nbox.append(x)\nfor _ in x:\n    break\ndel x, box\n")
    with Sandbox("default", CellLimits(cell_timeout_s=5, kill_grace_s=0.5), contexts=[text]) as sb:
        assert sb.execute(code).error is None
        for _ in range(3):
            began = time.perf_counter()
            found = sb.lookup("read", question=QUESTION, text="s2")
            assert time.perf_counter() - began < 2 and found["error"] == ""
            assert found["hop"] is not None and found["hop"]["target"] == "s1"
        assert sb.execute("print(kept)").stdout == "still here\n"


def test_the_lookups_kept_tables_cannot_be_reached_or_poisoned_by_code() -> None:
    """It keeps the tables the read lookup keeps (field names, value index, records by name) out
    of the model's reach: the attribute is refused, and records the code changes are its own
    copy, so a planted link never reaches the host's lookup."""
    text = "".join(f"bed={i} companion={(i + 1) % 40} soil=s{i % 3}\n" for i in range(40))
    with Sandbox(contexts=[text]) as sb:
        assert sb.execute("recs = records()").error is None
        assert sb.lookup("read", question=QUESTION, text="s2")["hop"]["target"] == "s1"  # tables built now
        refused = sb.execute("print(recs._tables)")
        assert refused.error is not None and "_tables" in refused.error
        poison = ("r = records()\nr[3]['companion'] = 'planted'\nr.append(r[0])\n"
                  "r2 = records()\nr2.find('4')[0]['soil'] = 'EVIL'\nprint(records().find('4')[0]['soil'])")
        assert sb.execute(poison).stdout == "s1\n"
        hop = sb.lookup("read", question=QUESTION, text="s2")["hop"]
        assert hop["start"] == "4" and hop["target"] == "s1"


def test_the_read_lookup_is_bounded_and_reads_only_the_records_as_parsed() -> None:
    """It answers ``read`` at once for an answer of the lookup's most text (cut, never
    compiled) and a field of megabytes, and from the text's records, not the ones the code
    changed: a value planted into the code's copy as the named record's does not pass for its
    own (it would make the host take the planted value for the one asked)."""
    big = "zz " * 1_000_000
    rows = [{"bell": f"b{i}", "tone": big if i == 3 else f"t{i % 4}", "founder": f"f{i}"} for i in range(50)]
    with Sandbox(contexts=["\n".join(json.dumps(r) for r in rows)]) as sb:
        assert sb.execute("recs = records()\nrecs[1]['tone'] = 'PLANTED'").error is None
        with pytest.raises(ValueError, match="over 20000"):  # the reader's declared bound: its caller cuts
            sb.lookup("read", question="What is the tone of b1?", text="t2 " * 10_000)
        for answer in (("t2 " * 10_000)[:20_000], "f1"):
            began = time.perf_counter()
            found = sb.lookup("read", question="What is the tone of b1?", text=answer)
            assert time.perf_counter() - began < 2 and found["error"] == ""
            assert found["hop"] is not None and found["hop"]["target"] == "t1" and found["hop"]["start"] == "b1"
        assert sb.lookup("read", question="What is the tone of b1?", text="It is t1.")["hop"] is None
        assert sb.lookup("read", question="What is the tone of b3?", text="t0")["hop"]["target"] == big.strip()[:500]
