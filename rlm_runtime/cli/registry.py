"""``rlm context add|list|show|rm|refresh|stats``: the registry of named contexts
(``rlm_runtime.registry``, ``$RLM_HOME/registry.db``). Each command is one ``Registry`` call;
this module parses, opens the registry and prints.

A person on the command line is a trusted caller: the path they type is the permission (no
roots). ``add --kind text`` stores a text in the registry itself: from standard input with
``-`` as the path, or a copy of a file's text (at most ``registry.metadata.MAX_TEXT_BYTES``).

Names, tags and paths were written by someone (a file's name can hold terminal controls):
they are printed through ``say`` (escaped) after ``one_line``, or in the one JSON object.

Exit codes (those of ``rlm``, see ``cli.common``): 0 done; 2 bad usage: an unknown id (with
the nearest one suggested), an id taken or not of the form ``[a-z0-9][a-z0-9_.-]{0,63}``, a
missing path, a kind that does not fit, a text too large, a ``registry.db`` that is not one, a
context whose row there is damaged (``list`` and ``stats`` leave it out with a warning; ``rm``
removes it).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlm_runtime import timestamps
from rlm_runtime.cli.common import EXIT_OK, UsageError, add_actions, add_command, print_json, say, unreadable
from rlm_runtime.errors import DamagedContext
from rlm_runtime.termsafe import one_line

if TYPE_CHECKING:
    from rlm_runtime.registry import Entry, Registry, Usage

_KINDS = ("file", "folder", "text", "memory")
#: The context types (``registry.types.TYPES``), written out: the parser is built without importing the registry.
_TYPES = ("identity", "project", "temporal", "document", "memory", "tool_result")


def add_commands(commands: Any) -> None:
    """Register ``rlm context ...`` on ``rlm``'s subcommand table."""
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print one JSON object")
    group = add_command(
        commands, "context", help="named contexts that persist: add, list, show, type, always, rm, refresh, stats",
        description="The registry of named contexts ($RLM_HOME/registry.db): files, folders, texts and memory stores\n"
                    "registered once under an id, then named ctx:ID wherever a context is accepted (rlm ask -c,\n"
                    "rlm repl -c and /context add, rlm peek|grep|chunk, eval task files, Session(contexts=[...])).\n"
                    "Each keeps its probe's metadata and how runs used it, and has a type saying how it is loaded:\n"
                    "identity is in every question (rlm context always shows what they see), the others when named.",
        examples=("rlm context add notes/ --id notes --tag work", 'rlm ask "What did we decide?" -c ctx:notes',
                  "rlm context list --tag work"),
        notes="exit codes: 0 done; 2 bad usage (an unknown or taken id, a missing path, a registry.db that is not one,\n"
              "a context damaged in it: rlm context rm ID removes it)")
    actions = add_actions(group)

    ad = add_command(actions, "add", parents=[as_json], help="register a file, a folder, a text or a memory store",
                     description="Register PATH under an id (default: derived from the name, made unique). --kind text "
                                 "stores a text in the registry itself: PATH - reads standard input, a file's text is "
                                 "copied (8 MB at most).",
                     examples=("rlm context add docs/ --id docs --tag project-x --tag handbook",
                               "git log | rlm context add - --kind text --name 'git log'",
                               "rlm context add ~/.rlm/brain/memory.db --id mem"))
    ad.add_argument("path", help="a file, a folder, a memory store file, or - (with --kind text)")
    ad.add_argument("--id", dest="context_id", metavar="ID", help="its id: [a-z0-9][a-z0-9_.-]{0,63}")
    ad.add_argument("--name", help="its display name (default: the file or folder's name)")
    ad.add_argument("--kind", choices=_KINDS, help="file, folder, text or memory (default: what PATH is)")
    ad.add_argument("--tag", action="append", default=[], metavar="TAG", help="a tag (repeatable)")
    ad.add_argument("--type", dest="context_type", choices=_TYPES,
                    help="what it is for: identity (in every question), project, temporal (probed again after a day), "
                         "document (default), memory, tool_result (good for an hour)")
    ad.add_argument("--another", action="store_true",
                    help="register a path registered already once more, under a new id (without it, its entry is "
                         "refreshed and kept)")
    ad.set_defaults(run=_add)

    ls = add_command(actions, "list", parents=[as_json], help="the registered contexts, by id",
                     examples=("rlm context list", "rlm context list --kind folder --tag work --json"))
    ls.add_argument("--kind", choices=_KINDS, help="only contexts of this kind")
    ls.add_argument("--tag", metavar="TAG", help="only contexts with this tag")
    ls.add_argument("--type", dest="context_type", choices=_TYPES, help="only contexts of this type")
    ls.set_defaults(run=_list)

    ty = add_command(actions, "type", parents=[as_json], help="give a context a type (how it is loaded)",
                     description="Give a context a type: identity is in every question (within ~1,000 tokens, all\n"
                                 "always-on contexts together); project, document and memory are read when a question\n"
                                 "names them; temporal is probed again a day after it was read, tool_result expires\n"
                                 "after an hour.",
                     examples=("rlm context type me identity", "rlm context type standup temporal"))
    ty.add_argument("id", metavar="ID")
    ty.add_argument("type", choices=_TYPES, metavar="TYPE", help=", ".join(_TYPES))
    ty.set_defaults(run=_type)

    al = add_command(actions, "always", parents=[as_json],
                     help="what every question sees of the always-on contexts (identity ones, [contexts] always)",
                     examples=("rlm context always", "rlm context always --profile creative --json"))
    al.add_argument("--profile", metavar="NAME", help="with this profile's always list too")
    al.set_defaults(run=_always)

    sh = add_command(actions, "show", parents=[as_json], help="one context: source, metadata, tags, usage",
                     examples=("rlm context show notes", "rlm context show ctx:notes --json"))
    sh.add_argument("id", metavar="ID", help="its id (ctx:ID works too)")
    sh.set_defaults(run=_show)

    rm = add_command(actions, "rm", parents=[as_json], aliases=["forget"], help="forget a context (its files are left alone)",
                     examples=("rlm context rm notes",))
    rm.add_argument("id", metavar="ID")
    rm.set_defaults(run=_rm)

    rf = add_command(actions, "refresh", parents=[as_json],
                     help="probe a context again if it changed (and drop a file's search index)",
                     description="Probe a context again if its file changed (size or modification time; a folder or a "
                                 "memory store is always probed again) and drop a file's search index under "
                                 "$RLM_HOME/index so the next search_chunks rebuilds it.",
                     examples=("rlm context refresh notes",))
    rf.add_argument("id", metavar="ID")
    rf.set_defaults(run=_refresh)

    st = add_command(actions, "stats", parents=[as_json], help="how runs used the contexts: loads, peeks, greps, chunks, searches",
                     examples=("rlm context stats", "rlm context stats notes --json"))
    st.add_argument("id", nargs="?", metavar="ID", help="one context (default: all)")
    st.set_defaults(run=_stats)


def _open() -> Registry:
    from rlm_runtime.registry import Registry

    return Registry.open()


def _add(args: argparse.Namespace) -> int:
    source: str = args.path
    if args.kind == "text":
        source = _text(args.path)
    elif args.path == "-":
        raise UsageError("- reads standard input as a text: add --kind text")
    began = time.time()
    with _open() as registry:
        entry = registry.add(source, id=args.context_id, name=args.name, kind=args.kind, tags=args.tag, another=args.another,
                             type=args.context_type)
    existing = entry.created < began
    if args.json:
        print_json(args, {**entry.to_json(), "existing": existing})
    elif existing:
        say(f"{entry.ref} is this path already (refreshed; --another registers it again): {_line(entry)}")
    else:
        say(f"added {entry.ref}: {_line(entry)}")
    return EXIT_OK


def _text(path: str) -> str:
    """The text of ``--kind text``: standard input for ``-``, else the file's (bounded)."""
    from rlm_runtime.cli.stdin import decode_text, read_stdin
    from rlm_runtime.registry.metadata import MAX_TEXT_BYTES

    if path == "-":
        return read_stdin(MAX_TEXT_BYTES)
    try:
        with open(Path(path).expanduser(), "rb") as f:
            data = f.read(MAX_TEXT_BYTES + 1)
    except OSError as e:
        raise unreadable(path, e) from e
    if len(data) > MAX_TEXT_BYTES:
        raise UsageError(f"{path} holds more than {MAX_TEXT_BYTES >> 20} MB: register it as a file instead (without --kind)")
    return decode_text(data, path)


def _list(args: argparse.Namespace) -> int:
    with _open() as registry:
        entries = registry.list(kind=args.kind, tag=args.tag, type=args.context_type)
    if args.json:
        print_json(args, {"contexts": [e.to_json() for e in entries]})
        return EXIT_OK
    if not entries:
        say("no registered contexts" + (" of that kind, tag or type" if args.kind or args.tag or args.context_type
                                        else " (rlm context add PATH)"))
    for entry in entries:
        say(_line(entry))
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    with _open() as registry:
        entry = registry.get(args.id)
        found = registry.leads(entry.id, most=10)
    if args.json:
        print_json(args, {**entry.to_json(), "answer_leads": [{"probe": p, "questions": n} for p, n in found]})
        return EXIT_OK
    meta = dict(entry.meta)
    from rlm_runtime.registry.types import POLICIES

    rows = [f"{entry.ref}: {one_line(entry.name)}", f"  kind: {entry.kind}",
            f"  type: {entry.type} ({POLICIES[entry.type].describe})"]
    if entry.source is not None:
        rows.append(f"  source: {one_line(entry.source)}")
    if entry.tags:
        rows.append(f"  tags: {one_line(', '.join(entry.tags))}")
    rows.append("  " + _size(meta))
    if meta.get("decision"):
        rows.append(f"  probe: {meta['decision']} ({one_line(str(meta.get('reason', '')))})")
    rows.append(f"  created: {_when(entry.created)}; refreshed: {_when(entry.refreshed)}")
    rows.append(f"  usage: {_usage(entry.usage)}")
    if entry.usage.runs:
        rows.append(f"  recent runs: {one_line(', '.join(entry.usage.runs[:10]))}"
                    + (f" (and {len(entry.usage.runs) - 10} more)" if len(entry.usage.runs) > 10 else ""))
    if found:
        rows.append(f"  answers found with: {one_line(', '.join(f'{p} ({n})' for p, n in found))}")
    say("\n".join(rows))
    return EXIT_OK


def _type(args: argparse.Namespace) -> int:
    from rlm_runtime.registry.types import POLICIES

    with _open() as registry:
        entry = registry.set_type(args.id, args.type)
    if args.json:
        print_json(args, entry.to_json())
    else:
        say(f"{entry.ref} is now of type {entry.type}: {POLICIES[entry.type].describe}")
    return EXIT_OK


def _always(args: argparse.Namespace) -> int:
    from rlm_runtime.config import load_settings, paths_from_env
    from rlm_runtime.profiles import load_profile
    from rlm_runtime.registry.always import gather

    table, where = load_settings("contexts")
    refs = table.get("always", [])
    if not isinstance(refs, list) or not all(isinstance(x, str) for x in refs):
        raise UsageError(f"{where}: [contexts] always is a list of ctx:ID strings")
    if args.profile:
        refs = [*refs, *load_profile(args.profile, paths_from_env().brain_dirs).always]
    with _open() as registry:
        found = gather(registry, refs)
    if args.json:
        print_json(args, {"ids": list(found.ids), "text": found.text, "notes": list(found.notes), "chars": len(found.text)})
        return EXIT_OK
    if not found.text:
        say("no always-on contexts (rlm context type ID identity, or [contexts] always = [\"ctx:ID\"] in rlm.toml)")
    else:
        say(f"every question sees ({len(found.text):,} characters):")
        say(found.text)
    for note in found.notes:
        say(f"rlm: left out: {one_line(note)}", err=True)
    return EXIT_OK


def _rm(args: argparse.Namespace) -> int:
    with _open() as registry:
        try:
            name = one_line(registry.get(args.id).name)
        except DamagedContext:
            name = "damaged"  # removing it is the way out
        key = registry.remove(args.id)
    if args.json:
        print_json(args, {"removed": key})
    else:
        say(f"removed ctx:{key} ({name})")
    return EXIT_OK


def _refresh(args: argparse.Namespace) -> int:
    with _open() as registry:
        before = registry.get(args.id)
        after = registry.refresh(before.id)
    changed = dict(before.meta) != dict(after.meta) or before.source != after.source
    if args.json:
        print_json(args, {"context": after.to_json(), "changed": changed})
    else:
        say(f"{after.ref}: {'probed again' if changed else 'unchanged'}: {_size(dict(after.meta))}")
    return EXIT_OK


def _stats(args: argparse.Namespace) -> int:
    with _open() as registry:
        stats = registry.stats(args.id)
    if args.json:
        print_json(args, {"stats": {key: usage.to_json() for key, usage in stats.items()}})
        return EXIT_OK
    if not stats:
        say("no registered contexts")
    for key, usage in stats.items():
        say(f"ctx:{key}: {_usage(usage)}")
    return EXIT_OK


def _line(entry: Entry) -> str:
    tags = f" [{', '.join(entry.tags)}]" if entry.tags else ""
    where = f"  {entry.source}" if entry.source is not None else ""
    return one_line(f"{entry.id}  {entry.kind}  {entry.type}  {entry.name}{tags}  {_size(dict(entry.meta))}{where}")


def _size(meta: dict[str, Any]) -> str:
    parts = [f"{meta.get('size_bytes', 0):,} bytes"]
    if meta.get("files") is not None:
        parts.append(f"{meta['files']:,} documents")
    if meta.get("lines") is not None:
        parts.append(f"{meta['lines']:,} lines")
    if meta.get("chunks") is not None:
        parts.append(f"{meta['chunks']:,} chunks")
    parts.append(f"~{meta.get('tokens', 0):,} tokens")
    if meta.get("shape"):
        parts.append(str(meta["shape"]))
    return ", ".join(parts)


def _usage(usage: Usage) -> str:
    last = _when(usage.last_access) if usage.last_access is not None else "never"
    return (f"loads {usage.loads}, peeks {usage.peeks}, greps {usage.greps}, chunks {usage.chunks}, "
            f"searches {usage.searches}; last access {last}; runs {len(usage.runs)}")


def _when(t: float) -> str:
    return timestamps.when(t)
