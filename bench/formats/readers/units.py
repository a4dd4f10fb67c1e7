"""systemd unit files (Debian: systemd and the packages that ship units,
``/usr/lib/systemd/system/*.service``, ``.socket``, ``.target``, ``.timer``, ``.mount``, ...).

INI-style: a block of ``#`` comments (license), then sections ``[Unit]``, ``[Service]``
(``[Socket]``, ``[Timer]``, ...), ``[Install]``, each of ``Key=value`` lines
(``Description=Journal Service``, ``After=a.socket b.socket``, ``Type=oneshot``,
``ExecStart=/lib/systemd/systemd-journald``, ``WantedBy=multi-user.target``); a key may
repeat. Regular files only (aliases are symlinks), concatenated in path order; the file name
is not in the text, so a unit is named by its ``Description``.

* ``systemd-units``: units, named by their description. A unit names others by file name
  (``Requires=``, ``After=``), which the text does not show, so no multi-hop question.
"""

from __future__ import annotations

from pathlib import Path

from model import Field, Format, Record

_DIR = Path("/usr/lib/systemd/system")
_KEYS = {"Documentation": "documentation", "DefaultDependencies": "default_dependencies", "Type": "type",
         "ExecStart": "exec_start", "WantedBy": "wanted_by", "Before": "before", "After": "after",
         "ConditionPathExists": "condition_path"}


def _files() -> list[Path]:
    if not _DIR.is_dir():
        return []
    return sorted(p for p in _DIR.iterdir() if p.is_file() and not p.is_symlink() and "." in p.name
                  and p.suffix != ".conf")


def parse(text: str) -> list[Record]:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    units = [i for i, line in enumerate(lines) if line.rstrip("\n") == "[Unit]"]
    starts = []
    for k, i in enumerate(units):
        first = i
        floor = units[k - 1] + 1 if k else 0
        while first > floor and (not lines[first - 1].strip() or lines[first - 1].startswith(("#", ";"))):
            first -= 1
        while first < i and not lines[first].strip():
            first += 1
        starts.append(first)
    records = []
    for k, first in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else len(lines)
        while stop > first + 1 and not lines[stop - 1].strip():
            stop -= 1
        fields: dict[str, str] = {}
        for line in lines[first:stop]:
            key, eq, value = line.rstrip("\n").partition("=")
            name = _KEYS.get(key.strip()) if eq and not line.startswith(("#", ";")) else None
            if name and name not in fields:
                fields[name] = value.split()[0] if name in ("documentation", "before", "after") and value.split() \
                    else value.strip()
        description = ""
        for line in lines[first:stop]:
            if line.startswith("Description="):
                description = line.rstrip("\n").partition("=")[2].strip()
                break
        records.append(Record(description, fields, offsets[first], offsets[stop]))
    return records


FORMATS = [
    Format(name="systemd-units", split="dev", source="Debian: systemd and others (/usr/lib/systemd/system/*)",
           text="the systemd unit files", thing="unit", things="units",
           fields=(Field("documentation", "the first Documentation entry"),
                   Field("default_dependencies", "the DefaultDependencies setting", count=True),
                   Field("type", "the Type setting", count=True), Field("exec_start", "the first ExecStart command"),
                   Field("wanted_by", "the WantedBy setting", count=True), Field("before", "the first unit in Before"),
                   Field("after", "the first unit in After"),
                   Field("condition_path", "the first ConditionPathExists setting")),
           files=_files, parse=parse),
]
