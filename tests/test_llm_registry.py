"""Model providers: the prefix registry behind ``make_client``, the shared token count, and
``is_small_model``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rlm_runtime.llm.registry as registry
import rlm_runtime.llm.tokens as tokens
from rlm_runtime.context.tokens import count_text
from rlm_runtime.errors import ConfigError, UnknownModel
from rlm_runtime.llm import (
    Completion,
    LLMClient,
    Message,
    ScriptedClient,
    Usage,
    checked_client,
    count_tokens,
    is_small_model,
    make_client,
    register_provider,
)
from rlm_runtime.llm.litellm_client import LiteLLMClient
from rlm_runtime.llm.local import LocalModelClient
from rlm_runtime.llm.sizes import stated_size_billions


class EchoClient:
    """A provider's client for these tests: replies with the last message, says how it was made."""

    def __init__(self, model: str, **options: Any) -> None:
        self.model = model
        self.options = options

    def complete(self, messages: list[Message], *, max_tokens: int | None = None,
                 stop_after_code_block: bool = False, timeout_s: float | None = None) -> Completion:
        return Completion(messages[-1]["content"], self.model, Usage(1, 0, 0, 0.0))

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test registers into a copy of the registry: the built-ins are back afterwards."""
    monkeypatch.setattr(registry, "_providers", dict(registry._providers))
    yield


# ------------------------------------------------------------------------ registry


def test_a_registered_prefix_routes_to_its_factory() -> None:
    """It builds a client for a registered prefix with that provider's factory."""
    register_provider("echo:", EchoClient)
    client = make_client("echo:hello")
    assert isinstance(client, EchoClient) and isinstance(client, LLMClient)
    assert client.complete([{"role": "user", "content": "ping"}]).text == "ping"


def test_the_factory_gets_the_whole_name_and_the_options() -> None:
    """It passes the stripped name, prefix included, and make_client's options to the factory."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def factory(name: str, **options: Any) -> LLMClient:
        seen.append((name, options))
        return EchoClient(name, **options)

    register_provider("echo:", factory)
    client = make_client("  echo:model-a ", api_base="http://127.0.0.1:1/v1")
    assert seen == [("echo:model-a", {"api_base": "http://127.0.0.1:1/v1"})]
    assert client.model == "echo:model-a"


def test_the_longest_matching_prefix_wins() -> None:
    """It picks the most specific prefix when several match a name."""
    register_provider("echo:", lambda name, **o: EchoClient(name, kind="general"))
    register_provider("echo:loud/", lambda name, **o: EchoClient(name, kind="loud"))
    assert make_client("echo:loud/x").options == {"kind": "loud"}  # type: ignore[attr-defined]
    assert make_client("echo:quiet/x").options == {"kind": "general"}  # type: ignore[attr-defined]


def test_a_prefix_is_registered_once_unless_replaced() -> None:
    """It refuses to register a prefix twice, and replaces it when asked to."""
    register_provider("echo:", EchoClient)
    with pytest.raises(ValueError, match="already registered"):
        register_provider("echo:", EchoClient)
    register_provider("echo:", lambda name, **o: EchoClient(name, replaced=True), replace=True)
    assert make_client("echo:x").options == {"replaced": True}  # type: ignore[attr-defined]


def test_the_built_in_prefixes_cannot_be_taken_by_accident() -> None:
    """It refuses to register scripted: or local: again without replace=True."""
    for prefix in ("scripted:", "local:"):
        with pytest.raises(ValueError, match="already registered"):
            register_provider(prefix, EchoClient)


@pytest.mark.parametrize("prefix", ["", " ", " echo:", "echo: ", None])
def test_a_bad_prefix_is_refused(prefix: Any) -> None:
    """It refuses an empty prefix, or one with surrounding spaces (names are stripped)."""
    with pytest.raises(ValueError, match="prefix"):
        register_provider(prefix, EchoClient)


def test_a_factory_must_be_callable() -> None:
    """It refuses a factory that cannot be called."""
    with pytest.raises(ValueError, match="not callable"):
        register_provider("echo:", "EchoClient")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   ", "\n"])
def test_an_empty_name_is_an_unknown_model(name: str) -> None:
    """It raises UnknownModel for an empty or blank name."""
    with pytest.raises(UnknownModel, match="empty model name"):
        make_client(name)


@pytest.mark.parametrize("name", ["scripted:", "local:", "local:  ", "echo:"])
def test_a_prefix_alone_is_an_unknown_model(name: str) -> None:
    """It raises UnknownModel for a name that is only a provider prefix."""
    register_provider("echo:", EchoClient)
    with pytest.raises(UnknownModel, match="names no model"):
        make_client(name)


def test_names_no_prefix_claims_go_to_litellm() -> None:
    """It hands names without a registered prefix to litellm, which refuses unknown ones on the first call."""
    register_provider("echo:", EchoClient)
    assert isinstance(make_client("openai/gpt-4o-mini"), LiteLLMClient)
    assert isinstance(make_client("echo"), LiteLLMClient)  # the prefix is "echo:", not "echo"
    client = make_client("nonsense-model")
    assert isinstance(client, LiteLLMClient)
    with pytest.raises(UnknownModel, match="nonsense-model"):
        client.complete([{"role": "user", "content": "hi"}])


def test_the_built_in_providers_are_registered(tmp_path: Path) -> None:
    """It routes scripted: to ScriptedClient and local: to the local model client."""
    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "hi"}\n', encoding="utf-8")
    client = make_client(f"scripted:{script}", api_base="ignored by scripts")
    assert isinstance(client, ScriptedClient) and client.model == f"scripted:{script}"
    with pytest.raises(ConfigError, match="unknown local model 'no-such-model'"):
        make_client("local:no-such-model")


def test_a_local_model_typo_names_the_nearest() -> None:
    """It suggests the local model meant by a near name."""
    with pytest.raises(ConfigError, match=r"unknown local model 'qwen2.5-coder-1.5'.*did you mean 'qwen2.5-coder-1.5b'\?$"):
        make_client("local:qwen2.5-coder-1.5")


class _Checked(EchoClient):
    """A client with its own early check, refusing names that end in "-bad"."""

    closed = False

    def check(self) -> None:
        if self.model.endswith("-bad"):
            raise UnknownModel(f"unknown model {self.model!r}")

    def close(self) -> None:
        self.closed = True


def test_checked_client_runs_the_clients_check() -> None:
    """It makes the client, runs its check() and closes a client that fails it."""
    made: list[_Checked] = []

    def factory(name: str, **options: Any) -> _Checked:
        made.append(_Checked(name))
        return made[-1]

    register_provider("checked:", factory)
    assert checked_client("checked:ok").model == "checked:ok"
    with pytest.raises(UnknownModel, match="checked:x-bad"):
        checked_client("checked:x-bad")
    assert [c.closed for c in made] == [False, True]


def test_checked_client_takes_a_client_without_check() -> None:
    """It returns a client that has no check() as make_client does."""
    client = ScriptedClient(["x"])
    assert checked_client(client) is client


def test_a_client_passes_through_unchanged() -> None:
    """It returns a client object given instead of a name as it is."""
    client = ScriptedClient(["x"])
    assert make_client(client) is client


def test_a_registered_provider_runs_the_real_loop() -> None:
    """It lets RLM take a registered provider's model name like any other."""
    from rlm_runtime.orchestrator import RLM

    replies = iter(["```python\nFINAL(len(context))\n```"])
    register_provider("canned:", lambda name, **o: ScriptedClient(lambda messages: next(replies), model=name))
    rlm = RLM("canned:one", trace=False)
    try:
        result = rlm.run("How long is the context?", "12345")
    finally:
        rlm.close()
    assert result.answer == "5"


# -------------------------------------------------------------------------- tokens


def test_every_built_in_client_counts_with_the_shared_function() -> None:
    """It gives the same count from the scripted, litellm and local clients as count_tokens."""
    text = "def f(x):\n    return x * 2  # doubled\n" * 20
    local = object.__new__(LocalModelClient)  # no model installed: count_tokens needs no server
    counts = {type(c).__name__: c.count_tokens(text) for c in (ScriptedClient([]), LiteLLMClient("openai/x"), local)}
    assert set(counts.values()) == {count_tokens(text)}, counts


def test_counts_are_tiktoken_counts_like_the_contexts() -> None:
    """It counts with the same encoding as context token counts (cl100k_base)."""
    for text in ("hello world", "naïve café 中文", "x = [i ** 2 for i in range(10)]\n" * 50):
        assert count_tokens(text) == count_text(text)
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_special_token_text_counts_as_plain_text() -> None:
    """It counts '<|endoftext|>' written in a prompt as ordinary text instead of raising."""
    assert count_tokens("<|endoftext|>") > 1


def test_short_texts_are_memoised_and_long_ones_are_not() -> None:
    """It answers a repeated short text from the memo, and keeps no copy of texts over MEMO_CHARS."""
    short = "a 4 KB message counted on every turn. " * 110
    count_tokens(short)
    before = tokens._memo.cache_info()
    assert count_tokens(short) == tokens._count(short)
    assert tokens._memo.cache_info().hits == before.hits + 1
    long = "word " * (tokens.MEMO_CHARS // 5 + 10)
    size = tokens._memo.cache_info().currsize
    assert count_tokens(long) == tokens._count(long)
    assert tokens._memo.cache_info().currsize == size


def test_without_an_encoding_a_token_is_four_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """It falls back to ceil(len / 4) when no tiktoken encoding can be loaded offline."""
    monkeypatch.setattr(tokens, "encoding", lambda: None)
    text = "y" * (tokens.MEMO_CHARS + 2)  # past the memo, so nothing counted earlier answers
    assert count_tokens(text) == (len(text) + 3) // 4
    assert tokens.cut_to_tokens("abcdefghij", 2) == "abcdefgh"


def test_cut_to_tokens_keeps_whole_tokens() -> None:
    """It cuts a text to the given number of tokens, and leaves a short one alone."""
    text = "one two three four five six"
    cut = tokens.cut_to_tokens(text, 3)
    assert text.startswith(cut) and count_tokens(cut) == 3
    assert tokens.cut_to_tokens(text, 100) == text


# ---------------------------------------------------------------------- small models


@pytest.mark.parametrize("name", [
    "local:qwen2.5-coder-1.5b", "local:anything", "ollama/llama3.1:70b", "ollama_chat/qwen2.5-coder",
    "openai/qwen2.5-coder-1.5b", "lm_studio/llama-3.2-3b-instruct", "hosted_vllm/Qwen2.5-7B",
    "hosted_vllm/Qwen/Qwen2.5-Coder-7B-Instruct", "openai/llama3.1:8b", "groq/llama-3.1-8b-instant",
    "gemini/gemini-1.5-flash-8b", "huggingface/Qwen/Qwen2.5-0.5B-Instruct", "openai/phi3:3.8b",
    "bedrock/meta.llama3-8b-instruct-v1:0", "together_ai/deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "openai/gpt-oss-7b", "  OpenAI/Qwen2.5-7B  ",
])
def test_small_models_are_recognised(name: str) -> None:
    """It recognises locally served models and names that state at most ~8B parameters."""
    assert is_small_model(name)


@pytest.mark.parametrize("name", [
    "", "o3", "openai/o3-mini", "gpt-4b", "openai/gpt-4b", "openai/gpt-4o", "gpt-4o-mini", "chatgpt-4b",
    "anthropic/claude-3-5-sonnet", "claude-3-5-sonnet-20240620", "anthropic/claude-3-5-haiku-latest",
    "gemini/gemini-2b-pro", "openai/gpt-oss-20b", "hosted_vllm/Qwen2.5-14B", "groq/llama-3.3-70b-versatile",
    "together_ai/mistralai/Mixtral-8x7B-Instruct-v0.1", "openai/Qwen3-30B-A3B", "openai/gemma-2-9b",
    "ft:gpt-4o-mini:acme:custom:8b3f", "openai/model-b", "openai/qwen2.5-coder", "scripted:demo.jsonl",
    "openai/llama3b",
])
def test_other_models_are_not_small(name: str) -> None:
    """It denies smallness to names that state no size, a version rather than a size, or more than ~8B."""
    assert not is_small_model(name)


@pytest.mark.parametrize(("name", "size"), [
    ("qwen2.5-coder-1.5b", 1.5), ("Llama-3.2-3B", 3.0), ("Meta-Llama-3.1-405B", 405.0), ("Qwen3-30B-A3B", 30.0),
    ("mixtral-8x7b", None), ("gpt-4b", None), ("gpt-oss-120b", 120.0), ("claude-3-5-sonnet", None), ("o3", None),
    ("model:7b-q4_K_M", 7.0),
])
def test_the_stated_size_is_read_carefully(name: str, size: float | None) -> None:
    """It reads a <number>b token between separators, the largest when there are several."""
    assert stated_size_billions(name) == size


_CHECK = """
import sys
from rlm_runtime.llm import checked_client
try:
    checked_client(sys.argv[1]).close()
    print("ok", "litellm" in sys.modules)
except Exception as e:
    print(type(e).__name__, "litellm" in sys.modules, str(e)[:300])
"""


def test_an_unknown_provider_is_refused_without_importing_litellm(tmp_path: Path) -> None:
    """After one process has imported litellm, a name whose prefix no provider has is refused
    by a later process without importing litellm (about 4 s), with the nearest provider
    suggested; a known provider still goes to litellm; a cache file that is not litellm's
    list is ignored (litellm is asked)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RLM_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}

    def check(name: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", _CHECK, name], capture_output=True, text=True, env=env, timeout=120)
        return done.stdout.split(maxsplit=2)

    assert check("openai/gpt-4o-mini")[:2] == ["ok", "True"]  # litellm imported: the prefixes are kept
    kept = list((tmp_path / "home" / "cache").glob("litellm-*-prefixes.json"))
    assert len(kept) == 1 and oct(kept[0].stat().st_mode & 0o777) == "0o600"
    kind, imported, said = check("opnai/gpt-4o-mini")
    assert (kind, imported) == ("UnknownModel", "False") and "did you mean 'openai/gpt-4o-mini'" in said
    kept[0].write_text('["nothing"]')
    assert check("opnai/gpt-4o-mini")[:2] == ["UnknownModel", "True"]  # the bad file ignored: litellm asked
