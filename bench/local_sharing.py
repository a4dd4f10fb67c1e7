"""What a sub-call costs the root conversation on the shared local server.

    python bench/local_sharing.py [--model qwen2.5-coder-1.5b] [--root-tokens 2000] [--sub-tokens 800] [--repeats 2]

Root and sub-calls share one llama.cpp server with a single slot. A sub-call's prompt
replaces the root conversation's prefix in the slot, so the root's next turn would prefill
its whole history again. The server therefore keeps a RAM prompt cache. This bench starts the
server twice, with the cache (as the runtime does) and without it, and times on each:

  first      the root's first turn (a cold prefill of the whole prompt)
  follow-up  the root's next turn straight after (the slot still holds its prefix)
  after sub  the root's next turn after a sub-call with an unrelated prompt

Every turn generates 8 tokens at temperature 0. Prints the medians and the ratio of
"after sub" with the cache against without it (measured in the same process).
"""

from __future__ import annotations

import argparse
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


def measure(name: str, cache_size: int, root_tokens: int, sub_tokens: int, repeats: int) -> dict[str, list[float]]:
    gov = Governor.from_system()
    settings = server_settings(gov.available_bytes, gov.cpu_count, spec(name).context_window)
    settings["cache_size"] = cache_size
    server = LocalServer(name, verify(name, paths_from_env().models), settings)
    server.start()
    times: dict[str, list[float]] = {"first": [], "follow-up": [], "after sub": []}
    try:
        client = LiteLLMClient(f"openai/{name}", api_base=server.api_base, timeout_s=600, retries=0,
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
    cached = measure(args.model, 512 * 1024 * 1024, args.root_tokens, args.sub_tokens, args.repeats)
    plain = measure(args.model, 0, args.root_tokens, args.sub_tokens, args.repeats)
    print(f"{args.model}: root prompt ~{args.root_tokens} tokens, sub-call prompt ~{args.sub_tokens} tokens, "
          f"{args.repeats} repeats, medians in seconds")
    print(f"{'turn':<12}{'with cache':>12}{'no cache':>12}")
    for key in cached:
        print(f"{key:<12}{statistics.median(cached[key]):>12.2f}{statistics.median(plain[key]):>12.2f}")
    ratio = statistics.median(cached["after sub"]) / statistics.median(plain["after sub"])
    print(f"root turn after a sub-call, with cache / without: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
