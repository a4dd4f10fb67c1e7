"""What one request to ``rlm serve`` may ask for.

A server answers clients it does not control: every size a request names is capped here,
and a request over a cap is refused (``TooLarge``, HTTP 413) rather than cut, so that a
client never mistakes a truncated answer for a whole one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeLimits:
    """Per-request caps and the sessions a server keeps.

    Args:
        question_chars: the longest question ``ask`` takes.
        pattern_chars: the longest grep pattern.
        grep_matches: the most matching lines one grep returns.
        peek_chars: the most characters one peek returns.
        chunk_chars: the most characters one chunk returns (its size in lines or tokens is
            checked against the text it yields).
        load_chars: the most characters a whole-context load returns.
        search_k: the most hits one search returns.
        remember_chars: the longest text one ``remember`` stores.
        contexts_per_ask: the most contexts one question names.
        search_contexts: the most contexts one search covers (a search naming none covers
            the registry's most recently refreshed, and says which it left out).
        registered_contexts: clients register no more contexts once the registry holds
            this many (``rlm context rm`` makes room).
        search_s: the most seconds one search spends building indexes (a search over
            big new contexts is refused past it; the files indexed whole are kept).
        search_bytes: the most bytes of text one search may cover (its contexts' sizes).
        searches: searches that run at once (others wait ``wait_s``, then are told busy).
        sessions: sessions kept at once (each holds a worker); None: the governor's worker count.
        idle_s: a client's session unused this long is closed (its worker freed).
        wait_s: how long a request waits for a worker before the server says it is busy.
        fill_idle_s: seconds with no request before the memory store's quality tier is filled
            in the background (with the quality model installed: ``memory.idlefill``).
    """

    question_chars: int = 20_000
    pattern_chars: int = 1_000
    grep_matches: int = 1_000
    peek_chars: int = 100_000
    chunk_chars: int = 200_000
    load_chars: int = 2_000_000
    search_k: int = 50
    remember_chars: int = 200_000
    contexts_per_ask: int = 16
    search_contexts: int = 64
    registered_contexts: int = 500
    search_s: float = 300.0
    search_bytes: int = 256 << 20
    searches: int = 2
    sessions: int | None = None
    idle_s: float = 900.0
    wait_s: float = 30.0
    fill_idle_s: float = 60.0
