"""Prompt assembly: the messages of a run, built from the text files in ``brain/prompts/``.

Every sentence a model reads comes from a file there (the user's copy under
``$RLM_HOME/brain`` first); this module only chooses the files and fills their ``$names``.
The system prompt's list of functions is rendered from the same ``Tool`` objects that are
bound in the sandbox, and from ``prompts/functions/*.md`` for the functions that run in the
worker, so the prompt cannot name a function the namespace lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlm_runtime import brain
from rlm_runtime.quoting import quoted
from rlm_runtime.tools import Tool

#: The worker-side functions the prompt lists, in order, by their file in prompts/functions/.
WORKER_FUNCTIONS = ("grep", "peek", "context_lines", "chunk", "context_count", "records")

#: Hints shown inside feedback, from prompts/notes/.
NOTES = ("only_comments", "not_python", "same_code", "warning", "no_output", "no_answer", "tool_list_header", "cut",
         "sub_call_cut", "number_as_text", "copied_prose")


class Prompts:
    """The prompt files of one run, read from ``dirs`` (the brain folders, first wins)."""

    def __init__(self, dirs: tuple[Path, ...]) -> None:
        self.dirs = dirs
        self.notes = {name: brain.prompt(f"notes/{name}", dirs) for name in NOTES}

    def text(self, name: str, **values: object) -> str:
        return brain.prompt(name, self.dirs, **values)

    def function_entry(self, name: str, **values: object) -> str:
        """``- name(...): description`` from prompts/functions/NAME.md, continuation lines indented."""
        lines = self.text(f"functions/{name}", **values).splitlines()
        return "\n".join(["- " + lines[0], *("  " + line for line in lines[1:])])

    def system(self, *, contexts: str, builtins: Sequence[str], tools: Sequence[Tool], imports: Sequence[str],
               output_chars: int, max_iterations: int, sub_call_chars: int, addendum: str = "",
               mode: str = "text") -> str:
        """The system prompt. ``builtins`` names the host built-ins bound in this run
        (``llm_query``, ``rlm_query``), ``tools`` the program's own; ``mode`` (the main
        context's ``ContextBrief.mode``: ``records`` when it has fields ``records()`` reads,
        else ``text``; ``memory`` for a memory store and no context) picks the opening, the
        example first turn and the rules of that mode (``intro_*``, ``first_turn_*``,
        ``rules_*``); ``addendum`` (a profile's text) comes last."""
        fielded = mode == "records"
        # A memory store alone: no text in the worker, so none of its functions (they are not
        # defined there: the 1.5B, told of grep, called it and met NameError turn after turn).
        searched = mode == "memory"
        # A small model copies the first tool it reads about: records() leads for a text with
        # fields. For one without, its entry leaves out counting and following links (with
        # them, the 1.5B wrote demonstration code about a Python topic instead of reading it).
        order = (("records",) + tuple(n for n in WORKER_FUNCTIONS if n != "records")) if fielded else \
            () if searched else WORKER_FUNCTIONS
        entries = [self.function_entry(name if fielded or name != "records" else "records_no_fields") for name in order]
        # Over a memory store alone, search's own entry: the text's sends to grep, absent here.
        entries += [self.function_entry(f"{name}_memory" if searched and name == "search_chunks" else name,
                                        sub_call_chars=sub_call_chars) for name in builtins]
        entries.append(self.function_entry("FINAL"))
        if tools:
            entries.append(self.notes["tool_list_header"])
            entries += [t.prompt_entry() for t in tools]
        example = self.text("first_turn_records" if fielded else "first_turn_search" if searched else "first_turn_grep").strip()
        # The rules of the main context's shape only: told both ("in text without fields,
        # grep..."), the 1.5B wrote "The text does not have fields" over a text with fields and grepped.
        rules = self.text("rules_records" if fielded else "rules_memory" if searched else "rules_text").strip()
        intro = self.text("intro_memory" if searched else "intro_text").strip()
        text = self.text("system", contexts=contexts, functions="\n".join(entries), imports=", ".join(imports),
                         output_chars=output_chars, max_iterations=max_iterations, example=example, shape_rules=rules,
                         intro=intro)
        return f"{text}\n\n{addendum.strip()}" if addendum.strip() else text

    def contexts(self, briefs: Sequence[Any], *, memory_chunks: int | None = None, earlier: str = "", always: str = "") -> str:
        """What the system prompt says about the contexts (``ContextBrief``s, in order) and
        the memory store (its chunk count; None: no store); ``earlier``, the answer leads of
        the main context, under its brief; ``always``, the always-on contexts' text, last."""
        memory = "" if memory_chunks is None else "\n" + self.text("context_memory", chunks=memory_chunks)
        if always.strip():
            memory += "\n\n" + self.text("context_always", text=always.strip())
        if not briefs:
            return (self.text("contexts_none") if memory_chunks is None else "") + memory
        parts = []
        for k, b in enumerate(briefs):
            text = b.summary
            if b.inline is not None:
                text = self.text("context_inline", summary=text, text=b.inline)
            elif b.skipped_documents:
                text = self.text("context_skipped", summary=text, reason=b.skip_reason or "the probe's verdict",
                                 names=", ".join(map(quoted, b.skipped_documents[:20]))
                                 + (" ..." if len(b.skipped_documents) > 20 else ""))
            if getattr(b, "changed", ""):
                text += "\n" + self.text("context_changed", what=b.changed)
            if k == 0 and earlier:
                text += "\n" + self.text("context_earlier", leads=earlier)
            parts.append(f"{'context' if k == 0 else f'contexts[{k}]'} holds {text}" if len(briefs) > 1 else text)
        if len(briefs) > 1:
            parts.append(self.text("contexts_several"))
        return "\n".join(parts) + memory

    def first_user(self, query: str, *, history: str = "", variables: str = "", mode: str = "text") -> str:
        """The question, after what earlier questions of the session left (if any), and how
        to start (with ``records()`` in ``mode`` ``records``: the main context has fields)."""
        before = ""
        if history:
            before += self.text("history", history=history) + "\n\n"
        if variables:
            before += self.text("variables", variables=variables) + "\n\n"
        start = self.text("start_records" if mode == "records" else "start_search" if mode == "memory" else "start_grep").strip()
        return self.text("first_user", query=query, history=before, start=start)

    def feedback(self, output: str, *, iteration: int, max_iterations: int) -> str:
        return self.text("feedback", iteration=iteration, max_iterations=max_iterations, output=output)
