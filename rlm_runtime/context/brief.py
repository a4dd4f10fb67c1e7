"""What a model is told about its contexts before its first turn, acting on their probes.

``describe(handles, question=..., inline_max_chars=...)`` probes every handle (bounded
reads) and returns one ``ContextBrief`` each, in order:

* a context the probe says to ``load`` and no longer than ``inline_max_chars`` comes with
  its whole text (``inline``), so the prompt can show it and spare the model a turn;
* a corpus gets its documents ranked by the question's keywords (the summary names the
  most relevant first) and the documents its probe says to skip are marked skipped on the
  handle: listed, but left out of grep, count and chunks unless asked
  (``include_skipped=True``), on the host and, once exported, in the sandbox worker.

The marks depend on the configuration only, never on the question. A worker maps its
contexts when it starts, so marks made later reach only workers started later:
``mark_skipped_documents(handles, config)`` makes them alone, before a sandbox starts.

Keywords taken from the question only rank; only keywords configured in ``[probe]`` can
make a document skipped (see relevance.py for why).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlm_runtime.context.corpus import CorpusHandle
from rlm_runtime.context.probe import FolderProbe
from rlm_runtime.context.protocol import ContextHandle, ProbeReport
from rlm_runtime.context.records import FIELDED_SHAPES
from rlm_runtime.context.relevance import keywords_from_question, merge_keywords
from rlm_runtime.context.settings import ProbeConfig, load_probe_config
from rlm_runtime.errors import RLMError
from rlm_runtime.quoting import quoted

__all__ = ["ContextBrief", "describe", "keywords_from_question", "load_probe_config", "mark_skipped_documents"]


@dataclass(frozen=True)
class ContextBrief:
    """What the first prompt says about one context.

    Args:
        name: the handle's name.
        summary: the probe's brief summary ("NAME: could not be probed (ERROR)" if it failed).
        decision: load | excerpt | skip (excerpt when the probe failed: the handle may still be read).
        reason: why that decision.
        inline: the whole text when the decision is load and it fits ``inline_max_chars``; else None.
        skipped_documents: a corpus's documents marked skipped, in corpus order.
        skip_reason: why they are skipped, in a few words ("binary content; empty").
        relevant_documents: a corpus's documents matching the keywords, most relevant first.
        keywords: the keywords that ranked them (configured ones first, then the question's).
        shape: how ``records()`` reads the text ("" when it does not apply).
    """

    name: str
    summary: str
    decision: str
    reason: str
    inline: str | None = None
    skipped_documents: tuple[str, ...] = ()
    skip_reason: str = ""
    relevant_documents: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    #: What ``records()`` makes of one text (a key of ``records.SHAPE_TEXT``; "" for a
    #: corpus, code, JSON, or a text that could not be probed).
    shape: str = ""
    #: What changed in the context since the session's last question (``context.living``;
    #: "" when nothing did).
    changed: str = ""

    @property
    def mode(self) -> str:
        """How the prompts present this context: ``records`` when ``records()`` reads fields
        of its own from it (the prompts lead with ``records()``), ``text`` otherwise."""
        return "records" if self.shape in FIELDED_SHAPES else "text"

    def to_dict(self) -> dict[str, Any]:
        """For the trajectory: plain data, with the inline text's length instead of the text."""
        return {
            "name": self.name, "summary": self.summary, "decision": self.decision, "reason": self.reason,
            "inline_chars": None if self.inline is None else len(self.inline),
            "skipped_documents": list(self.skipped_documents), "skip_reason": self.skip_reason,
            "relevant_documents": list(self.relevant_documents), "keywords": list(self.keywords), "shape": self.shape,
            **({"changed": self.changed} if self.changed else {}),
        }


def describe(handles: Sequence[ContextHandle], *, question: str, config: ProbeConfig | None = None,
             inline_max_chars: int) -> list[ContextBrief]:
    """One ``ContextBrief`` per handle, in order; marks the skipped documents of each corpus.

    Args:
        handles: the contexts, as the sandbox will number them.
        question: the user's question: its keywords rank corpus documents (never skip them).
        config: probe thresholds and keywords (``load_probe_config()`` reads ``[probe]``);
            the defaults when None.
        inline_max_chars: the longest text shown whole in the prompt (0: none).
    """
    config = config or ProbeConfig()
    keywords = merge_keywords(config.keywords, keywords_from_question(question))
    briefs = [_describe_one(h, config, keywords, inline_max_chars) for h in handles]
    return [dataclasses.replace(b, changed=str(getattr(h, "changed", "") or "")) if getattr(h, "changed", "") else b
            for b, h in zip(briefs, handles, strict=True)]


def mark_skipped_documents(handles: Sequence[ContextHandle], config: ProbeConfig | None = None) -> dict[str, dict[str, str]]:
    """Mark the documents each corpus's probe says to skip, as ``describe`` does, without a question.

    Returns corpus name -> {document name: reason}. A corpus whose probe fails keeps its marks.
    """
    config = config or ProbeConfig()
    marked: dict[str, dict[str, str]] = {}
    for handle in handles:
        if isinstance(handle, CorpusHandle):
            try:
                skipped = handle.probe(config).skipped
            except RLMError:
                continue
            handle.mark_skipped(skipped)
            marked[handle.name] = skipped
    return marked


def _describe_one(handle: ContextHandle, config: ProbeConfig, keywords: tuple[str, ...], inline_max_chars: int) -> ContextBrief:
    probe: ProbeReport
    try:
        if isinstance(handle, CorpusHandle):
            probe = handle.probe(config, rank_keywords=keywords)
            handle.mark_skipped(probe.skipped)
        else:
            probe = handle.probe(config)
        summary = probe.summary(brief=True)
    except RLMError as e:
        return ContextBrief(handle.name, f"{quoted(handle.name)}: could not be probed ({e})", "excerpt", f"could not be probed: {e}",
                            keywords=keywords)
    skipped = probe.skipped if isinstance(probe, FolderProbe) else {}
    return ContextBrief(
        name=handle.name, summary=summary, decision=probe.decision.action, reason=probe.decision.reason,
        inline=_inline(handle, probe.decision.action, inline_max_chars),
        skipped_documents=tuple(skipped), skip_reason="; ".join(dict.fromkeys(skipped.values())),
        relevant_documents=tuple(probe.ranking) if isinstance(probe, FolderProbe) else (), keywords=keywords,
        shape=getattr(probe, "shape", ""),
    )


def _inline(handle: ContextHandle, action: str, limit: int) -> str | None:
    """The whole text when the probe says load and it fits ``limit`` characters."""
    if action != "load" or limit <= 0:
        return None
    try:
        if handle.n_bytes > 4 * limit:  # UTF-8 takes at most 4 bytes a character: surely too long, read nothing
            return None
        text = handle.get_full()
    except RLMError:
        return None
    return text if len(text) <= limit else None
