"""Red-team pass on the host's redaction (after issue 22): a key the host knows, reaching
sandboxed code or a trajectory in a shape ``str.replace`` did not look for (percent-encoded,
base64, cut by a line break, JSON-escaped), and an environment key whose name holds a secret
word inside a word (``PGPASSWORD``, ``GPG_PASSPHRASE``, ``API_KEYS``)."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.config import secret_env_values
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.redact import MASK, add_secret, redact

KEY = "sk-rtb-planted+Key/0a9b8c7d6e5f=="
ENV_KEY = "pg-planted-secret-7e6d5c4b"


def code(src: str) -> str:
    return f"```python\n{src}\n```"


@pytest.fixture(autouse=True)
def planted_key() -> None:
    add_secret(KEY)


def _forms(secret: str) -> dict[str, str]:
    raw = secret.encode()
    return {
        "percent": quote(secret, safe=""),
        "percent_lower": re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")),
        "plus": quote_plus(secret),
        "base64": base64.b64encode(raw).decode(),
        "base64_offset1": base64.b64encode(b"x" + raw).decode(),
        "base64_offset2": base64.b64encode(b"xy" + raw).decode(),
        "urlsafe_base64": base64.urlsafe_b64encode(b"x" + raw).decode(),
        "wrapped": secret[:11] + "\n" + secret[11:],
        "wrapped_crlf_indent": secret[:5] + "\r\n    " + secret[5:20] + "\n" + secret[20:],
        "json_escaped_wrap": json.dumps(secret[:9] + "\n" + secret[9:])[1:-1],
        "hex": raw.hex(),
    }


@pytest.mark.parametrize("form", list(_forms(KEY)))
def test_it_masks_a_known_key_in_an_encoded_or_wrapped_form(form: str) -> None:
    """It masks a known key percent-encoded, base64'd at any alignment, hex'd or cut by line breaks."""
    shown = _forms(KEY)[form]
    out = redact(f"provider said: {shown} (request 42)")
    assert shown not in out and MASK in out and "(request 42)" in out
    # No run of the key's own characters long enough to rebuild it survives.
    assert KEY[4:16] not in out.replace("\n", "").replace("\r", "").replace(" ", "")


@pytest.mark.parametrize("name", ["PGPASSWORD", "GPG_PASSPHRASE", "API_KEYS", "MYAPIKEY", "SLACKTOKEN",
                                  "DB_SECRETS", "SERVICE_CREDENTIALS_JSON"])
def test_an_env_key_whose_name_holds_a_secret_word_inside_a_word_is_masked(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """It masks the value of a variable whose name holds a secret word inside a word or plural (PGPASSWORD, API_KEYS)."""
    monkeypatch.setenv(name, ENV_KEY)
    assert ENV_KEY in secret_env_values()
    assert ENV_KEY not in redact(f"connect failed for {ENV_KEY}")


def test_a_cache_folder_is_not_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """It leaves the tokenizer caches' folders (TIKTOKEN_CACHE_DIR, TOKENIZERS_PARALLELISM) alone."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/home/somebody/.cache/tiktoken")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long")
    assert "/home/somebody/.cache/tiktoken" not in secret_env_values()
    assert "false-but-long" not in secret_env_values()


def test_a_sub_model_echoing_the_key_encoded_does_not_reach_the_cell_or_the_trace(tmp_path: Path,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """It masks a known key a sub-model's reply and a tool's error quote base64'd, percent-encoded and wrapped."""
    monkeypatch.setenv("PGPASSWORD", ENV_KEY)
    forms = _forms(KEY)
    sub = ScriptedClient(lambda messages: "echo " + " | ".join(forms.values()) + " | " + quote(ENV_KEY, safe=""))

    def lookup() -> str:
        """Look the thing up."""
        raise RuntimeError(f"denied: {forms['wrapped']} / {ENV_KEY[:8]}\n{ENV_KEY[8:]}")

    root = ScriptedClient([code("print('REPLY', llm_query('hi'))\ntry:\n    lookup()\nexcept Exception as e:\n"
                                "    print('ERR', e)"), code("FINAL('done')")])
    trace = tmp_path / "t.jsonl"
    began = time.monotonic()
    with Session(root, sub, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=120.0), trace=trace,
                 tools=(lookup,)) as s:
        result = s.ask("q")
    assert time.monotonic() - began < 90 and result.answer == "done", result.error
    shown = "\n".join(m["content"] for prompt in root.prompts for m in prompt)
    assert "REPLY echo" in shown and "ERR" in shown
    for text in (shown, trace.read_text(encoding="utf-8")):
        for form in (*forms.values(), ENV_KEY, quote(ENV_KEY, safe="")):
            assert form not in text
        flat = text.replace("\\n", "").replace("\n", "").replace(" ", "")
        assert KEY[4:16] not in flat and ENV_KEY[2:14] not in flat


def test_redacting_many_known_keys_stays_linear() -> None:
    """It redacts 2 MB against 200 known keys and their encodings in bounded time."""
    for i in range(200):
        add_secret(f"rtb-many-keys-{i:04d}-abcdefghijkl")
    text = ("rtb-many-keys-0007-abcdefghijk x " * 60_000)[:2_000_000]
    began = time.monotonic()
    redact(text)
    redact(text)
    assert time.monotonic() - began < 20
