"""Context handles across the sandbox boundary.

The host exports each context as read-only file descriptors (a file it opens, or an
anonymous file holding in-memory text) and passes them over the channel (SCM_RIGHTS). The
worker maps them before lock-down and closes the descriptors, so it can read its contexts
and nothing else, and a 1 GB context costs it page cache, not heap.

A corpus travels as its document list: a readable document with a descriptor, one that is
not (binary, vanished) with none, each with its skip mark, so the worker lists and searches
the same documents as the host. Its documents held in memory (``rlm_query(p, context=[...])``
makes a corpus of strings) travel together in one anonymous file, each a slice of it: one
descriptor however many there are, where one each ran the host out of descriptors. The
specs are plain data (str, int, None): the worker validates nothing in them, since only the
host writes them.
"""

from __future__ import annotations

import errno
import mmap
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar

from rlm_runtime.context import hops as _hops
from rlm_runtime.context import records as _records
from rlm_runtime.context.buffer import looks_binary, wide_encoding
from rlm_runtime.context.corpus import CorpusHandle, Document
from rlm_runtime.context.grep import GrepMatch, grep_held, not_searchable
from rlm_runtime.context.handles import BufferHandle, FileHandle, SliceHandle
from rlm_runtime.context.protocol import BINARY_SNIFF_BYTES, DEFAULT_MAX_MATCHES, DEFAULT_PEEK_CHARS, Chunk
from rlm_runtime.errors import ContextError

MAX_DOCUMENTS = 20_000
FDS_PER_FRAME = 200  # below the kernel's SCM_MAX_FD (253)
#: chunks() builds a list: beyond this many chunks, page with chunk(i) instead.
MAX_LISTED_CHUNKS = 10_000

# --------------------------------------------------------------------- host side


def _anonymous_file(*parts: memoryview | bytes) -> int:
    """A read-only-to-be descriptor holding ``parts`` one after another, with no name on disk."""
    fd = _open_descriptor(lambda: os.memfd_create("rlm-context", os.MFD_CLOEXEC)
                          if sys.platform.startswith("linux") and hasattr(os, "memfd_create") else _temporary_fd())
    try:
        for data in parts:
            view = memoryview(data)
            done = 0
            while done < len(view):
                done += os.write(fd, view[done : done + (1 << 24)])
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _temporary_fd() -> int:
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


_NO_DESCRIPTOR = (errno.EMFILE, errno.ENFILE)
_FD = TypeVar("_FD", int, "int | None")


def _out_of_descriptors(error: ContextError) -> bool:
    return isinstance(error.__cause__, OSError) and error.__cause__.errno in _NO_DESCRIPTOR


def _open_descriptor(opener: Callable[[], _FD]) -> _FD:
    """``opener()``, with the host out of descriptors said as a ContextError (the export is
    undone, nothing is sent) rather than a document quietly marked unreadable."""
    try:
        return opener()
    except OSError as e:
        if e.errno in _NO_DESCRIPTOR:
            raise ContextError(f"the host has no file descriptor left to pass a context to the sandbox ({e.strerror}); "
                               f"give fewer documents, or raise the open-files limit (ulimit -n)") from e
        raise


def _handle_fd(handle: BufferHandle) -> int:
    if isinstance(handle, FileHandle):
        kept = _open_descriptor(handle.descriptor)  # the file the handle mapped, not its path again
        if kept is not None:
            return kept
    path = getattr(handle, "path", None)
    if isinstance(handle, FileHandle) and path and handle.transcoded is None:  # else its UTF-8 copy is sent
        try:
            return _open_descriptor(lambda: os.open(path, os.O_RDONLY))
        except OSError as e:
            raise ContextError(f"cannot open context file {path}: {e.strerror}") from e
    return _anonymous_file(handle._buf().view)


def _in_memory(doc: Document) -> bool:
    """Whether the document's text is held by the host (not a file it would open)."""
    return doc._handle is not None and not (isinstance(doc._handle, FileHandle) and doc._handle.path)


def _document_fd(doc: Document) -> tuple[int | None, str | None]:
    """(a descriptor for the document, None) or (None, why it cannot be read)."""
    if doc._handle is not None or doc.path is None:
        try:
            return _handle_fd(doc.handle), None
        except ContextError as e:
            if _out_of_descriptors(e):
                raise  # the host's lack, not the document's: the export fails
            return None, f"unreadable: {e}"
    try:
        fd = _open_descriptor(doc.open_fd)  # a walked document's path is not followed if it became a symlink
    except OSError as e:
        return None, f"unreadable: {e.strerror}"
    try:
        head = os.pread(fd, BINARY_SNIFF_BYTES, 0)
        wide = wide_encoding(head)
        binary = looks_binary(head)
    except OSError as e:
        os.close(fd)
        return None, f"unreadable: {e.strerror}"
    if wide is not None:  # UTF-16/32: the worker gets the decoded UTF-8 copy, of the file opened above
        try:
            handle = FileHandle(fd=fd, name=doc.name)
        except ContextError as e:
            return None, f"unreadable: {e}"
        finally:
            os.close(fd)
        try:
            return _anonymous_file(handle._buf().view), None
        finally:
            handle.close()
    if binary:
        os.close(fd)
        return None, "binary content"
    return fd, None


def export(handles: list[Any]) -> tuple[list[dict[str, Any]], list[int], int]:
    """Descriptors of ``handles``: (plain-data specs, fds to send, total mapped bytes).

    The caller sends the fds and then closes them.
    """
    specs: list[dict[str, Any]] = []
    fds: list[int] = []
    total = 0
    try:
        for handle in handles:
            if isinstance(handle, CorpusHandle):
                if len(handle) > MAX_DOCUMENTS:
                    raise ContextError(f"corpus {handle.name} has {len(handle)} documents; the sandbox takes {MAX_DOCUMENTS} at most")
                docs = []
                packed: list[tuple[dict[str, Any], memoryview]] = []  # the documents held in memory
                for doc in handle.documents:
                    entry: dict[str, Any] = {"name": doc.name, "fd": None, "size": doc.size, "skip": doc.skip}
                    docs.append(entry)
                    if _in_memory(doc):
                        try:
                            packed.append((entry, doc.handle._buf().view))
                        except ContextError as e:  # a lazy document whose loader failed
                            entry["skip"] = doc.skip or f"unreadable: {e}"
                        continue
                    fd, unreadable = _document_fd(doc)
                    entry["skip"] = doc.skip or unreadable
                    if fd is not None:
                        entry["fd"] = len(fds)
                        fds.append(fd)
                        total += os.fstat(fd).st_size
                if packed:
                    # one descriptor for all of them, each document a slice (start, nbytes) of it
                    at = 0
                    for entry, view in packed:
                        entry.update(fd=len(fds), start=at, nbytes=len(view))
                        at += len(view)
                    fds.append(_anonymous_file(*(view for _, view in packed)))
                    total += at
                specs.append({"kind": "corpus", "name": handle.name, "docs": docs})
            elif isinstance(handle, BufferHandle):
                fd = _handle_fd(handle)
                specs.append({"kind": "file", "name": handle.name, "fd": len(fds)})
                fds.append(fd)
                total += os.fstat(fd).st_size
            else:
                raise ContextError(f"not a context handle: {type(handle).__name__}")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return specs, fds, total


# ------------------------------------------------------------------- worker side


def build(specs: list[dict[str, Any]], fds: list[int]) -> list[Any]:
    """Map every context (before lock-down) and close the descriptors."""
    handles: list[Any] = []
    packs: dict[int, Any] = {}  # descriptor index -> the mapping of the documents packed in it
    try:
        for spec in specs:
            if spec["kind"] == "corpus":
                docs = []
                for k, d in enumerate(spec["docs"]):
                    doc = Document(k, d["name"], None, int(d.get("size") or 0), skip=d.get("skip"))
                    if d.get("fd") is not None and "start" in d:
                        pack = packs.get(d["fd"])
                        if pack is None:
                            pack = packs[d["fd"]] = _mapped(fds[d["fd"]])
                        doc._handle = SliceHandle(pack, d["name"], d["start"], d["nbytes"])
                        doc.size = doc._handle.n_bytes
                    elif d.get("fd") is not None:
                        doc._handle = FileHandle(fd=fds[d["fd"]], name=d["name"])
                        doc.size = doc._handle.n_bytes
                    docs.append(doc)
                handles.append(CorpusHandle(docs, name=spec["name"]))
            else:
                handles.append(FileHandle(fd=fds[spec["fd"]], name=spec["name"]))
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
    return handles


def _mapped(fd: int) -> Any:
    """The whole of ``fd`` mapped read-only (the mapping keeps its own descriptor: ``fd`` may be closed)."""
    if os.fstat(fd).st_size == 0:
        return b""
    return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)


#: The empty results of ``grep`` in the cell running now (the worker empties it before each
#: cell): code that tests ``if hits:`` never prints why nothing matched, so the worker adds
#: the reason as a note.
EMPTY_GREPS: list[Any] = []
_EMPTY_KEPT = 3


def namespace(handles: list[Any]) -> dict[str, Any]:
    """``context``, ``contexts`` and the top-level probes that default to ``context``."""
    main = handles[0] if handles else None

    def _target(handle: Any) -> Any:
        target = main if handle is None else handle
        if target is None:
            raise ContextError("this session has no context")
        return target

    def _skipped(target: Any, include_skipped: bool) -> dict[str, bool]:
        # Only a corpus has documents to skip; a single text takes no such argument.
        return {"include_skipped": True} if include_skipped and isinstance(target, CorpusHandle) else {}

    def peek(n: int = DEFAULT_PEEK_CHARS, handle: Any = None) -> str:
        """First n characters of the context (or of ``handle``), with a size hint."""
        return _target(handle).peek(n)

    def grep(pattern: str, handle: Any = None, context_lines: int = 0, max_matches: int = DEFAULT_MAX_MATCHES,
             ignore_case: bool = False, include_skipped: bool = False) -> Any:
        """Lines matching an RE2 pattern, with 1-based line numbers (include_skipped: search a corpus's skipped documents too).

        The second argument may also be max_matches (the order the prompt gives), or text the
        code holds to search instead: a string, or a list of lines such as an earlier result."""
        if isinstance(handle, int) and not isinstance(handle, bool):
            handle, max_matches = None, handle
        for name, value in (("max_matches", max_matches), ("context_lines", context_lines)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ContextError(f"grep's {name} must be a whole number, not {type(value).__name__}")
        if isinstance(handle, (str, list, tuple)):
            return grep_held(handle, pattern, context_lines=context_lines, max_matches=max_matches, ignore_case=ignore_case)
        target = _target(handle)
        if not isinstance(target, (BufferHandle, CorpusHandle)):
            raise not_searchable(target)
        result = target.grep(pattern, context_lines=context_lines, max_matches=max_matches, ignore_case=ignore_case,
                             **_skipped(target, include_skipped))
        if not result and len(EMPTY_GREPS) < _EMPTY_KEPT:
            EMPTY_GREPS.append(result)
        return result

    def chunk(i: int, size: int | None = None, unit: str = "lines", handle: Any = None, include_skipped: bool = False) -> Any:
        """Chunk i (0-based) of size lines/chars/tokens, with navigation info in .nav."""
        target = _target(handle)
        return target.chunk(i, size, unit, **_skipped(target, include_skipped))

    def chunks(size: int | None = None, unit: str = "lines", handle: Any = None, include_skipped: bool = False) -> list[Any]:
        """Every chunk of the context, as a list."""
        target = _target(handle)
        n = target.n_chunks(size, unit, **_skipped(target, include_skipped))
        if n > MAX_LISTED_CHUNKS:
            raise ContextError(f"{n} chunks is too many to list; use chunk(i) or a larger size")
        return list(target.chunks(size, unit, **_skipped(target, include_skipped)))

    def records(source: Any = None, include_skipped: bool = False, template: str | None = None,
                pattern: str | None = None) -> Any:
        """The context's records (dicts of fields), or those of ``source``: another handle, a
        text the code holds (a chunk, a string), or a list of lines or grep matches. With a
        ``template`` (``'ID - TITLE (GROUP)'``: capital words or ``{name}`` are fields) or a
        ``pattern`` with named groups, each line read by that form, its coverage said."""
        form = {"template": template, "pattern": pattern} if template is not None or pattern is not None else None
        if isinstance(source, Chunk) and source.unit == "lines":
            text = str.__str__(source)
            start = source.index * source.size + 1
            lines = text.split("\n")
            return _records.parse(lines, _records.stated(lines, **form) if form else None,
                                  numbers=list(range(start, start + text.count("\n") + 1)))
        if isinstance(source, str):
            if form:
                lines = source.split("\n")
                return _records.parse(lines, _records.stated(lines, **form))
            return _records.parse_text(source)
        if isinstance(source, (list, tuple)):
            return _records_of_lines(source, form)
        target = _target(source)
        if not isinstance(target, (BufferHandle, CorpusHandle)):
            raise not_searchable(target)
        if form:
            if not isinstance(target, BufferHandle):
                raise ContextError("records(template=...) reads one text at a time: records(contexts[0][i], template=...)")
            return target.records(**form)
        return target.records(include_skipped) if isinstance(target, CorpusHandle) else target.records()

    return {"context": main, "contexts": tuple(handles), "peek": peek, "grep": grep, "chunk": chunk, "chunks": chunks,
            "records": records}


def read_lookup(handle: Any, question: str, text: str) -> dict[str, Any] | None:
    """The answer of the ``read`` reader (``readers.py``): the one field of the one record the
    question asks, when ``text`` (an answer) gave another value, over the records of a single
    text that the model's code already read (``records()`` parses once and keeps them), never
    parsing for the host, whose lookup must stay short; None when there is none."""
    from rlm_runtime.sandbox.readers import LINE_CHARS as cut

    parsed = handle._records if isinstance(handle, BufferHandle) else None
    if not parsed:
        return None
    try:
        hop = _hops.misread(parsed, question, text)
    except Exception:  # a courtesy to the host: never the worker's failure
        return None
    if hop is None:
        return None
    return {"start": hop.start[:cut], "link": hop.link[:cut], "value": hop.value[:cut], "name_field": hop.name_field[:cut],
            "line": hop.line, "field": hop.field[:cut], "target": hop.target[:cut], "own": hop.own[:cut]}


def _records_of_lines(items: list[Any] | tuple[Any, ...], form: dict[str, Any] | None = None) -> Any:
    """``records()`` of a list of lines: grep matches keep their line numbers (and each
    match's context lines, read as the lines around it)."""
    if len(items) > _records.MAX_RECORDS:
        raise ContextError(f"records(): at most {_records.MAX_RECORDS} lines at once")
    lines: list[str] = []
    numbers: list[int] = []
    size = 0
    for k, item in enumerate(items):
        size += len(item) if isinstance(item, str) else 0
        if size > _records.MAX_PARSE_BYTES:
            raise ContextError(f"records(): the lines hold over {_records.MAX_PARSE_BYTES} characters, more than records() "
                               "reads at once; pass fewer (records(grep(...)) of a narrower pattern)")
        if isinstance(item, GrepMatch):
            around = [*item.before, item.line, *item.after]
            first = item.line_no - len(item.before)
            lines += around
            numbers += range(first, first + len(around))
        elif isinstance(item, str):
            lines += str.__str__(item).split("\n")
            numbers += [k + 1] * (item.count("\n") + 1)
        else:
            raise ContextError(f"records(): a list of lines or grep matches, not of {type(item).__name__}")
    return _records.parse(lines, _records.stated(lines, **form) if form else None, numbers=numbers)


#: The largest text the ``asked_count`` reader parses into records when the model's code has
#: not (a lookup must stay short; ``records()`` then reuses the parse).
COUNT_PARSE_CHARS = 2_000_000


def count_lookup(handle: Any, question: str) -> dict[str, Any] | None:
    """The ``asked_count`` reader: the count ``question`` asks of the records of a single
    text (``hops.asked_count``), parsing them when the model's code has not and the text is
    at most ``COUNT_PARSE_CHARS``; None when there is none."""
    from rlm_runtime.sandbox.readers import LINE_CHARS as cut

    if not isinstance(handle, BufferHandle):
        return None
    try:
        parsed = handle._records
        if parsed is None and handle._buf().nbytes <= COUNT_PARSE_CHARS:
            parsed = handle._parsed()
        found = _hops.asked_count(parsed, question) if parsed else None
    except Exception:  # a courtesy to the host: never the worker's failure
        return None
    if found is None:
        return None
    return {"field": found.field[:cut], "value": found.value[:cut], "n": found.n, "children": found.children}


def grep_lookup(handle: Any, kind: str, pattern: str, ignore_case: bool, max_lines: int) -> dict[str, Any]:
    """The ``lines``, ``count`` or ``tally`` reader's reading of ``handle`` (the worker's main
    context; ``readers.py`` says what each holds): read through the grep module, so the
    handle's access counts (the model's own reading) do not change. Raises ContextError for a
    pattern RE2 refuses or a context that cannot be searched."""
    from rlm_runtime.context import grep as _grep
    from rlm_runtime.sandbox import readers

    out: dict[str, Any] = {"lines": [], "count": 0, "tally": []}
    if isinstance(handle, BufferHandle):
        parts = [(handle, "")]
    elif isinstance(handle, CorpusHandle):
        parts = [(h, d.name[: readers.NAME_CHARS]) for h, d in handle._searched()]
    else:
        raise ContextError("this session has no searchable context")
    cut = readers.LINE_CHARS
    _grep.compile_pattern(pattern, ignore_case)
    if kind == "tally":
        counts: dict[str, int] = {}
        for h, _ in parts:
            for text, n in _grep.tally_matching_lines(h._buf(), pattern, ignore_case).items():
                counts[text[:cut]] = counts.get(text[:cut], 0) + n
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        out["count"] = len(ranked)
        out["tally"] = [[text, n] for text, n in ranked[: readers.MAX_KINDS]]
        return out
    for h, doc in parts:
        buf = h._buf()
        if kind == "lines" and len(out["lines"]) < max_lines:
            found = _grep.grep_buffer(buf, pattern, max_matches=max_lines - len(out["lines"]), ignore_case=ignore_case)
            out["lines"] += [[doc, m.line_no, m.line[:cut]] for m in found]
        out["count"] += _grep.count_matching_lines(buf, pattern, ignore_case)
    return out
