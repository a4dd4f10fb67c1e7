"""The ``rlm memory`` commands: add files to the memory store, search it (by words, by meaning,
or both), show a chunk and its links, link chunks, report its size, run its lifecycle (decay,
promote, prune), give its chunks vectors (``reindex``), move it as JSONL and forget a source.
The commands that curate it by hand (``add -``, ``list``, ``pin``, ``ttl``, ``unlink``, the
trash: ``forget ID``, ``restore``, ``purge``) are ``memory_curate``'s, registered here. Each
command is one ``MemoryStore`` call or a few; this module only parses, opens the store and prints.

Every command takes ``--store PATH`` (default ``$RLM_HOME/brain/memory.db``). ``add`` and
``import`` create the store when it is missing; the other commands need it to exist. Commands
that only look (``search``, ``list``, ``show``, ``stats``, ``export``, ``prune --dry-run``) open it
read-only, so they never wait for a writer and work on a store on a read-only disk.

Exit codes (those of ``rlm``, see ``cli.common``): 0 done; 1 nothing found or nothing done: an
unknown chunk id, a search without hits, ``forget --source`` of a source the store does not
hold, an ``add`` that stored nothing because every path was skipped, or the store refused the
change (another writer held it past the busy timeout); 2 bad usage: options, a missing input
file, a file that is not an export, and a store path that is not a usable memory store (no
store there yet, a folder, not SQLite, another program's database, unreadable, or needing
migrations when opened read-only); 130 interrupted. Errors are one line on stderr, and with
``--json`` the one JSON object on stdout.

Everything stored is someone else's text (files, model answers, imports): what is printed from
it goes through ``termsafe`` (``common.say`` escapes every line; single-line fields go through
``one_line`` first, so a stored newline cannot forge a line of the report).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rlm_runtime import contextual, private, timestamps
from rlm_runtime.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    OutputClosed,
    UsageError,
    add_actions,
    add_command,
    plural,
    print_json,
    report_error,
    say,
    unreadable,
)
from rlm_runtime.config import paths_from_env
from rlm_runtime.termsafe import one_line

if TYPE_CHECKING:
    from rlm_runtime.memory import ChunkView, IngestProgress, Link, MemoryStore, StoreError

#: Chunk ids are SQLite integers: a larger number would be an internal error, not "no such chunk".
_MAX_ID = 2**63 - 1
#: Ids listed in a text report before "and N more".
_LIST_IDS = 20
#: Links listed by ``show --links`` as text (``--json`` has them all).
_LIST_LINKS = 50


class _Unusable(Exception):
    """The store path names no usable memory store (exit 2, reported as the StoreError it was)."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error


# ---------------------------------------------------------------------------------- parser


def add_commands(commands: Any) -> None:
    """Register ``rlm memory ...`` on ``rlm``'s subcommand table (``add_subparsers()``)."""
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", metavar="PATH", help="the memory store file (default: $RLM_HOME/brain/memory.db)")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print one JSON object")
    both = [store, as_json]

    memory = add_command(
        commands, "memory", help="the persistent memory store: add, search, recall, list, show, edit, link, pin, forget, restore, stats, ...",
        description="The persistent memory store (one SQLite file): files and remembered answers, chunked and\n"
                    "searchable, for rlm ask|repl --memory.",
        examples=("rlm memory add notes/ --tags work", 'rlm memory search "launch code" -k 5',
                  'rlm ask "What did we decide about the parser?" --memory'),
        notes="exit codes: 0 done; 1 nothing found or done (unknown id, no hits, every path skipped);\n"
              "2 bad usage or not a usable memory store; 130 interrupted")
    actions = add_actions(memory)

    ad = add_command(actions, "add", parents=both, help="chunk and store files and folders (unchanged files are skipped), or a note",
                     examples=("rlm memory add notes/", "rlm memory add report.md --tags q3,finance --kind report",
                               'echo "The deploy key rotates on Mondays." | rlm memory add - --tags ops'))
    ad.add_argument("paths", nargs="+", metavar="PATH", help="a file or folder, or - for a note read from standard input")
    ad.add_argument("--source", metavar="LABEL", help="with -: the memory source the note joins (default: notes)")
    ad.add_argument("--tags", "--tag", action="append", default=[], metavar="A,B", help="tags of every chunk stored (repeatable)")
    ad.add_argument("--kind", help="the kind of every chunk (default: detected per file)")
    ad.add_argument("-v", "--verbose", action="store_true", help="list every path skipped (default: counts by reason)")
    ad.set_defaults(run=_guarded(_add))

    se = add_command(actions, "search", parents=both,
                     help="ranked search by words and meaning (read-only: not counted as recalls)",
                     description="Ranked search of the store: by words (BM25) and by meaning (the chunks' vectors),\n"
                                 "fused (hybrid); by words only while the store has no vectors\n"
                                 "(rlm memory reindex) or no embedding model is installed.",
                     examples=('rlm memory search "launch code"', 'rlm memory search parser --tags work -k 3 --json',
                               'rlm memory search "when can I get my money back" --mode vector'))
    se.add_argument("query")
    se.add_argument("--mode", choices=["hybrid", "bm25", "vector"], default=None,
                    help="hybrid (default): words and meaning fused; bm25: words only; vector: meaning only")
    se.add_argument("-k", type=_positive, default=10, metavar="N", help="hits wanted (default 10)")
    se.add_argument("--kind", action="append", default=[], metavar="K", help="only chunks of this kind (repeatable, or K1,K2)")
    se.add_argument("--tags", "--tag", action="append", default=[], metavar="A,B", help="only chunks having every tag")
    se.add_argument("--source", metavar="PATH", help="only chunks from this file, folder or memory label")
    se.set_defaults(run=_guarded(_search))

    rc = add_command(actions, "recall", parents=both,
                     help="what the store would recall: by words, and by links from chunks you name (read-only)",
                     description="Rank chunks as a run's memory does: text relevance to QUERY, link strength from the\n"
                                 "--from chunks (co-recalled, related, followed), recency and reinforcement (each\n"
                                 "shown). Without a query or --from, the recently made or recalled chunks. Looking\n"
                                 "from a shell is not counted as a recall.",
                     examples=("rlm memory recall --from 42", 'rlm memory recall "refund policy" --from 42 -k 5 --json'))
    rc.add_argument("query", nargs="?", default=None)
    rc.add_argument("--from", dest="seeds", action="append", type=_chunk_id, default=[], metavar="ID",
                    help="a chunk to recall from (repeatable): its linked chunks rank high; it is not listed")
    rc.add_argument("-k", type=_positive, default=10, metavar="N", help="chunks wanted (default 10)")
    rc.set_defaults(run=_guarded(_recall))

    sh = add_command(actions, "show", parents=both, help="one chunk: its text, where it came from, its statistics",
                     examples=("rlm memory show 42", "rlm memory show 42 --around 1 --links"))
    sh.add_argument("id", type=_chunk_id, metavar="ID")
    sh.add_argument("--around", type=_count, default=0, metavar="N", help="neighbouring chunks to show on each side")
    sh.add_argument("--links", action="store_true", help="list the chunk's links")
    sh.add_argument("--history", action="store_true", help="list the chunk's earlier versions (rlm memory edit), oldest first")
    sh.set_defaults(run=_guarded(_show))

    ed = add_command(actions, "edit", parents=both,
                     help="change a chunk in place: its text, kind, tags, summary, confidence (id, links and history kept)",
                     description="Change a chunk without losing what it is: its id, links, statistics and recall\n"
                                 "history stay, and what it held before is kept as a version (rlm memory show ID\n"
                                 "--history). A new text is indexed again (words, key terms, vectors) and must fit one\n"
                                 "chunk; only a note's text changes here (a file's chunk mirrors its file: edit the\n"
                                 "file and rlm memory add it again).",
                     examples=('rlm memory edit 42 --text "We moved billing to SQLite."',
                               "rlm memory edit 42 --untag draft --tag decision --confidence 0.9",
                               "pbpaste | rlm memory edit 42 --text -"))
    ed.add_argument("id", type=_chunk_id, metavar="ID")
    ed.add_argument("--text", metavar="TEXT", help="the new text, or - to read it from standard input")
    ed.add_argument("--kind", metavar="KIND", help="the new kind (decision, fact, answer, ...)")
    ed.add_argument("--tag", "--tags", dest="tags", action="append", default=[], metavar="A,B", help="tags to add (repeatable)")
    ed.add_argument("--untag", action="append", default=[], metavar="A,B", help="tags to remove (repeatable)")
    ed.add_argument("--summary", metavar="TEXT", help="a one-line summary shown with the chunk (\"\" clears it)")
    ed.add_argument("--confidence", type=_confidence, metavar="X", help="how sure you are of it, 0 to 1 (none clears it)")
    ed.set_defaults(run=_guarded(_edit))

    li = add_command(actions, "link", parents=both, help="link chunk A to chunk B (supports, contradicts, any type)",
                     examples=("rlm memory link 12 40 supports", "rlm memory link 12 57 contradicts --strength 0.5"))
    li.add_argument("a", type=_chunk_id, metavar="A")
    li.add_argument("b", type=_chunk_id, metavar="B")
    li.add_argument("type", metavar="TYPE")
    li.add_argument("--strength", type=_strength, default=1.0, metavar="S", help="the link's strength (default 1.0)")
    li.set_defaults(run=_guarded(_link))

    st = add_command(actions, "stats", parents=both, help="chunks, sources, links by type, tiers, size on disk",
                     examples=("rlm memory stats", "rlm memory stats --store team.db --json"))
    st.set_defaults(run=_guarded(_stats))

    pr = add_command(actions, "prune", parents=both,
                     help="decay strengths, promote often-recalled chunks, drop expired and faded ones",
                     examples=("rlm memory prune --dry-run", "rlm memory prune"))
    pr.add_argument("--dry-run", action="store_true", help="only say what would change")
    pr.set_defaults(run=_guarded(_prune))

    re_ = add_command(actions, "reindex", parents=both, help="give every chunk without a vector one (search by meaning)",
                      description="Embed the chunks that have no vector yet (a store made before vectors, or by a\n"
                                  "process without the embedding model), a batch per transaction: interrupted or\n"
                                  "killed, it keeps what it committed and the next run goes on from there. Progress\n"
                                  "on stderr. Vectors of another model are dropped and made again.\n"
                                  "--quality fills the quality tier instead (a contextual model, rlm model install\n"
                                  "minilm-l6: ~0.03 MB of text a second on two cores), newest chunks first, at idle\n"
                                  "priority; search uses those vectors wherever they exist.",
                      examples=("rlm memory reindex", "rlm memory reindex --store team.db --rebuild", "rlm memory reindex --quality"))
    re_.add_argument("--rebuild", action="store_true", help="drop every vector and embed all chunks again")
    re_.add_argument("--quality", action="store_true", help="fill the quality tier's vectors (resumable, at idle priority)")
    re_.add_argument("--threads", type=_threads, metavar="N",
                     help="the quality model's threads (default: the machine's cores less one)")
    re_.add_argument("--batch", type=_positive, default=None, metavar="N",
                     help="chunks per transaction (default 512; 32 with --quality)")
    re_.set_defaults(run=_guarded(_reindex))

    ex = add_command(actions, "export", parents=[store], help="write the whole store as JSON lines",
                     examples=("rlm memory export backup.jsonl", "rlm memory export - | gzip > backup.jsonl.gz"))
    ex.add_argument("file", metavar="FILE", help="the JSONL file to write, or - for standard output")
    ex.set_defaults(run=_guarded(_export))

    im = add_command(actions, "import", parents=both, help="read an export into the store (merged when the store has content)",
                     examples=("rlm memory import backup.jsonl", "gunzip -c backup.jsonl.gz | rlm memory import - --store new.db"))
    im.add_argument("file", metavar="FILE", help="a JSONL export, or - for standard input")
    im.set_defaults(run=_guarded(_import))

    fo = add_command(actions, "forget", parents=both, aliases=["rm"],
                     help="move chunks to the trash, or delete every chunk of a source (rm: the same)",
                     description="Move chunks to the trash: searches, recalls, show and export leave them out;\n"
                                 "rlm memory restore brings them back, rlm memory purge deletes them for good.\n"
                                 "With --source, a source's chunks are deleted at once, for good (a file's come\n"
                                 "back with rlm memory add).",
                     examples=("rlm memory forget 42", "rlm memory forget 42 43", "rlm memory forget --source notes/old/ --dry-run"))
    fo.add_argument("ids", nargs="*", type=_chunk_id, metavar="ID", help="a chunk to move to the trash")
    fo.add_argument("--source", metavar="PATH",
                    help="a stored file's path, a folder (every file stored under it) or a memory label (run:<id>, notes)")
    fo.add_argument("--dry-run", action="store_true", help="with --source: say how many chunks would go, change nothing")
    fo.set_defaults(run=_guarded(_forget))

    from rlm_runtime.cli import memory_curate

    memory_curate.add_commands(actions, both, _chunk_id, _count)


def _chunk_id(text: str) -> int:
    """A chunk's number, as the store shows it (``106``) or as search_chunks and the REPL name
    a memory chunk (``m106``)."""
    try:
        value = int(text.removeprefix("m"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a chunk id: {text!r}") from None
    if not 0 <= value <= _MAX_ID:
        raise argparse.ArgumentTypeError(f"not a chunk id: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text}")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text}")
    return value


def _threads(text: str) -> int:
    value = _positive(text)
    if value > 256:
        raise argparse.ArgumentTypeError(f"must be 256 or fewer: {text}")
    return value


def _confidence(text: str) -> float | str:
    if text.strip().lower() in ("none", ""):
        return "none"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise argparse.ArgumentTypeError(f"must be from 0 to 1 (or none): {text}")
    return value


def _strength(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more: {text}")
    return value


def _words(values: Sequence[str]) -> list[str]:
    """``--tags a,b --tags c`` as ``[a, b, c]``: split at commas, blanks dropped, order kept."""
    return list(dict.fromkeys(w.strip() for v in values for w in v.split(",") if w.strip()))


# ---------------------------------------------------------------------------------- the store


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report an unusable store as its StoreError with exit 2; every other error goes on to
    ``common.run_guarded`` (an unknown id, ChunkNotFound, is a StoreError and exits 1 there)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except _Unusable as e:
            return report_error(args, f"error: {e.error}", str(e.error), type(e.error).__name__, EXIT_USAGE)

    return run


def _store_path(args: argparse.Namespace) -> Path:
    from rlm_runtime.memory import default_store_path

    return Path(os.path.expanduser(args.store)) if args.store else default_store_path()


def _check_store_file(path: Path, *, must_exist: bool) -> None:
    """Refuse a path that holds something other than a memory store, before ``MemoryStore``
    opens it: opened for writing, an SQLite file of another program would be switched to WAL
    and given the store's tables.

    Raises:
        StoreError: no store there (when one must exist), a folder, not SQLite, or an SQLite
            database without the store's migrations table that is not empty.
    """
    from rlm_runtime.memory import StoreError

    if not path.exists():
        if must_exist:
            raise StoreError(f"no memory store at {path} (`rlm memory add PATH` creates one)")
        return
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a memory store file")
    try:
        if path.stat().st_size == 0:
            return  # SQLite takes an empty file for an empty database: a new store
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except (sqlite3.Error, OSError) as e:
        raise StoreError(f"{path} is not a memory store: {e}") from e
    if names and "_migrations" not in names:
        raise StoreError(f"{path} is an SQLite database of something else, not a memory store (left unchanged)")


@contextmanager
def _open(args: argparse.Namespace, *, readonly: bool, must_exist: bool = True) -> Iterator[MemoryStore]:
    """The store of ``--store``, closed at the end; an unusable one raises ``_Unusable``."""
    from rlm_runtime.memory import MemoryStore, StoreError

    path = _store_path(args)
    try:
        _check_store_file(path, must_exist=must_exist or readonly)
        store = MemoryStore(path, readonly=readonly,
                            quality=contextual.factory(paths_from_env().models, getattr(args, "threads", None)))
    except StoreError as e:
        raise _Unusable(e) from e
    try:
        yield store
    finally:
        store.close()


# ---------------------------------------------------------------------------------- formatting


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover - the loop returns


def _when(t: float | None) -> str:
    """A stored time as a date: a store file from elsewhere may hold any number (``timestamps``)."""
    return timestamps.when(t)


def _ids(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:_LIST_IDS])
    return shown + (f" and {len(ids) - _LIST_IDS} more" if len(ids) > _LIST_IDS else "")


def _where(source: str, start_line: int, end_line: int) -> str:
    return f"{one_line(source)}:{start_line}-{end_line}"


def _tags(tags: Sequence[str]) -> str:
    return ",".join(one_line(t) for t in tags)


# ---------------------------------------------------------------------------------- add


class Progress:
    """The ingest's progress on stderr: one line rewritten in place on a terminal (at most ten
    times a second), else a plain line every few seconds, so a log is not flooded."""

    def __init__(self, stream: TextIO, *, live: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.interval = 0.1 if self.live else 5.0
        self.clock = clock
        self.last = clock()
        self.shown = False

    def line(self, p: IngestProgress) -> str:
        rate = p.bytes / 1e6 / p.seconds if p.seconds > 0 else 0.0
        return (f"files {p.files_done:,}/{p.files_total:,}  chunks {p.chunks:,}  {_size(p.bytes)}  {rate:.1f} MB/s  "
                f"{one_line(os.path.basename(p.path))}")

    def __call__(self, p: IngestProgress) -> None:
        now = self.clock()
        last_file = p.files_done == p.files_total and self.live
        if now - self.last < self.interval and not last_file:
            return
        self.last = now
        text = self.line(p)
        try:
            if self.live:  # our own controls: go to the line start, clear to its end; the text is escaped
                width = shutil.get_terminal_size((80, 24)).columns - 1
                self.stream.write(f"\r{text[:width]}\x1b[K")
            else:
                self.stream.write(f"rlm: {text}\n")
            self.stream.flush()
            self.shown = True
        except (OSError, ValueError):
            pass  # progress is a courtesy: a closed stderr must not stop the ingest

    def finish(self) -> None:
        if self.live and self.shown:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def _add(args: argparse.Namespace) -> int:
    if "-" in args.paths:
        from rlm_runtime.cli.memory_curate import add_note

        if len(args.paths) > 1:
            raise UsageError("- (a note from standard input) cannot be given with other paths")
        return add_note(args, _words(args.tags))
    if args.source is not None:
        raise UsageError("--source is the label of a note read from standard input (rlm memory add -)")
    for path in args.paths:
        if not os.path.lexists(path):
            raise UsageError(f"no such file or folder: {path}")
    progress = Progress(sys.stderr)
    with _open(args, readonly=False, must_exist=False) as store:
        try:
            report = store.ingest(args.paths, tags=_words(args.tags), kind=args.kind or None, progress=progress)
        finally:
            progress.finish()
        total = store.stats()
    skipped = [s for s in report.skipped if not s.stored]
    nothing = bool(skipped) and report.files == 0 and report.unchanged == 0
    if args.json:
        print_json(args, {**report.to_dict(), "store": str(store.path), "store_chunks": total.chunks})
        return EXIT_FAILED if nothing else EXIT_OK
    say(f"stored {plural(report.files, 'file')} ({_size(report.bytes)} in {report.seconds:.2f} s, {report.mb_per_s:.1f} MB/s): "
        f"{plural(report.chunks_added, 'new chunk')}, {report.chunks_kept:,} kept, {report.chunks_removed:,} removed")
    if report.unchanged or report.removed_files:
        say(f"unchanged: {plural(report.unchanged, 'file')}; gone from their folder: {plural(report.removed_files, 'file')}")
    for note in (s for s in report.skipped if s.stored):
        say(f"note: {one_line(note.path)}: {one_line(note.reason)}")
    if skipped:
        _say_skipped(skipped, verbose=args.verbose)
    say(f"store: {store.path} ({plural(total.chunks, 'chunk')} from {plural(total.sources, 'source')})")
    return EXIT_FAILED if nothing else EXIT_OK


#: Paths listed by ``memory add`` without ``--verbose``: beyond them, counts by reason.
SKIPPED_LISTED = 5


def _say_skipped(skipped: list[Any], *, verbose: bool) -> None:
    """What ``add`` skipped: each path with ``verbose`` or when there are few; else how many
    for each reason and the first path of each (a documentation tree skips thousands)."""
    if verbose or len(skipped) <= SKIPPED_LISTED:
        say(f"skipped {plural(len(skipped), 'path')}:")
        for s in skipped:
            say(f"  {one_line(s.path)}: {one_line(s.reason)}")
        return
    by_reason: dict[str, list[Any]] = {}
    for s in skipped:
        by_reason.setdefault(_reason_kind(s.reason), []).append(s)
    say(f"skipped {plural(len(skipped), 'path')} (--verbose lists them):")
    for reason, paths in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        say(f"  {len(paths):,} {one_line(reason)} (the first: {one_line(paths[0].path)})")


def _reason_kind(reason: str) -> str:
    """A reason without its particulars (an OS message after a colon, a count): what groups it."""
    head = reason.split(":", 1)[0].strip()
    return head[:80] or "no reason given"


# ---------------------------------------------------------------------------------- search, show


def _search(args: argparse.Namespace) -> int:
    with _open(args, readonly=True) as store:
        # record=False: a person searching from a shell is looking, not recalling for an
        # answer. Counting these hits would reinforce (and in time promote) whatever someone
        # happened to inspect, while the lifecycle is meant to follow what runs use; it also
        # keeps the search read-only (no write lock, works on a read-only store).
        hits = store.search(args.query, k=args.k, kind=_words(args.kind) or None, tags=_words(args.tags) or None,
                            source=args.source, record=False, mode=args.mode)
    if args.json:
        print_json(args, {**hits.to_dict(), "store": str(store.path)})
        return EXIT_OK if hits else EXIT_FAILED
    # Words only, said when meaning was asked for: by default it is what a store without
    # vectors (or an install without the embed extra) always does, and no news.
    fallback = hits.fallback if args.mode is not None else None
    meaning_only = bool(hits) and all(h.by == "meaning" for h in hits)
    if hits.dropped or hits.capped or fallback or meaning_only:
        left = f"left out common words: {', '.join(one_line(w) for w in hits.dropped)}" if hits.dropped else ""
        capped = f"only common words: ranked the {hits.scanned:,} newest matching chunks" if hits.capped else ""
        words_only = f"ranked by words only: {one_line(fallback)}" if fallback else ""
        nearest = "no chunk holds the query's words: these are the nearest in meaning" if meaning_only else ""
        say(f"rlm: note: {'; '.join(x for x in (left, capped, words_only, nearest) if x)}", err=True)
    if not hits:
        terms = " ".join(one_line(t) for t in hits.terms) or one_line(args.query)
        say(f"rlm: no chunks match: {terms}", err=True)
        return EXIT_FAILED
    for h in hits:
        tags = f"  tags: {_tags(h.tags)}" if h.tags else ""
        by = "  (by meaning)" if h.by == "meaning" else ""
        say(f"{h.chunk_id}  {_where(h.source, h.start_line, h.end_line)}  {one_line(h.kind)}  score {h.score:.3g}{tags}{by}")
        if h.summary is not None or h.confidence is not None:
            say(f"    {_qualified(h.summary, h.confidence)}")
        say(f"    {one_line(h.snippet)[:400]}")
    return EXIT_OK


def _recall(args: argparse.Namespace) -> int:
    with _open(args, readonly=True) as store:
        for seed in args.seeds:
            store.chunk_stats(seed)  # an unknown chunk is an error, not an empty recall
        # Not recorded: as with search, a person looking is not a run recalling.
        hits = store.recall(args.query or None, seeds=args.seeds, k=args.k, record=False)
    if args.json:
        print_json(args, {**hits.to_dict(), "store": str(store.path)})
        return EXIT_OK if hits else EXIT_FAILED
    if not hits:
        say("rlm: nothing to recall" + (f" for {one_line(args.query)}" if args.query else "")
            + (f" from {', '.join(map(str, args.seeds))}" if args.seeds else ""), err=True)
        return EXIT_FAILED
    for h in hits:
        p = h.parts
        parts = f"  (text {p.text:.2f}, link {p.link:.2f}, recency {p.recency:.2f}, reinforcement {p.reinforcement:.2f})" if p else ""
        say(f"{h.chunk_id}  {_where(h.source, h.start_line, h.end_line)}  score {h.score:.3g}{parts}")
        if h.summary is not None or h.confidence is not None:
            say(f"    {_qualified(h.summary, h.confidence)}")
        say(f"    {one_line(h.snippet)[:400]}")
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    from rlm_runtime.memory import ChunkNotFound
    from rlm_runtime.memory.links import SYMMETRIC_TYPES

    with _open(args, readonly=True) as store:
        try:
            view = store.read(args.id, around=args.around, record=False)
        except ChunkNotFound:
            if store.in_trash(args.id):
                raise ChunkNotFound(args.id, f"it is in the trash: rlm memory restore {args.id}") from None
            raise
        stats = store.chunk_stats(args.id)
        versions = store.history(args.id)[:-1] if args.history else []
        found = store.links(args.id) if args.links else []
        others = {v.chunk_id: v for v in store.read_many([_other(link, args.id) for link in found[:_LIST_LINKS]], record=False)}
    if args.json:
        value: dict[str, Any] = {"chunk": view.to_dict(), "stats": stats.to_dict()}
        if args.links:
            value["links"] = [link.to_dict() for link in found]
        if args.history:
            value["history"] = [v.to_dict() for v in versions]
        print_json(args, value)
        return EXIT_OK
    tags = f", tags: {_tags(view.tags)}" if view.tags else ""
    say(f"chunk {view.chunk_id} of {one_line(view.source)} ({one_line(view.source_kind)}), lines {view.start_line}-{view.end_line}, "
        f"bytes {view.start_byte}-{view.end_byte}, {view.tokens:,} tokens, kind {one_line(view.kind)}{tags}")
    say(f"created {_when(view.created)}; recalled {plural(stats.recall_count, 'time')} (last {_when(stats.last_recall)}); "
        f"strength {stats.strength:.2f}, {stats.tier}{', pinned' if stats.pinned else ''}; expires {_when(stats.expires_at)}")
    if view.run_id or view.meta:
        say(f"run {one_line(view.run_id or '-')}; meta {one_line(repr(view.meta))[:300]}")
    if view.summary is not None or view.confidence is not None:
        say(_qualified(view.summary, view.confidence))
    if view.before or view.after:
        for v in (*view.before, view, *view.after):
            say(f"--- chunk {v.chunk_id}, lines {v.start_line}-{v.end_line}{' (this one)' if v is view else ''} ---")
            say(v.text)
    else:
        say("---")
        say(view.text)
    if args.history:
        say(f"--- {plural(len(versions), 'earlier version')} ---" if versions else "--- no earlier version (never edited) ---")
        for old in versions:
            say(f"version {old.version}, {_when(old.since)} to {_when(old.replaced)}: kind {one_line(old.kind)}"
                f"{f', tags: {_tags(old.tags)}' if old.tags else ''}")
            if old.summary is not None or old.confidence is not None:
                say(f"  {_qualified(old.summary, old.confidence)}")
            say("  " + "\n  ".join(old.text.splitlines() or [""]))
    if args.links:
        say(f"--- {plural(len(found), 'link')} ---")
        for link in found[:_LIST_LINKS]:
            say(_link_line(link, args.id, others, SYMMETRIC_TYPES))
        if len(found) > _LIST_LINKS:
            say(f"... and {len(found) - _LIST_LINKS} more (--json lists them all)")
    return EXIT_OK


def _qualified(summary: str | None, confidence: float | None) -> str:
    """A chunk's summary and confidence as one line."""
    parts = [f"summary: {one_line(summary)[:300]}"] if summary is not None else []
    if confidence is not None:
        parts.append(f"confidence {confidence:.2f}")
    return "; ".join(parts)


def _edit(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.stdin import read_bytes
    from rlm_runtime.memory.edits import KEEP, Edit

    text: str | None = args.text
    if text == "-":
        text = read_bytes(16 << 20, command="rlm memory edit --text -", too_long="more than 16 MB").decode("utf-8", "replace")
    edit = Edit(text=KEEP if text is None else text, kind=KEEP if args.kind is None else args.kind,
                add_tags=tuple(_words(args.tags)), remove_tags=tuple(_words(args.untag)),
                summary=KEEP if args.summary is None else (args.summary or None),
                confidence=KEEP if args.confidence is None else (None if args.confidence == "none" else args.confidence))
    if edit == Edit():
        raise UsageError("say what to change: --text, --kind, --tag, --untag, --summary or --confidence")
    with _open(args, readonly=False) as store:
        done = store.edit(args.id, edit)
    if args.json:
        print_json(args, {"chunk_id": done.chunk_id, "changed": list(done.changed), "kept_version": done.kept_version})
        return EXIT_OK
    if not done.changed:
        say(f"chunk {done.chunk_id} already holds that: nothing changed")
        return EXIT_OK
    say(f"edited chunk {done.chunk_id}: {', '.join(done.changed)}; the version before is kept "
        f"(rlm memory show {done.chunk_id} --history)")
    return EXIT_OK


def _other(link: Link, chunk_id: int) -> int:
    return link.dst if link.src == chunk_id else link.src


def _link_line(link: Link, chunk_id: int, others: dict[int, ChunkView], symmetric: frozenset[str]) -> str:
    other = _other(link, chunk_id)
    arrow = "<->" if link.type in symmetric else ("->" if link.src == chunk_id else "<-")
    v = others.get(other)
    where = f"{_where(v.source, v.start_line, v.end_line)}  {one_line(v.text)[:60]}" if v else "(chunk gone)"
    return f"  {one_line(link.type)} {arrow} {other}  strength {link.strength:.2f} x{link.count}  {where}"


# ---------------------------------------------------------------------------------- link, stats, prune


def _link(args: argparse.Namespace) -> int:
    from rlm_runtime.memory.links import SYMMETRIC_TYPES

    kind = args.type.strip()
    if not kind:
        raise UsageError("a link needs a type (supports, contradicts, ...)")
    if args.a == args.b:
        raise UsageError("a chunk cannot be linked to itself")
    with _open(args, readonly=False) as store:
        store.link(args.a, args.b, kind, args.strength)
        made = next((x for x in store.links(args.a, kind) if {x.src, x.dst} == {args.a, args.b}), None)
    if args.json:
        print_json(args, made.to_dict() if made else {"src": args.a, "dst": args.b, "type": kind, "strength": args.strength})
        return EXIT_OK
    arrow = "<->" if kind in SYMMETRIC_TYPES else "->"
    say(f"linked {args.a} {arrow} {args.b} as {one_line(kind)} (strength {args.strength:g})")
    return EXIT_OK


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{seconds:.0f} s" if seconds < 90 else f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def _stats(args: argparse.Namespace) -> int:
    with _open(args, readonly=True) as store:
        s = store.stats()
    if args.json:
        print_json(args, s.to_dict())
        return EXIT_OK
    links = ", ".join(f"{one_line(t)} {n:,}" for t, n in s.links_by_type.items()) or "none"
    tiers = ", ".join(f"{one_line(t)} {n:,}" for t, n in s.tiers.items()) or "none"
    say(f"store: {s.path}")
    say(f"chunks: {s.chunks:,} ({s.tokens:,} tokens) from {plural(s.sources, 'source')}")
    say(f"links: {sum(s.links_by_type.values()):,} ({links})")
    say(f"tiers: {tiers}; pinned {s.pinned:,}")
    say(f"trash: {plural(s.deleted, 'chunk')}" + (" (rlm memory list --deleted; rlm memory purge)" if s.deleted else ""))
    say(f"recall traces: {s.traces:,}")
    say(f"vectors: {s.vectors:,} of {s.chunks:,} chunks" + (f" ({one_line(s.vector_model)})" if s.vector_model else "")
        + (" (rlm memory reindex gives the others theirs)" if s.vectors < s.chunks else ""))
    if s.quality_model or s.quality_vectors:
        eta = f"; about {_duration(s.quality_eta_s)} more (rlm memory reindex --quality)" if s.quality_eta_s else ""
        say(f"quality vectors: {s.quality_vectors:,} of {s.chunks:,} chunks ({one_line(s.quality_model or '?')}){eta}")
    say(f"size on disk: {_size(s.size_bytes)}")
    say(f"migrations: {len(s.migrations)} ({s.migrations[-1] if s.migrations else 'none'})")
    return EXIT_OK


class ReindexProgress:
    """A reindex's progress on stderr: a line rewritten in place on a terminal, else a plain
    line every few seconds (``Progress``'s rules)."""

    def __init__(self, stream: TextIO) -> None:
        self.out = Progress(stream)

    def __call__(self, p: Any) -> None:
        now = self.out.clock()
        if now - self.out.last < self.out.interval and p.done < p.total:
            return
        self.out.last = now
        rate = p.done / p.seconds if p.seconds > 0 else 0.0
        text = f"vectors {p.done:,}/{p.total:,} chunks  {rate:,.0f} chunks/s"
        try:
            if self.out.live:
                self.out.stream.write(f"\r{text}\x1b[K")
            else:
                self.out.stream.write(f"rlm: {text}\n")
            self.out.stream.flush()
            self.out.shown = True
        except (OSError, ValueError):
            pass

    def finish(self) -> None:
        self.out.finish()


def _reindex(args: argparse.Namespace) -> int:
    progress = ReindexProgress(sys.stderr)
    with _open(args, readonly=False) as store:
        try:
            if args.quality:
                _idle()
                report = store.fill_quality(rebuild=args.rebuild, progress=progress, batch=args.batch or 0)
            else:
                report = store.reindex(rebuild=args.rebuild, progress=progress, batch=args.batch or 0)
        finally:
            progress.finish()
        total = store.stats()
    have = total.quality_vectors if args.quality else total.vectors
    if args.json:
        print_json(args, {**report.to_dict(), "store": str(store.path), "vectors": have, "chunks": total.chunks})
        return EXIT_OK
    again = "dropped the vectors of another model; " if report.rebuilt else ""
    say(f"{again}embedded {plural(report.embedded, 'chunk')} in {report.seconds:.1f} s ({one_line(report.model)}); "
        f"{report.kept:,} had a vector already")
    say(f"store: {store.path} ({have:,} of {plural(total.chunks, 'chunk')} with a {'quality ' if args.quality else ''}vector)")
    return EXIT_OK


def _idle() -> None:
    """This process at the lowest CPU priority: a fill of the quality tier gives way to
    whatever else the machine does."""
    try:
        os.nice(19)
    except (AttributeError, OSError):  # no nice on this system, or not allowed: at the priority it has
        pass


def _prune(args: argparse.Namespace) -> int:
    # Decay first: prune then judges strengths as of now. A dry run writes nothing, so it
    # opens the store read-only.
    with _open(args, readonly=args.dry_run) as store:
        decay = store.decay_and_promote(dry_run=args.dry_run)
        pruned = store.prune(dry_run=args.dry_run)
    if args.json:
        print_json(args, {"dry_run": args.dry_run, "decay": decay.to_dict(), "prune": pruned.to_dict()})
        return EXIT_OK
    would = "would be " if args.dry_run else ""
    promoted = f": {_ids(decay.promoted)}" if decay.promoted else ""
    say(f"decay: {plural(decay.decayed, 'strength')} {would}decayed; {plural(len(decay.promoted), 'chunk')} {would}promoted "
        f"to long-term{promoted}")
    why: dict[str, list[int]] = {}
    for chunk_id in pruned.removed:
        why.setdefault(one_line(pruned.reasons.get(chunk_id, "?")), []).append(chunk_id)
    detail = "; ".join(f"{reason}: {_ids(ids)}" for reason, ids in why.items())
    say(f"prune: {plural(len(pruned.removed), 'chunk')} {would}removed{f' ({detail})' if detail else ''}; "
        f"{plural(pruned.traces_removed, 'recall trace')} {would}removed")
    if args.dry_run:
        say("dry run: nothing was changed")
    return EXIT_OK


# ---------------------------------------------------------------------------------- export, import, forget


def _export(args: argparse.Namespace) -> int:
    with _open(args, readonly=True) as store:
        if args.file == "-":
            try:
                n = store.export_jsonl(sys.stdout)
                sys.stdout.flush()
            except BrokenPipeError as e:
                raise OutputClosed() from e
            say(f"exported {plural(n, 'record')}", err=True)
            return EXIT_OK
        target = Path(args.file)
        if target.exists() and target.resolve() in {Path(f"{store.path.resolve()}{end}") for end in ("", "-wal", "-shm")}:
            raise UsageError(f"{args.file} is the store itself")
        # Written beside the target and renamed at the end: a failed export leaves no half file.
        partial = target.with_name(f"{target.name}.partial")
        try:
            with private.open_write(partial) as fh:  # the store's text, 0600 like it
                n = store.export_jsonl(fh)
            os.replace(partial, target)
        except OSError as e:
            raise UsageError(f"cannot write {args.file}: {e.strerror or e}") from e
        finally:
            if partial.exists():
                partial.unlink()
    say(f"exported {plural(n, 'record')} to {args.file}")
    return EXIT_OK


@contextmanager
def _input(name: str) -> Iterator[TextIO]:
    if name == "-":
        yield sys.stdin
        return
    try:
        # Undecodable bytes are read as surrogates: the import names the line that holds them.
        fh = open(name, encoding="utf-8", newline="", errors="surrogateescape")  # closed by the with below
    except OSError as e:
        raise unreadable(name, e) from e
    with fh:
        yield fh


def _import(args: argparse.Namespace) -> int:
    from rlm_runtime.memory import StoreError

    with _input(args.file) as fh, _open(args, readonly=False, must_exist=False) as store:
        try:
            counts = store.import_jsonl(fh)
        except UnicodeDecodeError as e:
            raise UsageError(f"{args.file} is not a memory store export: not UTF-8 text ({e.reason})") from e
        except StoreError as e:
            raise _Unusable(StoreError(f"{args.file}: {e}")) from e  # the file is not a (valid) export
    if args.json:
        print_json(args, {**counts, "store": str(store.path)})
        return EXIT_OK
    merged = f"; {plural(counts['merged'], 'chunk')} already stored" if counts.get("merged") else ""
    say(f"imported {plural(counts.get('source', 0), 'source')}, {plural(counts.get('chunk', 0), 'chunk')}, "
        f"{plural(counts.get('link', 0), 'link')}, {plural(counts.get('trace', 0), 'recall trace')}{merged} into {store.path}")
    return EXIT_OK


def _forget(args: argparse.Namespace) -> int:
    from rlm_runtime.memory import StoreError

    if bool(args.ids) == (args.source is not None):
        raise UsageError("give chunk ids or --source, not both nor neither")
    if args.ids:
        from rlm_runtime.cli.memory_curate import forget_ids

        return forget_ids(args)
    dry = bool(args.dry_run)
    with _open(args, readonly=False) as store:
        n = store.forget_source(args.source, dry_run=dry)
    if n == 0:
        raise StoreError(f"no source {args.source} (nor files under it) with chunks in the memory store")
    value = {"source": args.source, "chunks": n, "dry_run": dry}
    line = f"{'would forget' if dry else 'forgot'} {plural(n, 'chunk')} of {args.source} (for good: a source skips the trash)"
    if args.json:
        print_json(args, value)
    else:
        say(line)
    return EXIT_OK


# What ``memory_curate`` shares with the commands here: one way to open the store and print.
guarded = _guarded
open_store = _open
id_list = _ids
when = _when
where = _where
tag_text = _tags
words = _words
