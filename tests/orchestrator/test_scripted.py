"""The scripted model: a real client that answers from a JSONL script, a list or a function."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from _timing import SLACK_S

from rlm_runtime.context.tokens import count_text
from rlm_runtime.errors import ConfigError, LLMCallError
from rlm_runtime.llm import LLMClient, ScriptedClient, make_client
from rlm_runtime.llm.base import Message


def ask(client: ScriptedClient, text: str, **options: object) -> str:
    return client.complete([{"role": "user", "content": text}], **options).text  # type: ignore[arg-type]


def test_replies_are_served_in_order(write_script: Callable[..., Path]) -> None:
    """It serves the script's replies one per call, in order."""
    client = make_client(f"scripted:{write_script('one', 'two', 'three')}")
    assert isinstance(client, ScriptedClient)
    assert [ask(client, "q") for _ in range(3)] == ["one", "two", "three"]
    assert client.remaining == 0


def test_it_is_a_client_named_after_its_script(write_script: Callable[..., Path]) -> None:
    """It satisfies the LLMClient protocol and is named ``scripted:PATH``."""
    path = write_script("x")
    client = make_client(f"scripted:{path}")
    assert isinstance(client, LLMClient)
    assert client.model == f"scripted:{path}"
    completion = client.complete([{"role": "user", "content": "q"}])
    assert completion.model == client.model and completion.finish_reason == "stop"
    client.close()
    client.close()


def test_when_rules_answer_matching_prompts_before_the_queue(write_script: Callable[..., Path]) -> None:
    """It answers a prompt whose last message holds a rule's substring, without using up the queue."""
    client = make_client(f"scripted:{write_script({'when': 'SUMMARISE', 'content': 'a summary'}, 'first', 'second')}")
    assert ask(client, "please SUMMARISE this") == "a summary"
    assert ask(client, "next") == "first"
    assert ask(client, "SUMMARISE again") == "a summary"  # a rule answers as often as it matches
    assert ask(client, "next") == "second"


def test_when_rules_look_at_the_last_message_only() -> None:
    """It ignores a rule's substring in earlier messages."""
    client = ScriptedClient([{"when": "MAGIC", "content": "matched"}, "queued"])
    messages: list[Message] = [{"role": "system", "content": "MAGIC in the system prompt"}, {"role": "user", "content": "plain"}]
    assert client.complete(messages).text == "queued"


def test_the_first_matching_rule_wins() -> None:
    """It uses the first rule, in script order, whose substring matches."""
    client = ScriptedClient([{"when": "apple", "content": "first rule"}, {"when": "apple pie", "content": "second rule"}])
    assert ask(client, "an apple pie") == "first rule"


def test_an_exhausted_script_raises_llm_call_error() -> None:
    """It raises LLMCallError naming the call once the script has no reply left."""
    client = ScriptedClient(["only"], model="scripted:t")
    ask(client, "q")
    with pytest.raises(LLMCallError, match="no reply left for call 2"):
        ask(client, "q")


def test_usage_is_counted_in_tokens() -> None:
    """It reports one call, the prompt's tokens and the reply's tokens, like a real model."""
    client = ScriptedClient(["The answer is forty-two."])
    messages: list[Message] = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is six times seven?"}]
    usage = client.complete(messages).usage
    assert usage.calls == 1 and usage.cost_usd == 0.0
    assert usage.input_tokens == sum(client.count_tokens(m["content"]) for m in messages)
    assert usage.output_tokens == client.count_tokens("The answer is forty-two.")
    assert client.count_tokens("hello world") == (count_text("hello world") or 3)
    assert 0 < usage.output_tokens < len("The answer is forty-two.")


def test_max_tokens_cuts_a_long_reply() -> None:
    """It cuts a reply to max_tokens, as a model stopping at its limit would."""
    client = ScriptedClient(["word " * 100])
    completion = client.complete([{"role": "user", "content": "q"}], max_tokens=10)
    assert completion.usage.output_tokens <= 10
    assert len(completion.text) < len("word " * 100)


def test_prompts_are_recorded_as_copies() -> None:
    """It records every prompt it received, unaffected by later changes to the messages."""
    client = ScriptedClient(["a", "b"])
    messages: list[Message] = [{"role": "user", "content": "first"}]
    client.complete(messages)
    messages[0]["content"] = "changed"
    messages.append({"role": "user", "content": "second"})
    client.complete(messages)
    assert client.prompts == [[{"role": "user", "content": "first"}],
                              [{"role": "user", "content": "changed"}, {"role": "user", "content": "second"}]]


def test_a_callable_answers_every_prompt() -> None:
    """It accepts a function of the messages."""
    client = ScriptedClient(lambda messages: f"echo: {messages[-1]['content']}")
    assert ask(client, "hi") == "echo: hi"
    assert client.model == "scripted:callable"


def test_a_callable_returning_a_non_string_is_a_call_error() -> None:
    """It raises LLMCallError when the function returns something else than str."""
    client = ScriptedClient(lambda messages: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(LLMCallError, match="int"):
        ask(client, "q")


def test_concurrent_calls_each_get_their_own_reply() -> None:
    """It hands each queued reply to exactly one caller when called from many threads."""
    client = ScriptedClient([f"r{i}" for i in range(64)], delay_s=0.001)
    got: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        text = ask(client, "q")
        with lock:
            got.append(text)

    threads = [threading.Thread(target=call) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(f"r{i}" for i in range(64))


def test_a_callable_is_called_concurrently() -> None:
    """It lets two threads be inside the function at once, as with a real model."""
    both_inside = threading.Barrier(2, timeout=0.5 + SLACK_S)  # a client that serialises calls never fills it

    def responder(messages: list[Message]) -> str:
        both_inside.wait()
        return "ok"

    client = ScriptedClient(responder)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(client, "q")
        except BaseException as e:  # collected for the assertion below
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ------------------------------------------------------------------ bad scripts


def test_bad_jsonl_names_the_line(tmp_path: Path) -> None:
    """It raises ConfigError naming the file and line of a line that is not JSON."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"content": "fine"}\n\n{"content": "broken\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:3: not JSON"):
        ScriptedClient(path)


def test_an_item_without_content_is_refused(write_script: Callable[..., Path]) -> None:
    """It raises ConfigError naming the item that has no "content" string."""
    with pytest.raises(ConfigError, match="item 2"):
        ScriptedClient(write_script("fine", {"text": "wrong key"}))
    with pytest.raises(ConfigError, match="item 1"):
        ScriptedClient([{"content": 5}])


def test_an_empty_when_is_refused() -> None:
    """It raises ConfigError for a "when" that is not a non-empty string."""
    with pytest.raises(ConfigError, match="'when'"):
        ScriptedClient([{"when": "", "content": "x"}])


def test_a_missing_script_is_a_config_error(tmp_path: Path) -> None:
    """It raises ConfigError naming a script file that does not exist."""
    with pytest.raises(ConfigError, match="not found"):
        make_client(f"scripted:{tmp_path / 'nope.jsonl'}")


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    """It skips blank lines of a script."""
    path = tmp_path / "s.jsonl"
    path.write_text('\n{"content": "a"}\n   \n{"content": "b"}\n\n', encoding="utf-8")
    client = ScriptedClient(path)
    assert client.remaining == 2
