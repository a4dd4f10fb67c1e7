"""What a sub-call costs the root conversation on the shared local server.

    python bench/local_sharing.py [--model qwen2.5-coder-1.5b] [--root-tokens 2000] [--sub-tokens 800] [--repeats 2]

Root and sub-calls share one llama.cpp server. A sub-call's prompt may take the root
conversation's cells in the KV cache, and the root's next turn would then prefill its whole
history again; the server keeps a RAM prompt cache to restore it instead. This bench starts
the server three times and times on each:

  first      the root's first turn (a cold prefill of the whole prompt)
  follow-up  the root's next turn straight after (the slot still holds its prefix)
  after sub  the root's next turn after a sub-call with an unrelated prompt

The three servers: as the runtime starts it (slots chosen by the governor, RAM cache on);
one slot with the RAM cache; one slot without it (every "after sub" is then a cold prefill:
the baseline). Every turn generates 8 tokens at temperature 0. Prints the medians and the
ratio of "after sub" on each server against the baseline, measured in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time

from rlm_runtime.budget import Governor
from rlm_runtime.config import paths_from_env
from rlm_runtime.context.tokens import count_text
from rlm_runtime.llm.litellm_client import LiteLLMClient
from rlm_runtime.llm.local import LocalServer, server_settings
from rlm_runtime.llm.models import spec, verify

WORDS = ("grep chunk peek result line count answer model file value table index error report room code level "
         "window number small large first second third order batch query handle context").split()


def _prose(rng: random.Random, tokens: int) -> str:
    words: list[str] = []
    while (count_text(" ".join(words)) or 0) < tokens:
        words.extend(rng.choice(WORDS) for _ in range(100))
    return " ".join(words)


def _turn(client: LiteLLMClient, messages: list[dict[str, str]]) -> float:
    t0 = time.perf_counter()
    client.complete(messages, max_tokens=8)  # type: ignore[arg-type]
    return time.perf_counter() - t0


def measure(name: str, slots: int | None, cache: bool, root_tokens: int, sub_tokens: int, repeats: int) -> dict[str, list[float]]:
    gov = Governor.from_system()
    settings = server_settings(gov.available_bytes, gov.cpu_count, spec(name), slots=slots)
    if not cache:
        settings = dataclasses.replace(settings, cache_mb=0)
    server = LocalServer(name, verify(name, paths_from_env().models), settings)
    server.start()
    times: dict[str, list[float]] = {"first": [], "follow-up": [], "after sub": []}
    try:
        client = LiteLLMClient(f"openai/{name}", api_base=server.api_base, api_key=server.api_key, timeout_s=600, retries=0,
                               extra={"temperature": 0.0})
        for r in range(repeats):
            rng = random.Random(r)
            root = [{"role": "system", "content": f"Run {r}. " + _prose(rng, root_tokens // 2)},
                    {"role": "user", "content": _prose(rng, root_tokens // 2)}]
            times["first"].append(_turn(client, root))
            root += [{"role": "assistant", "content": "print(count)"}, {"role": "user", "content": "Output: 12"}]
            times["follow-up"].append(_turn(client, root))
            _turn(client, [{"role": "user", "content": f"Sub {r}. " + _prose(rng, sub_tokens)}])
            root += [{"role": "assistant", "content": "print(total)"}, {"role": "user", "content": "Output: 40"}]
            times["after sub"].append(_turn(client, root))
    finally:
        server.stop()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--root-tokens", type=int, default=2000)
    ap.add_argument("--sub-tokens", type=int, default=800)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    runs = {"runtime's server": measure(args.model, None, True, args.root_tokens, args.sub_tokens, args.repeats),
            "1 slot, cache": measure(args.model, 1, True, args.root_tokens, args.sub_tokens, args.repeats),
            "1 slot, no cache": measure(args.model, 1, False, args.root_tokens, args.sub_tokens, args.repeats)}
    gov = Governor.from_system()
    slots = server_settings(gov.available_bytes, gov.cpu_count, spec(args.model)).slots
    print(f"{args.model}: root prompt ~{args.root_tokens} tokens, sub-call prompt ~{args.sub_tokens} tokens, "
          f"{args.repeats} repeats, medians in seconds; the runtime's server has {slots} slots")
    print(f"{'turn':<12}" + "".join(f"{k:>20}" for k in runs))
    for key in ("first", "follow-up", "after sub"):
        print(f"{key:<12}" + "".join(f"{statistics.median(t[key]):>20.2f}" for t in runs.values()))
    base = statistics.median(runs["1 slot, no cache"]["after sub"])
    for label, t in runs.items():
        print(f"root turn after a sub-call, {label} / 1 slot without cache: {statistics.median(t['after sub']) / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
