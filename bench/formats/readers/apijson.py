"""An AWS service's API model as the ``botocore`` wheel ships it
(``botocore/data/s3/2006-03-01/service-2.json.gz``: Amazon S3).

One pretty-printed JSON object (two spaces an indent level, no space after ``:``):
``"metadata"``, ``"operations"`` (``"GetObject":{"name":..,"http":{..},"input":{"shape":..}}``)
and ``"shapes"``: each shape (``"GetObjectRequest":{"type":"structure","required":[..],
"members":{..}}``, ``"BucketName":{"type":"string"}``), a structure's members one a key
(``"Bucket":{"shape":"BucketName","location":"uri","locationName":"Bucket"}``, on one line
or several), documentation as HTML in strings.

* ``aws-s3-model``: the members of structure shapes, named by their key, held by their shape.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from model import Field, Format, Record


def _files() -> list[Path]:
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        return []
    data = Path(list(spec.submodule_search_locations)[0]) / "data" / "s3"
    found = sorted(data.glob("*/service-2.json.gz")) or sorted(data.glob("*/service-2.json"))
    return found[-1:]


def _entry(chunk: str) -> tuple[str, dict]:
    """A ``"key":{...}`` member of an object, as (key, value)."""
    ((key, value),) = json.loads("{" + chunk.strip().rstrip(",") + "}").items()
    return key, value


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    in_shapes = in_members = False
    shape: Record | None = None
    member_start = shape_start = None
    pos = 0
    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        if body == '  "shapes":{':
            in_shapes = True
            continue
        if not in_shapes:
            continue
        if body.startswith('    "'):
            if body.endswith("{"):
                shape_start = start
                shape = Record(body.strip()[1:].split('"', 1)[0], {}, start, pos)
                records.append(shape)
            continue
        if body in ("    }", "    },") and shape is not None:
            shape.end = pos
            shape.fields["type"] = _entry(text[shape_start:pos])[1].get("type", "")
            shape, in_members = None, False
            continue
        if shape is None:
            continue
        if body == '      "members":{':
            in_members = True
        elif body in ("      }", "      },"):
            in_members = False
        elif in_members and body.startswith('        "'):
            if body.endswith("{"):
                member_start = start
            else:
                key, value = _entry(body)
                records.append(_member(key, value, start, pos, shape.name))
        elif in_members and body in ("        }", "        },") and member_start is not None:
            key, value = _entry(text[member_start:pos])
            records.append(_member(key, value, member_start, pos, shape.name))
            member_start = None
    return records


def _member(key: str, value: dict, start: int, end: int, parent: str) -> Record:
    fields = {k: str(value.get(k, "")) for k in ("shape", "location", "locationName")}
    return Record(key, fields, start, end, parent)


FORMATS = [
    Format(name="aws-s3-model", split="dev", source="PyPI: botocore (data/s3/*/service-2.json.gz)",
           text="the Amazon S3 API model JSON", thing="member", things="members",
           fields=(Field("shape", "the target shape"), Field("location", "the location", count=True),
                   Field("locationName", "the location name")),
           files=_files, parse=parse, holder="shape", held="members"),
]
