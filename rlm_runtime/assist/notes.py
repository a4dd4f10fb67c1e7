"""Notes after a cell that look things up for the model: after an empty grep, the lines its
hint names (``empty_grep``), the question's words (``question_words``) or the chunks search
ranks (``search_hint``); for a question that counts, the tally of the text's records
(``records``, which also questions an answer its tally disagrees with).
"""

from __future__ import annotations

import ast
import contextlib

from rlm_runtime import harness
from rlm_runtime.assist.base import Assist, AssistState, Cell, Host
from rlm_runtime.assist.leads import chain_note
from rlm_runtime.context.grep import re2_escape
from rlm_runtime.errors import HostCallError

#: After an empty grep, this many chunks ranked for the question are shown, each cut to this
#: many characters; the question is cut to the query length first.
_HINT_HITS = 3
_HINT_SNIPPET_CHARS = 200
_HINT_QUERY_CHARS = 300
#: Lines shown when the runtime runs the grep an empty grep's hint suggests.
_HINT_LINES = 8
#: Lines of a question's word read to find records of one form (and the fewest records counted).
_RECORD_SAMPLE = 40
#: A records tally with more kinds than this over the whole text is not shown (no label field).
_MAX_KINDS_SHOWN = 30
#: After an empty grep, the lines of this many of the question's rarest words, this many each.
_WORDS_SHOWN = 2
_WORD_LINES = 3


def _counting(query: str) -> bool:
    return harness.is_count_question(query) or harness.is_tally_question(query)


class EmptyGrepLines(Assist):
    """After an empty grep: the lines its own hint names (the same pattern ignoring case, or
    its rarest word), run for the model, since small models seldom follow the hint; and the
    chain from them (they may tie the question's name to the next one)."""

    name = "empty_grep"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.kind != "empty_grep":
            return ""
        call = harness.suggested_grep(cell.reported)
        if call is None:
            return ""
        result = host.execute(f"print({call[:-1]}, max_matches={_HINT_LINES}))")
        lines = (result.stdout or "").strip()
        if not (result.ok and lines and not harness.grep_found_nothing(lines)):
            return ""
        host.emit({"type": "tool_call", "name": "grep", "args": call[:200],
                   "result": "shown after an empty grep", "error": None, "duration_s": result.duration_s})
        state.seen.append(lines)
        note = host.prompts.text("empty_grep_lines", call=call, lines=lines)
        chain = chain_note(host, state, lines)
        return note + ("\n" + chain if chain else "")


class QuestionWords(Assist):
    """After an empty grep with no hint to run (once a run; with search, for a counting
    question only): how many lines hold each word the question is about (as a prefix,
    ignoring case, so that ``sightings`` finds "Sighting #12"), and a few lines of the rarest
    words that occur. Small models grep the question's word for a kind of thing, which the
    text may never write. Records to count are found by their words, not by ranked chunks."""

    name = "question_words"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.kind != "empty_grep" or state.words_shown or (host.search is not None and not _counting(host.query)):
            return ""
        state.words_shown = True
        words = harness.question_words(host.query)
        if not words:
            return ""
        patterns = [r"\b" + re2_escape(w) for w in words]
        result = host.execute(f"print([grep(p, ignore_case=True, max_matches=1).count() for p in {patterns!r}])")
        try:
            counts = [int(n) for n in (result.stdout or "").strip().strip("[]").split(",")] if result.ok else []
        except ValueError:
            counts = []
        if len(counts) != len(words) or not any(counts):
            return ""
        found = sorted((n, k) for k, n in enumerate(counts) if n)[:_WORDS_SHOWN]
        shown = []
        for _, k in found:
            lines = host.execute(f"print(grep({patterns[k]!r}, ignore_case=True, max_matches={_WORD_LINES}))")
            if lines.ok and (lines.stdout or "").strip():
                shown.append(host.prompts.text("question_word_lines", word=words[k], lines=lines.stdout.strip()))
        tally = ", ".join(f"{w!r} {n}" for w, n in zip(words, counts, strict=True))
        host.emit({"type": "tool_call", "name": "grep", "args": tally[:200], "result": "the question's words, after an empty grep",
                   "error": None, "duration_s": 0.0})
        note = host.prompts.text("question_words", counts=tally, lines="\n".join(shown))
        state.seen.append(note)
        return note


class SearchHint(Assist):
    """After an empty grep, with search available: the best chunks for the question's own
    words, so that a model that guessed the wrong phrase sees where to look (it need not
    call search itself). Ranked chunks find a fact worded otherwise."""

    name = "search_hint"

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.kind != "empty_grep" or host.search is None:
            return ""
        prompts = host.prompts
        query = " ".join(host.query.split())[:_HINT_QUERY_CHARS]
        try:
            hits = host.search(query, _HINT_HITS) if query else []
        except HostCallError:
            hits = []
        if not hits:
            return prompts.notes["empty_grep"]
        lines = [f"- {h['id']} (lines {h['lines']}): {h['snippet'][:_HINT_SNIPPET_CHARS]}" for h in hits]
        host.emit({"type": "tool_call", "name": "search_chunks", "args": repr(query)[:200],
                   "result": f"{len(hits)} hits (shown after an empty grep)", "error": None, "duration_s": 0.0})
        return prompts.text("empty_grep_hits", query=repr(query), hits="\n".join(lines), best=hits[0]["id"])


class Records(Assist):
    """For a question that counts ("how many", "which is most common"), after its first
    cell: when the lines holding a word of the question are records of one form with a
    label field (``Record 12 | kind=otter | ...``), that form's tally over the whole text,
    counted here. Small models seldom work out a record's form and count it right; the
    counts are the data the answer rests on. Before an answer the tally disagrees with: ask
    once for it to be counted in code."""

    name = "records"
    exclusive = False

    def after_cell(self, host: Host, state: AssistState, cell: Cell) -> str:
        if cell.has_final or state.records_tried:
            return ""
        state.records_tried = True
        if not _counting(host.query):
            return ""
        for word in harness.question_words(host.query):
            prefix = r"\b" + re2_escape(word)
            found = host.execute(f"print(grep({prefix!r}, ignore_case=True, max_matches={_RECORD_SAMPLE}))")
            pattern = harness.record_pattern(harness.grep_rows(found.stdout or "")) if found.ok else None
            if pattern is None:
                continue
            # print only: the cell runs in the model's namespace, whose names it must not touch
            call = f"grep({pattern!r}, max_matches=2)"
            result = host.execute(f"print({call}.count())\nprint({call})\nprint({call}.tally())")
            out = (result.stdout or "").strip().split("\n")
            if not result.ok or len(out) < 4 or not out[0].isdigit() or int(out[0]) < _RECORD_SAMPLE // 2:
                continue
            tally = None
            with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
                tally = ast.literal_eval(out[-1])
            if not (isinstance(tally, dict) and 2 <= len(tally) <= _MAX_KINDS_SHOWN
                    and all(isinstance(k, str) and isinstance(v, int) for k, v in tally.items())):
                continue  # not a label field over the whole text (too many kinds, or cut)
            state.records_counts = tally
            host.emit({"type": "tool_call", "name": "grep", "args": f"{pattern!r}.tally()"[:200],
                       "result": "records counted for a counting question", "error": None, "duration_s": result.duration_s})
            note = host.prompts.text("records_tally", total=out[0], lines="\n".join(out[1:-1]), pattern=pattern,
                                     counts=out[-1], question=host.query)
            state.seen.append(note)
            return note
        return ""

    def before_answer(self, host: Host, state: AssistState, answer: str, reply: str) -> str | None:
        if not state.records_counts or state.records_checked:
            return None
        found = harness.counts_disagree(answer, host.query, state.records_counts)
        if found is None:
            return None
        state.records_checked = True
        return host.prompts.text("counts_answer", answer=" ".join(answer.split())[:200], expected=found[0],
                                 why=found[1], question=host.query)
