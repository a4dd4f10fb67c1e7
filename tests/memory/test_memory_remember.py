"""remember: a run's answer stored as a memory with provenance, linked to what it read, found again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import paragraphs, small_chunks

from rlm_runtime.memory import MemoryStore


def test_remember_stores_answer_with_provenance(open_store: Callable[..., MemoryStore], write: Callable[..., Path]) -> None:
    """It stores the question and answer (kind answer) and the cells (kind code), with run id and trajectory."""
    st = open_store(small_chunks())
    st.ingest(write("facts.txt", paragraphs("heron", 3)))
    read = [h.chunk_id for h in st.search("heron1word0", run_id="run-1")]
    ids = st.remember("How many herons?", "Twelve herons.", run_id="run-1", trajectory="/traces/run-1.jsonl",
                      cells=["hits = search_chunks('heron')", "FINAL('Twelve herons.')"], read_chunk_ids=read)
    answer, cells = st.read(ids[0]), st.read_many(ids[1:])
    assert answer.kind == "answer" and answer.text == "Question: How many herons?\nAnswer: Twelve herons."
    assert {c.kind for c in cells} == {"code"} and "search_chunks('heron')" in "\n".join(c.text for c in cells)
    assert answer.source == "run:run-1" and answer.run_id == "run-1"
    assert answer.meta == {"run_id": "run-1", "trajectory": "/traces/run-1.jsonl", "read_chunk_ids": read}
    derived = {lk.dst for lk in st.links(ids[0], "derived_from")}
    assert derived == set(read)
    assert "context_of" in {lk.type for lk in st.links(ids[0])}


def test_a_second_run_recalls_the_first_answer(store: MemoryStore) -> None:
    """It finds a remembered answer by searching its question's words in a later run."""
    [answer, *_] = store.remember("What is the capital of Burkina Faso?", "Ouagadougou", run_id="run-1")
    hits = store.recall("capital of Burkina Faso", run_id="run-2")
    assert hits[0].chunk_id == answer and "Ouagadougou" in store.read(answer).text


def test_an_answer_holding_a_lone_surrogate_is_remembered(store: MemoryStore) -> None:
    """It remembers an answer a model's code built with a lone surrogate (U+FFFD in its place):
    Session.ask(remember=True) raised UnicodeEncodeError after the run."""
    [answer, *_] = store.remember("Which glyph?", "the glyph \ud800 here", run_id="run-1", cells=["FINAL('\ud800')"])
    assert "the glyph \ufffd here" in store.read(answer).text


def test_chunks_read_together_are_co_recalled(store: MemoryStore) -> None:
    """It links the chunks one answer read as co_recalled (read together for one answer)."""
    a = store.add_text("the kakapo is nocturnal", source="a")[0]
    b = store.add_text("kakapo booming calls", source="b")[0]
    store.remember("kakapo?", "a nocturnal parrot", run_id="r", read_chunk_ids=[a, b, 12345])
    assert [(lk.src, lk.dst) for lk in store.links(a, "co_recalled")] == [(a, b)]
