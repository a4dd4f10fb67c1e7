"""Red team of issue 40's pipeline: the generic ``lookup`` frame and the loop's assists.

A worker that escaped the Python guards answers the host's lookups with plain data crafted
to pass the frame's checks (a reply of another reader's shape, nan, a 64-bit int, a key
named ``error``, twenty thousand strings near the frame's cap): each is a failed lookup and
a new worker. An assist's arguments over their bounds are a failed lookup, never an
exception. Model replies are hostile: one line of a hundred thousand ``Final(...)`` calls,
``\\r`` line breaks, prose said twice, the question copied back, megabytes of fences and
FINALs; the run keeps its question, stays bounded, and a secret planted in the host (an
environment variable, a file outside the contexts) reaches no message, trace event or answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hostile import Attacker

from rlm_runtime import Session
from rlm_runtime.assist import Host, lookups
from rlm_runtime.assist.base import Turn
from rlm_runtime.budget import RunLimits
from rlm_runtime.config import paths_from_env
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.prompts import Prompts
from rlm_runtime.sandbox import supervisor
from rlm_runtime.sandbox.readers import TEXT_MAX

ESCAPE = """\
import ctypes
ctypes.pythonapi.PyRun_SimpleString({src!r}.encode())
print('patched')
"""
PRELUDE = "import sys\nW = sys.modules['rlm_runtime.sandbox.worker'].Worker\n"


def patch_lookup(attacker: Attacker, body: str) -> None:
    """Replace the live worker's ``Worker.lookup`` with ``def lookup(self, msg): <body>``."""
    src = PRELUDE + f"def evil(self, msg):\n    {body}\nW.lookup = evil\n"
    assert attacker.run(ESCAPE.format(src=src)).stdout == "patched\n"


def _answer(reply: str) -> str:
    return f"return {{'op': 'looked_up', 'seq': msg['seq'], 'reply': {reply}, 'error': ''}}"


#: reader -> (arguments, name -> a replacement body answering it with crafted plain data).
CRAFTED: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "count": ({"pattern": "needle"}, {
        "nan": _answer("{'count': float('nan')}"),
        "inf": _answer("{'count': float('inf')}"),
        "int-64-bits": _answer("{'count': 2**64 - 1}"),
        "error-key": _answer("{'count': 1, 'error': ''}"),
        "lines-shape": _answer("{'lines': [['', 1, 'a needle']], 'count': 1}"),
        "old-seq": "return {'op': 'looked_up', 'seq': msg['seq'] - 1, 'reply': {'count': 2}, 'error': ''}",
    }),
    "tally": ({"pattern": r"(\w+)"}, {
        "map": _answer("{'tally': {'a': 1}, 'count': 1}"),
        "float": _answer("{'tally': [['a', 1.5]], 'count': 1}"),
        "near-cap": _answer("{'tally': [['x' * 50, 1]] * 10000, 'count': 1}"),
        "over-cap": _answer("{'tally': [['\\ud800' * 26, 1]] * 10000, 'count': 1}"),
        "count-shape": _answer("{'count': 1}"),
    }),
    "read": ({"question": "which office?", "text": "x"}, {
        "list": _answer("{'hop': ['a', 'b', 'c', 'n', 1, 'f', 't', 'o']}"),
        "line-text": _answer("{'hop': dict.fromkeys(['start', 'link', 'value', 'name_field', 'field', 'target', "
                             "'own'], 'a') | {'line': '1'}}"),
        "line-bool": _answer("{'hop': dict.fromkeys(['start', 'link', 'value', 'name_field', 'field', 'target', "
                             "'own'], 'a') | {'line': True}}"),
        "extra-key": _answer("{'hop': dict.fromkeys(['start', 'link', 'value', 'name_field', 'line', 'field', "
                             "'target', 'own', 'error'], 'a')}"),
        "deep": _answer("{'hop': {'start': [[['a']]]}}"),
    }),
}
CASES = [(reader, name) for reader, (_, lies) in CRAFTED.items() for name in lies]


@pytest.mark.parametrize(("reader", "case"), CASES, ids=[f"{r}-{c}" for r, c in CASES])
def test_crafted_plain_lookup_reply_is_a_failed_lookup(escaped: Attacker, reader: str, case: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """It denies plain data not of the asked reader's shape any effect: an error, empty fields, a new worker."""
    monkeypatch.setattr(supervisor, "_LOOKUP_TIMEOUT_S", 3.0)
    sandbox = escaped.sandbox
    sandbox.add_context("a needle\nno\nneedle two\n")
    sandbox.start()
    assert sandbox._worker is not None
    pid = sandbox._worker.pid
    args, lies = CRAFTED[reader]
    patch_lookup(escaped, lies[case])
    got = sandbox.lookup(reader, **args)
    fields = set(sandbox_fields(reader))
    assert got["error"] and set(got) == fields | {"error"}
    assert all(got[k] in ([], 0, None) for k in fields)
    assert sandbox._worker is not None and sandbox._worker.pid != pid
    after = sandbox.execute("print(1)")
    assert after.worker_restarted and any("killed" in w for w in after.warnings)
    assert sandbox.lookup("count", pattern="needle") == {"count": 2, "error": ""}


def sandbox_fields(reader: str) -> list[str]:
    from rlm_runtime.sandbox.readers import READERS

    return list(READERS[reader].reply.fields)


def test_failed_lookups_share_no_list(escaped: Attacker) -> None:
    """It keeps a failed lookup's empty lists its own: changing one changes no later failed lookup."""
    sandbox = escaped.sandbox
    sandbox.add_context("a needle\n")
    first = sandbox.lookup("lines", pattern="(?=x)")
    assert first["error"] and first["lines"] == []
    first["lines"].append(("", 1, "planted"))
    assert sandbox.lookup("lines", pattern="(?=y)")["lines"] == []
    assert sandbox.lookup("tally", pattern="(?=y)")["tally"] == []


def _host(sandbox: Any, query: str) -> Host:
    return Host(query=query, prompts=Prompts(paths_from_env().brain_dirs), lookup=sandbox.lookup,
                emit=lambda e: None)


def test_arguments_over_their_bounds_are_a_failed_lookup(escaped: Attacker) -> None:
    """It denies an assist's pattern or text over the bounds (or not UTF-8) an exception: a failed lookup."""
    sandbox = escaped.sandbox
    sandbox.add_context("a needle\nno\n")
    host = _host(sandbox, "which needle? " * 5000)
    assert lookups.count(host, "needle " * 5000) is None
    assert lookups.lines(host, "n" * (TEXT_MAX + 1)) == ([], 0)
    assert lookups.tally(host, "(\ud800)") == ({}, 0)
    assert lookups.misread(host, "y" * (TEXT_MAX * 3)) is None
    assert all(len(seen) <= 200 for seen in host.looked) and len(host.looked) <= 20
    assert lookups.count(host, "needle") == 1


# --------------------------------------------------------------------- replies


def _trace(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


QUESTION = "Which office does the boss of person3 have?"
PROSE = "I am still looking, let me check the records."
HOSTILE = [
    PROSE, PROSE, PROSE,
    "```python\nr = records()\nprint(len(r))\n```",
    f"FINAL({QUESTION})",
    "```python\n" + "Final(1);" * 2000 + "\n```",
    "\u2028\x00```python\n" + "(" * 5000 + "\n```\nFINAL(" * 3 + "```python\nprint(open('/etc/hostname').read())\n```",
    "```python\n" + "x = [" * 150 + "]" * 150 + "\nFinal(x)\n```" + "\n```\n" * 20_000,
    PROSE, "another long paragraph " * 2000, PROSE,
    f"```python\nFINAL({QUESTION!r})\n```",
]


def test_hostile_replies_keep_the_question_and_leak_nothing(tmp_path: Path, secret: dict[str, str]) -> None:
    """It keeps the system prompt and question in every prompt, bounded, with the host's secret nowhere."""
    text = tmp_path / "people.txt"
    text.write_text("".join(f"name: person{i}\nboss: person{i + 1}\noffice: room {i}\n\n" for i in range(60)))
    client = ScriptedClient(HOSTILE)
    trace = tmp_path / "trace.jsonl"
    limits = RunLimits(max_iterations=len(HOSTILE) + 2, max_wall_s=120, max_consecutive_errors=50, assists="small")
    with Session(client, contexts=[text], limits=limits, trace=trace) as session:
        result = session.ask(QUESTION)
    events = _trace(trace)
    assert [e for e in events if e["type"] == "iteration"]  # the run went through every hostile reply
    system = client.prompts[0][0]["content"]
    budget = 24 * limits.feedback_chars + len(system) + 50_000
    for prompt in client.prompts:
        assert prompt[0] == {"role": "system", "content": system}
        assert QUESTION in prompt[1]["content"]
        assert sum(len(m["content"]) for m in prompt) < budget
    turn_fields = set(Turn.__dataclass_fields__)
    for event in events:
        if event["type"] == "assist":
            assert set(event.get("changed", [])) <= turn_fields and len(json.dumps(event)) < 6000
        if event["type"] == "answer_check":
            assert len(event["answer"]) <= 200 and len(json.dumps(event)) < 6000
    seen = json.dumps(client.prompts) + trace.read_text(encoding="utf-8") + repr(result.answer) + repr(result.error)
    assert secret["value"] not in seen and secret["path"] not in seen
