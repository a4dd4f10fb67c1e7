"""A folder's loading plan: which documents to read whole within a token budget, which to
excerpt, which to skip, from its probe (``FolderProbe``).

The design's three tiers for a folder: load the most relevant small files whole while they fit
a budget, hand out excerpts of the rest (peek, grep, chunk), and skip what cannot help (binary,
empty, or below the relevance a user configured). ``plan`` orders the searchable documents
by relevance to the keywords (the question's, and any configured), then by size, smallest
first, and takes them whole while the running total stays within ``budget`` tokens (the probe's
``load_max_tokens`` by default). The plan is the probe's data, not a reading: it reads nothing
beyond what the probe read, and says how many tokens each tier holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Documents a plan names in a brief line per tier, at most.
NAMED = 8


@dataclass(frozen=True)
class Plan:
    """A folder's plan: ``load``, ``excerpt`` and ``skip`` each a list of (document name,
    estimated tokens); ``budget`` the tokens the loaded ones may hold together."""

    budget: int
    load: list[tuple[str, int]] = field(default_factory=list)
    excerpt: list[tuple[str, int]] = field(default_factory=list)
    skip: list[tuple[str, str]] = field(default_factory=list)

    @property
    def load_tokens(self) -> int:
        return sum(t for _, t in self.load)

    @property
    def excerpt_tokens(self) -> int:
        return sum(t for _, t in self.excerpt)

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "load_tokens": self.load_tokens, "excerpt_tokens": self.excerpt_tokens,
                "load": [{"name": n, "tokens": t} for n, t in self.load],
                "excerpt": [{"name": n, "tokens": t} for n, t in self.excerpt],
                "skip": [{"name": n, "reason": r} for n, r in self.skip]}

    def lines(self, quote: Any = repr) -> list[str]:
        """The plan in a few lines (names ``quote``d), for a person or a brief."""
        def names(items: list[tuple[str, Any]]) -> str:
            shown = ", ".join(quote(n) for n, _ in items[:NAMED])
            return shown + (f" (and {len(items) - NAMED} more)" if len(items) > NAMED else "")

        rows = [f"plan within {self.budget:,} tokens: read whole {len(self.load)} documents (~{self.load_tokens:,} tokens)"
                + (f": {names(self.load)}" if self.load else "")]
        if self.excerpt:
            rows.append(f"  excerpt (grep, chunk) {len(self.excerpt)} documents (~{self.excerpt_tokens:,} tokens): {names(self.excerpt)}")
        if self.skip:
            rows.append(f"  skip {len(self.skip)}: {names(self.skip)}")
        return rows


def plan(probe: Any, budget: int | None = None) -> Plan:
    """The plan of a ``FolderProbe`` within ``budget`` tokens (default: its ``load_max_tokens``)."""
    limit = int(budget if budget is not None else probe.decision.thresholds.get("load_max_tokens", 0))
    rank = {name: k for k, name in enumerate(probe.ranking)}
    skip = [(str(d["name"]), str(d["skip"])) for d in probe.documents if d.get("skip")]
    live = [d for d in probe.documents if not d.get("skip")]
    live.sort(key=lambda d: (rank.get(d["name"], len(rank)), int(d["size"]), int(d["id"])))
    load: list[tuple[str, int]] = []
    excerpt: list[tuple[str, int]] = []
    total = 0
    for d in live:
        tokens = max(1, int(d["size"]) // 4)
        if total + tokens <= limit:
            load.append((str(d["name"]), tokens))
            total += tokens
        else:
            excerpt.append((str(d["name"]), tokens))
    return Plan(limit, load, excerpt, skip)
