"""search_chunks and read_chunk: ranked search over the contexts and the memory store."""

from __future__ import annotations

import os
from pathlib import Path

from rlm_runtime import Session
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.memory.store import MemoryStore

from .support import code, fast, of_type, read_trace

FACT = "Every spring the apiarists' guild convenes its yearly assembly in Ljubljana, beside the river."


def corpus(tmp_path: Path) -> Path:
    """A document of many paragraphs; one of them holds FACT, in words the question does not use."""
    paras = [f"Paragraph {i}. The committee reviewed routine matters of budget number {i} and adjourned early."
             for i in range(300)]
    paras[187] = FACT
    path = tmp_path / "minutes.md"
    path.write_text("\n\n".join(paras) + "\n", encoding="utf-8")
    return path


def test_an_answer_no_regex_of_the_question_finds_is_found_by_search(tmp_path: Path) -> None:
    """It answers through search_chunks when grep of the question's words finds nothing, and offers search in the system prompt."""
    client = ScriptedClient([
        code("print(grep('beekeepers meet', ignore_case=True))"),
        code("hits = search_chunks('apiarists yearly assembly')\nprint(hits[:2])"),
        code("text = read_chunk(hits[0]['id'])\nFINAL('Ljubljana' if 'Ljubljana' in text else text[:80])"),
    ])
    trace = tmp_path / "t.jsonl"
    with Session(client, contexts=[corpus(tmp_path)], limits=fast(), trace=trace) as s:
        result = s.ask("Where do the beekeepers hold their annual meeting?")
    assert result.answer == "Ljubljana", result.error
    second_prompt = client.prompts[1][-1]["content"]
    assert "(no lines match" in second_prompt
    assert "search_chunks(query, k=10)" in client.prompts[0][0]["content"]
    calls = of_type(read_trace(trace), "tool_call")
    assert [c["name"] for c in calls] == ["search_chunks"]


def test_the_index_is_kept_on_disk_and_reused(tmp_path: Path, _rlm_home: Path) -> None:
    """It indexes a context once: a second session over the same file finds the index under $RLM_HOME/index."""
    path = corpus(tmp_path)
    for _ in range(2):
        client = ScriptedClient([code("FINAL(search_chunks('apiarists')[0]['id'])")])
        with Session(client, contexts=[path], limits=fast(), trace=False) as s:
            assert s.ask("q").answer.startswith("c0.")
    assert len(list((_rlm_home / "index").glob("*.db"))) == 1


def test_a_file_name_that_is_not_utf8_is_searched(tmp_path: Path) -> None:
    """It searches a file and a folder's file whose names are not UTF-8: search_chunks failed
    with UnicodeEncodeError (the memory store takes no lone surrogate)."""
    folder = tmp_path / "d"
    folder.mkdir()
    bad = os.path.join(os.fsencode(folder), b"caf\xe9.txt")
    with open(bad, "wb") as f:
        f.write(b"the okapi lives in the forest\n")
    for context in (folder, os.fsdecode(bad)):
        client = ScriptedClient([code("hits = search_chunks('okapi')\nFINAL(hits[0]['snippet'] if hits else 'none')")])
        with Session(client, contexts=[context], limits=fast(), trace=False) as s:
            result = s.ask("q")
        assert "okapi" in (result.answer or ""), (context, result.answer, result.error)


def test_bad_arguments_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    """It refuses an empty query, a k out of range and an unknown chunk id, as errors the code sees."""
    with Session(ScriptedClient([]), contexts=["some text here"], trace=False) as s:
        assert "non-empty query" in (s.execute("search_chunks('')").error or "")
        assert "k must be" in (s.execute("search_chunks('text', k=10**6)").error or "")
        assert "no chunk" in (s.execute("read_chunk('x99')").error or "")


def test_a_second_run_recalls_the_first_runs_answer(tmp_path: Path) -> None:
    """It remembers a session's answer in the store, and a later session finds it with search_chunks."""
    store_path = tmp_path / "memory.db"
    first = ScriptedClient([code("FINAL('The launch code is TANGERINE-4471')")])
    with Session(first, limits=fast(), trace=False, memory=store_path, remember=True) as s:
        assert s.ask("What is the launch code?").answer == "The launch code is TANGERINE-4471"
    second = ScriptedClient([
        code("hits = search_chunks('launch code')\nprint(hits)"),
        code("FINAL(read_chunk(hits[0]['id']))"),
    ])
    with Session(second, limits=fast(), trace=False, memory=store_path) as s:
        result = s.ask("What did we find out about the launch code earlier?")
    assert result.answer is not None and "TANGERINE-4471" in result.answer
    assert result.answer.startswith("[run:")
    assert "memory: a store of" in second.prompts[0][0]["content"]
    with MemoryStore(store_path) as store:
        assert store.stats().chunks >= 1


def test_remember_without_a_store_is_a_clear_error(tmp_path: Path) -> None:
    """It refuses ask(remember=True) in a session without a memory store."""
    import pytest

    from rlm_runtime.errors import ConfigError

    with Session(ScriptedClient([code("FINAL(1)")]), limits=fast(), trace=False) as s:
        with pytest.raises(ConfigError):
            s.ask("q", remember=True)


def test_retrieve_searches_the_memory_store(tmp_path: Path) -> None:
    """It answers retrieve(q, memory=PATH) from what an earlier session remembered."""
    from rlm_runtime import retrieve

    store_path = tmp_path / "memory.db"
    with Session(ScriptedClient([code("FINAL('the vault opens with key 7')")]), limits=fast(), trace=False,
                 memory=store_path, remember=True) as s:
        s.ask("How does the vault open?")
    model = ScriptedClient([code("FINAL(read_chunk(search_chunks('vault key')[0]['id']))")])
    answer = retrieve("What opens the vault?", model=model, limits=fast(), trace=False, memory=store_path)
    assert "key 7" in answer


def test_indexing_an_empty_grep_says_why(tmp_path: Path) -> None:
    """It explains hits[0] of an empty grep (not a bare IndexError), with the grep its hint names."""
    doc = tmp_path / "notes.md"
    doc.write_text("\n".join(f"filler line {i}" for i in range(50)) + "\nThe Apiarists Guild meets in Ljubljana.\n")
    client = ScriptedClient([code("hits = grep('apiarists guild')\nprint(hits[0])"), code("FINAL('seen')")])
    with Session(client, contexts=[doc], limits=fast(), trace=False) as s:
        assert s.ask("Where?").answer == "seen"
    feedback = client.prompts[1][-1]["content"]
    assert "grep found no lines, so there is no [0]" in feedback
    assert "use grep('apiarists guild', ignore_case=True)" in feedback
    assert "Ljubljana" not in feedback  # the lines themselves are the model's to fetch


def test_related_follows_a_memory_notes_links(tmp_path: Path) -> None:
    """related(id) lists the chunks linked to a memory note (a person's 'contradicts'), strongest first, and is offered with a store."""
    store_path = tmp_path / "memory.db"
    with MemoryStore(store_path, embedder=None) as st:
        [old] = st.add_text("The Falcon launch is set for March 3.")
        [new] = st.add_text("Pushed back five weeks after the vendor slipped: April 9.")
        [other] = st.add_text("The cafeteria closes at noon on Fridays.")
        st.link(new, old, "contradicts", 0.9)
        st.link(old, other, "see_also", 0.3)
    client = ScriptedClient([
        code("hits = search_chunks('Falcon launch')\nlinks = related(hits[0]['id'])\nprint(links)"),
        code("FINAL(links[0]['snippet'] if links[0]['link'] == 'contradicts' else 'no')"),
    ])
    trace = tmp_path / "t.jsonl"
    with Session(client, memory=store_path, limits=fast(), trace=trace) as s:
        result = s.ask("When is the Falcon launch?")
        assert result.answer == "Pushed back five weeks after the vendor slipped: April 9.", result.error
        hits = s.execute("print([(h['id'], h.get('linked')) for h in search_chunks('Falcon launch March')])").stdout
        assert f"('m{old}', [{{'id': 'm{new}', 'link': 'contradicts'}}, {{'id': 'm{other}', 'link': 'see_also'}}])" in hits
        listed = s.execute(f"print([(x['id'], x['link'], x['way']) for x in related('m{old}')])").stdout
        assert listed.strip() == f"[('m{new}', 'contradicts', 'both'), ('m{other}', 'see_also', 'to')]"
        assert "no chunk with id 999" in str(s.execute("related('m999')").error)
        assert "k must be an int" in str(s.execute(f"related('m{old}', k=500)").error)
    assert "related(id, k=10)" in client.prompts[0][0]["content"]
    assert [c["name"] for c in of_type(read_trace(trace), "tool_call")][:2] == ["search_chunks", "related"]


def test_related_is_not_offered_without_a_memory_store(tmp_path: Path) -> None:
    """It leaves related() out of the system prompt of a run with no memory store (contexts' links are their own neighbours)."""
    client = ScriptedClient([code("FINAL('x')")])
    with Session(client, contexts=[corpus(tmp_path)], limits=fast(), trace=False) as s:
        s.ask("q")
    assert "related(id" not in client.prompts[0][0]["content"]


def test_a_memory_store_alone_gets_the_search_prompt(tmp_path: Path) -> None:
    """It tells a run over a memory store and no context to search it, and lists no text function the worker lacks."""
    store_path = tmp_path / "memory.db"
    with MemoryStore(store_path, embedder=None) as st:
        st.add_text("The gate code is 4711.")
    client = ScriptedClient([code("FINAL(search_chunks('gate code')[0]['snippet'])")])
    with Session(client, memory=store_path, limits=fast(), trace=False) as s:
        assert "4711" in (s.ask("What is the gate code?").answer or "")
    system, first = client.prompts[0][0]["content"], client.prompts[0][1]["content"]
    assert system.startswith("You answer a question from a memory store")
    assert "- grep(" not in system and "- peek(" not in system and 'search_chunks("distinctive words' in system
    assert "grep" not in system and "the memory store's notes and files" in system
    assert "Start by searching the memory with code." in first
