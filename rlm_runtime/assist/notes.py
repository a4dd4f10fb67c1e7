"""Notes after a cell that look things up for the model: after an empty grep, the lines its
hint names (``empty_grep``), the question's words (``question_words``) or the chunks search
ranks (``search_hint``); for a question that counts, the tally of the text's records
(``records``, which also questions an answer its tally disagrees with).
"""

from __future__ import annotations

from rlm_runtime import harness
from rlm_runtime.assist import lookups
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
        hints = [g["hint"] for g in cell.empty_greps if g["hint"]]
        if not hints:
            return ""
        pattern = hints[-1]
        call = f"grep({pattern!r}, ignore_case=True)"
        found, _ = lookups.lines(host, pattern, ignore_case=True, most=_HINT_LINES)
        if not found:
            return ""
        lines = "\n".join(found)
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
        counts = [lookups.count(host, p, ignore_case=True) or 0 for p in patterns]
        if not any(counts):
            return ""
        found = sorted((n, k) for k, n in enumerate(counts) if n)[:_WORDS_SHOWN]
        shown = []
        for _, k in found:
            lines, _ = lookups.lines(host, patterns[k], ignore_case=True, most=_WORD_LINES)
            if lines:
                shown.append(host.prompts.text("question_word_lines", word=words[k], lines="\n".join(lines)))
        tally = ", ".join(f"{w!r} {n}" for w, n in zip(words, counts, strict=True))
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
        host.note_lookup(f"search_chunks {query!r}: {len(hits)} hits")
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
            sample, _ = lookups.lines(host, r"\b" + re2_escape(word), ignore_case=True, most=_RECORD_SAMPLE)
            pattern = harness.record_pattern(harness.grep_rows("\n".join(sample)))
            if pattern is None:
                continue
            first, total = lookups.lines(host, pattern, most=2)
            if total < _RECORD_SAMPLE // 2:
                continue
            tally, kinds = lookups.tally(host, pattern)
            if not 2 <= kinds <= _MAX_KINDS_SHOWN:
                continue  # not a label field over the whole text (too many kinds)
            state.records_counts = tally
            note = host.prompts.text("records_tally", total=total, lines="\n".join(first), pattern=pattern,
                                     counts=repr(tally), question=host.query)
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
