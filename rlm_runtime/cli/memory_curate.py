"""The ``rlm memory`` commands that curate the store by hand: a note from standard input
(``add -``), ``list`` without a query, ``pin`` / ``unpin``, ``ttl``, ``unlink``, and the trash:
``forget ID`` moves chunks there, ``restore`` brings them back, ``purge`` deletes them for good.
Each is one ``MemoryStore`` call; ``cli.memory`` registers them and shares its store opening,
argument types and formatting.

Ids are handled one by one: a command given several does what it can and names the ids it
could not use (unknown, or in the trash when it needs a live chunk) with exit 1. Standard
input is bounded (``NOTE_MAX_BYTES``); durations (``30d``, ``12h``) and dates are checked by
argparse, so a bad one is a usage error (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import codecs
import re
import time
from typing import Any

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_command, print_json, say
from rlm_runtime.termsafe import one_line

#: The most bytes a note read from standard input may hold (a longer text is a file: ``rlm memory add FILE``).
NOTE_MAX_BYTES = 1 << 20
#: The most chunks ``list -n`` shows.
LIST_MAX = 10_000
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
#: The longest duration accepted (a hundred years): beyond, say ``never``.
_MAX_DURATION_S = 100 * 365 * 86400.0


def duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (a number and a unit) as seconds."""
    m = re.fullmatch(r"\s*(\d{1,12}(?:\.\d{1,6})?)\s*([smhdw])\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (a number and a unit: 45s, 90m, 12h, 30d, 2w)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not 0 < seconds <= _MAX_DURATION_S:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (more than 0, at most 100 years)")
    return seconds


def ttl_value(text: str) -> float | None:
    """A duration, or ``never`` (None)."""
    return None if text.strip().lower() == "never" else duration(text)


def moment(text: str) -> float:
    """A date (``2026-11-27``), a local date and time (``2026-11-27T14:30``), or a duration
    before now (``7d``), as seconds since the epoch."""
    value = text.strip()
    for layout in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            return time.mktime(time.strptime(value, layout))
        except (ValueError, OverflowError):
            continue
    try:
        return time.time() - duration(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (YYYY-MM-DD, YYYY-MM-DDTHH:MM, or a time ago: 7d)") from None


def _day_after(text: str) -> float:
    """``--until``'s bound: a bare date includes its whole day."""
    at = moment(text)
    return at + 86400.0 if re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", text) else at


def add_commands(actions: Any, parents: list[argparse.ArgumentParser], chunk_id: Any, count: Any) -> None:
    """Register the curation commands on ``rlm memory``'s table of actions (``parents``: the
    ``--store`` and ``--json`` options; ``chunk_id`` / ``count``: ``cli.memory``'s types)."""
    from rlm_runtime.cli.memory import guarded

    def positive(text: str) -> int:
        value = count(text)
        if not 1 <= value <= LIST_MAX:
            raise argparse.ArgumentTypeError(f"must be 1 to {LIST_MAX:,}: {text}")
        return int(value)

    ls = add_command(actions, "list", parents=parents, help="list chunks without a query, newest first, by tag, kind, date, tier",
                     examples=("rlm memory list --tag work --since 7d -n 50", "rlm memory list --pinned --json",
                               "rlm memory list --deleted"))
    ls.add_argument("--tag", "--tags", dest="tags", action="append", default=[], metavar="A,B", help="only chunks having every tag")
    ls.add_argument("--kind", action="append", default=[], metavar="K", help="only chunks of this kind (repeatable, or K1,K2)")
    ls.add_argument("--since", type=moment, metavar="WHEN", help="stored at or after: YYYY-MM-DD[THH:MM] or a time ago (7d)")
    ls.add_argument("--until", type=_day_after, metavar="WHEN", help="stored before the end of this date (or this time)")
    ls.add_argument("--tier", choices=["working", "long_term", "long-term", "pinned"],
                    help="only chunks of this tier (pinned: as --pinned)")
    ls.add_argument("--pinned", action="store_true", help="only pinned chunks")
    ls.add_argument("--deleted", action="store_true", help="list the trash (chunks forgotten and not yet purged)")
    ls.add_argument("-n", type=positive, default=20, metavar="N", help="chunks shown (default 20)")
    ls.set_defaults(run=guarded(_list))

    for name, on in (("pin", True), ("unpin", False)):
        p = add_command(actions, name, parents=parents,
                        help="pin chunks: never pruned" if on else "unpin chunks: pruned again when they fade or expire",
                        examples=(f"rlm memory {name} 42", f"rlm memory {name} 42 43 57"))
        p.add_argument("ids", nargs="+", type=chunk_id, metavar="ID")
        p.set_defaults(run=guarded(_pin), on=on)

    tt = add_command(actions, "ttl", parents=parents, help="set how long a chunk lives before prune drops it (or never)",
                     examples=("rlm memory ttl 42 30d", "rlm memory ttl 42 never"),
                     notes="durations: 45s, 90m, 12h, 30d, 2w; a pinned or long-term chunk is never dropped for it")
    tt.add_argument("id", type=chunk_id, metavar="ID")
    tt.add_argument("ttl", type=ttl_value, metavar="DURATION|never")
    tt.set_defaults(run=guarded(_ttl))

    ul = add_command(actions, "unlink", parents=parents, help="remove the link of a type between chunks A and B",
                     examples=("rlm memory unlink 12 40 supports", "rlm memory unlink 12 57 related_to"))
    ul.add_argument("a", type=chunk_id, metavar="A")
    ul.add_argument("b", type=chunk_id, metavar="B")
    ul.add_argument("type", metavar="TYPE")
    ul.set_defaults(run=guarded(_unlink))

    rs = add_command(actions, "restore", parents=parents, help="bring forgotten chunks back from the trash",
                     examples=("rlm memory restore 42", "rlm memory list --deleted"))
    rs.add_argument("ids", nargs="+", type=chunk_id, metavar="ID")
    rs.set_defaults(run=guarded(_restore))

    pu = add_command(actions, "purge", parents=parents, help="delete the trash for good (forgotten chunks)",
                     examples=("rlm memory purge --dry-run", "rlm memory purge --older-than 30d"))
    pu.add_argument("--older-than", type=duration, metavar="DURATION", help="only chunks forgotten at least this long ago")
    pu.add_argument("--dry-run", action="store_true", help="only say what would go")
    pu.set_defaults(run=guarded(_purge))


def add_note(args: argparse.Namespace, tags: list[str]) -> int:
    """``rlm memory add -``: standard input stored as a note under ``--source``."""
    from rlm_runtime.cli.memory import open_store

    text = read_note()
    label = (args.source or "notes").strip()
    if not label or len(label) > 200:
        raise UsageError("--source needs a label of 1 to 200 characters")
    with open_store(args, readonly=False, must_exist=False) as store:
        added = store.store_text(text, source=label, kind=args.kind or None, tags=tags)
        total = store.stats()
    if args.json:
        print_json(args, {**added.to_dict(), "source": label, "store": str(store.path), "store_chunks": total.chunks})
        return EXIT_OK
    held = [i for i in added.ids if i not in added.new]
    if added.new:
        say(f"stored a note from standard input as {_chunks(list(added.new))} of {one_line(label)}")
    if held:  # identical text is stored once (``MemoryStore.store_text``)
        say(f"already held as {_chunks(list(dict.fromkeys(held)))}" + (": tags added" if tags else ""))
    say(f"store: {store.path} ({total.chunks:,} chunks)")
    return EXIT_OK


def read_note(limit: int = NOTE_MAX_BYTES) -> str:
    """Standard input as a note's text: at most ``limit`` bytes, UTF-8 text, not blank.

    Raises:
        UsageError: no standard input, over the limit, binary, not UTF-8, or blank.
    """
    from rlm_runtime.cli.stdin import read_bytes
    from rlm_runtime.context.buffer import looks_binary

    data = read_bytes(limit, command="rlm memory add -",
                      too_long=f"more than {limit:,} bytes: a text that long is a file (rlm memory add FILE)")
    data = data.removeprefix(codecs.BOM_UTF8)
    if looks_binary(data[:8192]):
        raise UsageError("standard input looks like binary data (NUL or control bytes): a note is text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"standard input is not UTF-8 text ({e.reason} at byte {e.start})") from e
    if not text.strip():
        raise UsageError("standard input is empty: nothing to store")
    return text


def _chunks(ids: list[int] | tuple[int, ...]) -> str:
    from rlm_runtime.cli.memory import id_list

    return f"chunk {ids[0]}" if len(ids) == 1 else f"{len(ids):,} chunks ({id_list(ids)})"


def _changed(args: argparse.Namespace, changed: Any, done_text: str) -> int:
    """Report a ``Changed``: what was done, and each id that was not (exit 1 when any)."""
    if args.json:
        print_json(args, {**changed.to_dict(), "store": str(args.store_path)})
    else:
        if changed.done:
            say(f"{done_text} {_chunks(changed.done)}")
        for i in changed.missing:
            say(f"rlm: error: no chunk with id {i} in the memory store {args.missing_why}", err=True)
    return EXIT_FAILED if changed.missing else EXIT_OK


def _pin(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.memory import open_store

    with open_store(args, readonly=False) as store:
        changed = store.pin(args.ids, args.on)
        args.store_path = store.path
    args.missing_why = "(or it is in the trash)"
    return _changed(args, changed, "pinned" if args.on else "unpinned")


def _ttl(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.memory import open_store, when

    with open_store(args, readonly=False) as store:
        at = None if args.ttl is None else store.clock() + args.ttl
        changed = store.expire([args.id], at)
        args.store_path = store.path
    args.missing_why = "(or it is in the trash)"
    if args.json and changed.done:
        print_json(args, {**changed.to_dict(), "expires_at": at, "store": str(store.path)})
        return EXIT_OK
    return _changed(args, changed, "never expires:" if at is None else f"expires {when(at)}:")


def _unlink(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.memory import open_store
    from rlm_runtime.memory import StoreError

    kind = args.type.strip()
    if not kind:
        raise UsageError("a link needs a type (supports, related_to, ...)")
    with open_store(args, readonly=False) as store:
        gone = store.unlink(args.a, args.b, kind)
    if not gone:
        raise StoreError(f"no {kind} link between chunks {args.a} and {args.b}")
    if args.json:
        print_json(args, {"src": args.a, "dst": args.b, "type": kind, "removed": True})
    else:
        say(f"removed the {one_line(kind)} link between {args.a} and {args.b}")
    return EXIT_OK


def forget_ids(args: argparse.Namespace) -> int:
    """``rlm memory forget ID...``: the chunks to the trash."""
    from rlm_runtime.cli.memory import open_store

    with open_store(args, readonly=False) as store:
        changed = store.forget(args.ids)
        args.store_path = store.path
    args.missing_why = "(or it is in the trash already)"
    code = _changed(args, changed, "moved to the trash:")
    if changed.done and not args.json:
        say("rlm memory restore ID brings a chunk back; rlm memory purge deletes the trash for good")
    return code


def _restore(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.memory import open_store

    with open_store(args, readonly=False) as store:
        changed = store.restore(args.ids)
        args.store_path = store.path
    args.missing_why = "(in the trash)"
    return _changed(args, changed, "restored")


def _purge(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.memory import id_list, open_store

    with open_store(args, readonly=args.dry_run) as store:
        ids = store.purge(args.older_than, dry_run=args.dry_run)
    if args.json:
        print_json(args, {"purged": ids, "dry_run": args.dry_run, "store": str(store.path)})
        return EXIT_OK
    verb = "would delete" if args.dry_run else "deleted"
    say(f"{verb} {len(ids):,} chunk{'' if len(ids) == 1 else 's'} of the trash for good" + (f": {id_list(ids)}" if ids else ""))
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    from rlm_runtime.cli.memory import open_store, tag_text, when, where, words
    from rlm_runtime.memory.curation import ListFilter

    if args.since is not None and args.until is not None and args.since >= args.until:
        raise UsageError("--since must come before --until")
    # The tiers as ``rlm memory stats`` names them: "pinned" is the pinned chunks of any tier.
    tier = {"long-term": "long_term", "pinned": None}.get(args.tier, args.tier)
    f = ListFilter(tags=tuple(words(args.tags)), kinds=tuple(words(args.kind)), since=args.since, until=args.until,
                   tier=tier, pinned=args.pinned or args.tier == "pinned", deleted=args.deleted)
    with open_store(args, readonly=True) as store:
        found = store.list_chunks(f, limit=args.n)
    if args.json:
        print_json(args, {"chunks": [c.to_dict() for c in found], "store": str(store.path)})
        return EXIT_OK if found else EXIT_FAILED
    if not found:
        say(f"rlm: no chunks {'in the trash' if args.deleted else 'match'}", err=True)
        return EXIT_FAILED
    for c in found:
        marks = [m for m in ("pinned" if c.pinned else "", "long-term" if c.tier == "long_term" else "",
                             f"expires {when(c.expires_at)}" if c.expires_at is not None else "",
                             f"forgotten {when(c.deleted_at)}" if c.deleted_at is not None else "") if m]
        tags = f"  tags: {tag_text(c.tags)}" if c.tags else ""
        state = f"  [{', '.join(marks)}]" if marks else ""
        say(f"{c.chunk_id}  {when(c.created)}  {where(c.source, c.start_line, c.end_line)}  {one_line(c.kind)}{tags}{state}")
        say(f"    {one_line(c.preview)[:120]}")
    return EXIT_OK

