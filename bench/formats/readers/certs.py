"""Mozilla's root certificates as the ``certifi`` wheel ships them (``certifi/cacert.pem``).

A PEM bundle: each certificate is a stanza of ``#`` comment lines (``# Issuer: CN=.. O=..
OU=..``, ``# Subject:``, ``# Label: "..."``, ``# Serial:``, ``# MD5 Fingerprint:``,
``# SHA1 Fingerprint:``, ``# SHA256 Fingerprint:``) and then the base64 block between
``-----BEGIN CERTIFICATE-----`` and ``-----END CERTIFICATE-----``; a blank line between.
Debian's ``ca-certificates.crt`` has only the PEM blocks, so the wheel's file is used.

* ``ca-bundle``: certificates, named by their label.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from model import Field, Format, Record

_ORG = re.compile(r"(?:^| )O=(.*?)(?= (?:CN|OU|O|L|ST|C)=|$)")


def _files() -> list[Path]:
    spec = importlib.util.find_spec("certifi")
    if spec is None or not spec.submodule_search_locations:
        return []
    path = Path(list(spec.submodule_search_locations)[0]) / "cacert.pem"
    return [path] if path.is_file() else []


def parse(text: str) -> list[Record]:
    records = []
    pos = 0
    start = None
    fields: dict[str, str] = {}
    for line in text.splitlines(keepends=True):
        begin, pos = pos, pos + len(line)
        body = line.rstrip("\n")
        if body.startswith("# ") and ":" in body:
            if start is None:
                start, fields = begin, {}
            key, _, value = body[2:].partition(":")
            fields[key.strip().lower()] = value.strip()
        elif body == "-----END CERTIFICATE-----" and start is not None:
            org = _ORG.search(fields.get("issuer", ""))
            records.append(Record(fields.get("label", "").strip('"'), {
                "issuer": fields.get("issuer", ""), "subject": fields.get("subject", ""),
                "org": org.group(1) if org else "", "serial": fields.get("serial", ""),
                "md5": fields.get("md5 fingerprint", ""), "sha1": fields.get("sha1 fingerprint", "")},
                start, pos))
            start = None
    return records


FORMATS = [
    Format(name="ca-bundle", split="heldout", source="PyPI: certifi (cacert.pem)",
           text="the CA certificate bundle", thing="certificate", things="certificates",
           fields=(Field("issuer", "the issuer"), Field("subject", "the subject"),
                   Field("org", "the issuer's organization (O=)", count=True),
                   Field("serial", "the serial number"), Field("md5", "the MD5 fingerprint"),
                   Field("sha1", "the SHA1 fingerprint")),
           files=_files, parse=parse),
]
