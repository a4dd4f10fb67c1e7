"""Context types and always-on contexts (``registry/types.py``, ``registry/always.py``): a type
per registered context with its load policy, the identity ones (and those an ``always`` list
names) in every question's system prompt within a budget, under the caller's roots."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from rlm_runtime import Session
from rlm_runtime.cli import main
from rlm_runtime.config import paths_from_env
from rlm_runtime.errors import ConfigError, ContextError, DamagedContext, RegistryError
from rlm_runtime.llm.scripted import ScriptedClient
from rlm_runtime.registry import Registry
from rlm_runtime.registry.always import gather

ME = "I am Noor, a hydrologist. Give flows in cubic metres a second."


class Systems:
    """A scripted model answering 'ok' that keeps each system prompt it was sent."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.seen.append(str(messages[0]["content"]))
        return "```repl\nFINAL('ok')\n```"


@pytest.fixture
def registry() -> Registry:
    with Registry.open() as reg:
        yield reg


def test_types_are_set_listed_and_default_by_kind(registry: Registry, tmp_path: Path) -> None:
    """It gives a context the type asked, defaults a store to memory and anything else to document, lists by type,
    changes a type, and refuses a name that is no type."""
    (tmp_path / "plan.md").write_text("the plan\n")
    me = registry.add(ME, kind="text", name="me", type="identity")
    plan = registry.add(tmp_path / "plan.md")
    assert (me.type, plan.type) == ("identity", "document")
    assert [e.id for e in registry.list(type="identity")] == [me.id]
    assert registry.set_type(plan.id, "project").type == "project"
    assert [e.id for e in registry.list(type="project")] == [plan.id] and registry.get(plan.id).to_json()["type"] == "project"
    assert [e.id for e in registry.always()] == [me.id]
    with pytest.raises(RegistryError, match="not a context type"):
        registry.set_type(plan.id, "secret-type")
    with pytest.raises(RegistryError, match="not a context type"):
        registry.list(type="nope")


def test_a_type_from_elsewhere_is_damage(registry: Registry) -> None:
    """It calls a context damaged whose type row holds a value this version never writes."""
    me = registry.add(ME, kind="text", name="me", type="identity")
    conn = sqlite3.connect(paths_from_env().registry)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("UPDATE context_types SET type = 'root' WHERE id = ?", (me.id,))
    conn.commit()
    conn.close()
    with pytest.raises(DamagedContext, match="context_types.type"):
        registry.get(me.id)


def test_time_to_live(registry: Registry, tmp_path: Path) -> None:
    """It probes a temporal file again once a day has passed, and refuses a tool result past its hour as expired."""
    (tmp_path / "week.md").write_text("standup at nine\n")
    week = registry.add(tmp_path / "week.md", type="temporal")
    result = registry.add("exit code 0, 12 files changed", kind="text", name="ci run", type="tool_result")
    old = time.time() - 2 * 24 * 3600
    conn = sqlite3.connect(paths_from_env().registry)
    conn.execute("UPDATE contexts SET refreshed = ? WHERE id IN (?, ?)", (old, week.id, result.id))
    conn.commit()
    conn.close()
    assert registry.resolve(week.id).path == (tmp_path / "week.md").resolve()
    assert registry.get(week.id).refreshed > old + 24 * 3600
    with pytest.raises(ContextError, match="has expired"):
        registry.resolve(result.id)


def test_gather_budgets_cuts_and_names(registry: Registry, tmp_path: Path) -> None:
    """It shows identity texts first, then the always list's, cut within the budget with how much is left out; a folder
    is named, not read; an unknown id and a binary file are left out with a note."""
    (tmp_path / "style.md").write_text("Prefer tables. " * 400)
    (tmp_path / "docs").mkdir()
    (tmp_path / "blob.txt").write_text("text when registered\n")
    registry.add(ME, kind="text", name="me", type="identity")
    style = registry.add(tmp_path / "style.md", id="style")
    registry.add(tmp_path / "docs", id="docs")
    registry.add(tmp_path / "blob.txt", id="blob")
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01" * 100)  # binary since
    found = gather(registry, ["ctx:docs", "ctx:blob", "ctx:style", "ctx:nope"], budget=1000)
    assert found.text.startswith(f"[ctx:me] me (identity)\n{ME}")
    assert found.ids == ("me", "docs", style.id)
    assert "more characters: read it all with -c ctx:style" in found.text and len(found.text) <= 1100
    assert "[ctx:docs] docs (document): a folder; read it with -c ctx:docs" in found.text
    assert any("ctx:blob: not text" in n for n in found.notes) and any("ctx:nope" in n for n in found.notes)


def test_every_question_sees_the_identity_context(tmp_path: Path) -> None:
    """It puts an identity context's text in each question's system prompt, read again each time; always=False leaves it out."""
    (tmp_path / "me.md").write_text(ME)
    with Registry.open() as reg:
        reg.add(tmp_path / "me.md", type="identity")
    model = Systems()
    with Session(ScriptedClient(model), contexts=["some text"], trace=False) as s:
        s.ask("first")
        (tmp_path / "me.md").write_text("I am Noor. Flows in litres a second now.")
        s.ask("second")
    assert ME in model.seen[0] and "Always in view" in model.seen[0]
    assert "litres a second now" in model.seen[1]
    with Session(ScriptedClient(model), contexts=["some text"], trace=False, always=False) as s:
        s.ask("third")
    assert "Always in view" not in model.seen[2]


def test_the_settings_and_a_profile_add_contexts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _rlm_home: Path) -> None:
    """It adds the contexts [contexts] always names in rlm.toml and those a profile's always names."""
    with Registry.open() as reg:
        reg.add("Project Kite: river gauges, due in May.", kind="text", name="kite", id="kite")
        reg.add("Answer as a haiku.", kind="text", name="haiku", id="haiku")
    (tmp_path / "rlm.toml").write_text('[contexts]\nalways = ["ctx:kite"]\n')
    folder = _rlm_home / "brain" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "poet.toml").write_text('description = "poet"\nalways = ["ctx:haiku"]\n')
    monkeypatch.chdir(tmp_path)
    model = Systems()
    with Session(ScriptedClient(model), contexts=["x"], trace=False, profile="poet") as s:
        s.ask("q")
    assert "Project Kite" in model.seen[0] and "Answer as a haiku." in model.seen[0]
    (tmp_path / "rlm.toml").write_text("[contexts]\nalways = 5\n")
    with Session(ScriptedClient(model), contexts=["x"], trace=False) as s, pytest.raises(ConfigError, match=r"\[contexts\] always"):
        s.ask("q")


def test_an_identity_file_outside_the_roots_is_not_read(tmp_path: Path, secret: dict[str, str]) -> None:
    """It leaves out of a served session's prompt an identity context outside its roots: the planted secret is not there."""
    with Registry.open() as reg:
        reg.add(secret["path"], id="planted", type="identity")
    root = tmp_path / "root"
    root.mkdir()
    model = Systems()
    with Session(ScriptedClient(model), contexts=["x"], trace=False, context_roots=[root]) as s:
        s.ask("q")
        assert any("planted" in n for n in s.always_on().notes)
    assert secret["value"] not in model.seen[0]


def test_an_identity_file_become_a_hard_link_of_a_sealed_file_or_a_fifo_is_not_read(tmp_path: Path,
                                                                                    secret: dict[str, str]) -> None:
    """It leaves out an identity file under the roots that became a hard link of a sealed file
    (a server's token: sealed by device and inode) and one that became a FIFO, which is never
    waited on: the planted secret reaches no prompt and the question is answered."""
    from rlm_runtime.context.beneath import seal

    root = tmp_path / "root"
    root.mkdir()
    me, fifo = root / "me.md", root / "you.md"
    me.write_text(ME)
    fifo.write_text("a second identity\n")
    with Registry.open() as reg:
        reg.add(me, id="me", type="identity")
        reg.add(fifo, id="you", type="identity")
    sealed = tmp_path / "home" / "token"
    sealed.parent.mkdir()
    sealed.write_text(secret["value"])
    seal(sealed)
    me.unlink()
    os.link(sealed, me)
    fifo.unlink()
    os.mkfifo(fifo)
    model = Systems()
    with Session(ScriptedClient(model), contexts=["x"], trace=False, context_roots=[root]) as s:
        assert s.ask("q").answer == "ok"
        notes = s.always_on().notes
    assert secret["value"] not in model.seen[0]
    assert any("ctx:me" in n for n in notes) and any("ctx:you" in n for n in notes)


def test_cli_type_list_and_always(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """rlm context add --type, list --type, type ID TYPE and always (text and JSON)."""
    (tmp_path / "me.md").write_text(ME)
    monkeypatch.chdir(tmp_path)
    assert main(["context", "add", "me.md", "--id", "me", "--type", "identity"]) == 0
    assert "identity" in capsys.readouterr().out
    assert main(["context", "list", "--type", "identity", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)["contexts"]] == ["me"]
    assert main(["context", "always", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ids"] == ["me"] and ME in shown["text"]
    assert main(["context", "type", "me", "document"]) == 0
    assert "is now of type document" in capsys.readouterr().out
    assert main(["context", "always"]) == 0
    assert "no always-on contexts" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "me.md")


def test_served_lists_filter_by_type(tmp_path: Path) -> None:
    """The server's context list (REST /api/context?type=, MCP contexts_list) filters by type."""
    from rlm_runtime.serve.service import Service

    with Registry.open() as reg:
        reg.add(ME, kind="text", name="me", type="identity")
        reg.add("a note", kind="text", name="note")
    service = Service(ScriptedClient(["```repl\nFINAL('x')\n```"]), roots=[tmp_path], session_options={"memory": None})
    try:
        assert [c["id"] for c in service.contexts_list(type="identity")] == ["me"]
        assert [c["type"] for c in service.contexts_list()] == ["identity", "document"]
        with pytest.raises(RegistryError):
            service.contexts_list(type="bogus")
    finally:
        service.close()
