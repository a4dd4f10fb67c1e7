"""Settings of the memory store, grouped by concern: ingest (windows, batches, chunk sizes,
excludes), links (how ``related_to`` and ``co_recalled`` are made), search (caps that bound
the cost of any query) and recall (``RecallConfig``: the lifecycle's weights, time constants
and thresholds; ``lifecycle.py`` applies them). Pydantic models, frozen.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rlm_runtime.context.protocol import DEFAULT_EXCLUDES

_HOUR = 3600.0


class IngestConfig(BaseModel):
    """How files are read and cut.

    Args:
        window_bytes: a file is read and chunked one window at a time (cut at a blank line or
            a newline), so a 1 GB file never sits in memory whole.
        batch_chunks: chunks written per transaction (a transaction stays short: readers and
            other writers wait at most one batch).
        min_tokens / max_tokens: the chunk size bounds handed to the chunker.
        exact_tokens: count each chunk's tokens exactly (tiktoken: most of the chunker's
            time); False stores the chunker's estimate and ingests about twice as fast.
        excludes: folder and file names (globs) not walked into.
        remove_missing: a re-ingested folder drops the chunks of files no longer in it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    window_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    batch_chunks: int = Field(256, ge=1)
    min_tokens: int = Field(100, ge=1)
    max_tokens: int = Field(800, ge=1)
    exact_tokens: bool = True
    excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    remove_missing: bool = True


class LinkConfig(BaseModel):
    """How links are made on write.

    Args:
        key_terms: distinctive words taken from each chunk (``terms.key_terms``).
        rare_df: a key term or tag shared by fewer chunks than this is rare; only rare ones
            make ``related_to`` links, and a term's list of chunks stops growing here, so each
            lookup reads at most ``rare_df`` rows whatever the size of the store.
        related_min_score: shared rare terms (1 each) plus shared rare tags (2 each) needed.
        related_max: ``related_to`` links made per new chunk, strongest first, ties to the
            nearest chunk (by id: the order of writing, so the next paragraphs of a file, the
            notes written just before).
        related_cap: the most ``related_to`` links any chunk takes part in (made by it or
            to it): a chunk that has them is passed over for the next nearest, so a tagged
            ingest links each chunk to a few neighbours, never every chunk to every other.
        context_max: ``context_of`` links per new chunk to earlier chunks of the same run.
        co_recall_top: hits of one search or recall linked ``co_recalled`` pairwise.
        co_recall_step / co_recall_max: added to a ``co_recalled`` link each time, and its cap.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_terms: int = Field(8, ge=0)
    rare_df: int = Field(16, ge=2)
    related_min_score: float = Field(2.0, gt=0)
    related_max: int = Field(5, ge=0)
    related_cap: int = Field(8, ge=0)
    context_max: int = Field(16, ge=0)
    co_recall_top: int = Field(5, ge=0)
    co_recall_step: float = Field(0.2, gt=0)
    co_recall_max: float = Field(2.0, gt=0)


#: The ways ``MemoryStore.search`` ranks: words (BM25), meaning (vectors), or both fused.
SEARCH_MODES = ("hybrid", "bm25", "vector")


class SearchConfig(BaseModel):
    """How a query is ranked, and caps that bound what one query costs.

    Args:
        mode: the default ranking: ``hybrid`` (BM25 and vectors fused, see ``fusion``; BM25
            alone while the store has no vectors of the model, or there is no model), or
            ``bm25`` or ``vector`` when asked for.
        fusion: how a hybrid search joins the two lists: ``blend`` (the default) adds each
            chunk's BM25 score over the best hit's and its cosine scaled between the lowest
            and highest of the chunks fused; ``rrf`` sums reciprocal ranks (a hit at rank r
            of a list adds ``weight / (rrf_k + r)``). Measured in bench/SEARCH_MEANING.md.
        rrf_k: reciprocal-rank fusion's constant.
        w_bm25 / w_vector: the weights of the two lists, each multiplied by what the query
            makes it worth: BM25's by the words' trust ``t = c ** trust_power``, where ``c`` is
            the most of the query's word weight (idf) that one of its first ``trust_hits``
            hits holds, the vectors' by ``1 - t`` (a query whose informative words all stand
            in one chunk is ranked by words; one whose words are scattered, by meaning).
        trust_power: how fast the words' trust falls with ``c``. A question worded otherwise
            than its answer still finds a third of its word weight in some chunk by chance;
            cubed, that counts for 0.04.
        trust_hits: the words' first hits ``c`` is the best of (BM25's first hit is often a
            chunk repeating one rare word of the query, the one holding them all second).
        word_places: the words' first ``round(k * t)`` hits keep their places at the head
            of a hybrid ranking (all k when a chunk holds every informative word, so such a
            query ranks as BM25 does). Measured in bench/SEARCH_MEANING.md.
        fuse_depth: hits taken from each list before fusing (at least k).
        hybrid_rank_budget: ``rank_budget`` of the word list of a hybrid search: the vectors
            rank what common words would, so the words' list keeps to the rarer terms (a third
            of the time at 100K chunks, with the same recall: bench/SEARCH_MEANING.md).
        vector_candidates: chunks re-scored exactly after the bit-count pass (at least k).
        max_k: the most hits one search returns.
        max_terms: query terms beyond this are ignored.
        rank_budget: the most matching chunks one query ranks by BM25 (ranking costs a few
            microseconds per match). Terms are taken rarest first while the sum of the
            chunks they match stays within it; the others are dropped (each count stops
            here, so counting is bounded too).
            A query whose every word is a stop word or matches more than ``rank_budget``
            chunks is capped: the newest chunks holding all its words (or any, when fewer
            than k hold all), unranked; the answer says so.
        snippet_tokens: the length of a hit's snippet.
        w_memory: the weight of what the store recorded beside the text's score
            (``learned.py``); 0 ranks by text alone. It multiplies the three terms' weights:
        w_learned_link: links use made (an answer's sources, hits read together) from the
            ``memory_seeds`` best text hits, each seed's links weighed by its text score.
        w_recalled_recency / w_recalled_rate: how recently and how often a chunk was recalled
            (every recorded search counts its hits, so these are weak evidence).
        memory_seeds: the best text hits whose learned links bring chunks into the ranking.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # hybrid: it keeps exact words about as BM25 does (0.860 against 0.867 recall@10 held out),
    # finds paraphrases BM25 cannot (10 of 12 passages sharing no content word with their
    # question, BM25 0), and gives a query of words the text lacks its nearest chunks instead
    # of no match (bench/SEARCH_MEANING.md).
    mode: str = Field("hybrid", pattern="^(hybrid|bm25|vector)$")
    fusion: str = Field("blend", pattern="^(blend|rrf)$")
    rrf_k: float = Field(60.0, gt=0)
    w_bm25: float = Field(1.0, ge=0)
    w_vector: float = Field(1.0, ge=0)
    trust_power: float = Field(3.0, ge=1.0, le=8.0)
    trust_hits: int = Field(10, ge=1, le=1000)
    word_places: bool = True
    fuse_depth: int = Field(50, ge=1, le=1000)
    hybrid_rank_budget: int = Field(2_000, ge=1)
    vector_candidates: int = Field(200, ge=1, le=100_000)
    max_k: int = Field(100, ge=1)
    max_terms: int = Field(16, ge=1)
    rank_budget: int = Field(10_000, ge=1)
    snippet_tokens: int = Field(24, ge=4, le=64)
    w_memory: float = Field(1.0, ge=0)
    w_learned_link: float = Field(1.0, ge=0)
    w_recalled_recency: float = Field(0.1, ge=0)
    w_recalled_rate: float = Field(0.1, ge=0)
    memory_seeds: int = Field(3, ge=0, le=50)


class RecallConfig(BaseModel):
    """Weights, time constants and thresholds of the lifecycle (see ``lifecycle.py``'s docstring).

    Args:
        w_text / w_link / w_recency / w_reinforcement: the weights of the four terms.
        recency_tau_hours: tau of ``exp(-age / tau)``.
        rate_half_per_day: the recall rate (recalls per day) that scores 0.5.
        min_rate_window_hours: the shortest time a rate is measured over (a chunk created a
            minute ago and recalled once is not "1,440 recalls a day").
        half_life_hours: strength half-life in the working tier (default one day).
        long_term_half_life_hours: strength half-life once promoted (default 30 days).
        promote_after: recalls that promote a chunk to long-term (default 3).
        reinforce_boost / max_strength: strength added per recall, and its cap.
        strength_floor: ``prune`` drops working memories whose strength fell below this.
        candidates / link_candidates: how many text matches / linked chunks are ranked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    w_text: float = Field(1.0, ge=0)
    w_link: float = Field(0.5, ge=0)
    w_recency: float = Field(0.2, ge=0)
    w_reinforcement: float = Field(0.3, ge=0)
    recency_tau_hours: float = Field(72.0, gt=0)
    rate_half_per_day: float = Field(1.0, gt=0)
    min_rate_window_hours: float = Field(24.0, gt=0)
    half_life_hours: float = Field(24.0, gt=0)
    long_term_half_life_hours: float = Field(24.0 * 30, gt=0)
    promote_after: int = Field(3, ge=1)
    reinforce_boost: float = Field(1.0, ge=0)
    max_strength: float = Field(10.0, gt=0)
    strength_floor: float = Field(0.05, ge=0)
    candidates: int = Field(100, ge=1)
    link_candidates: int = Field(200, ge=1)

    @property
    def half_life_s(self) -> float:
        return self.half_life_hours * _HOUR

    @property
    def long_half_life_s(self) -> float:
        return self.long_term_half_life_hours * _HOUR


class MemorySettings(BaseModel):
    """Every setting of a store.

    Args:
        busy_timeout_s: how long a writer waits for another process's write to finish.
        durable: ``synchronous=FULL`` (survives a power cut, slower commits) instead of NORMAL
            (survives a killed process).
        trace_retention_days: ``prune`` drops recall traces older than this.
        maintain_every_s: a store opened for writing this long after its last upkeep runs it
            (``MemoryStore.maintain``: strengths decayed, often-recalled chunks promoted,
            expired and faded memories moved to the trash, old recall traces dropped); 0
            never runs it on open (``rlm memory prune`` still does, by hand).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ingest: IngestConfig = IngestConfig()
    links: LinkConfig = LinkConfig()
    search: SearchConfig = SearchConfig()
    recall: RecallConfig = RecallConfig()
    busy_timeout_s: float = Field(10.0, gt=0)
    durable: bool = False
    trace_retention_days: float = Field(90.0, gt=0)
    maintain_every_s: float = Field(86_400.0, ge=0)
