"""Side by side, in one run, on the same GGUF: the llama.cpp engines that can serve ``local:``.

    python bench/local_engines.py [--model qwen2.5-coder-1.5b] [--workdir DIR] [--reuse-venvs]
                                  [--prompts 1000,8000] [--gen 64] [--batch 8] [--batch-tokens 500]
                                  [--slots 1,2,4] [--rounds N] [--skip-single] [--skip-batched] [--json]

Engines: ``xllamacpp`` (the ``local`` extra: llama.cpp's C++ server from a prebuilt, portable
wheel) and ``llama-cpp-python`` 0.3.36 (the engine before it: a Python server around the
bindings; PyPI has no wheel, so pip compiles llama.cpp, for this CPU (-march=native)).

1 install  each engine into a fresh virtualenv, ``pip install --no-cache-dir`` (pip's own
           upgrade first, not timed). ``--reuse-venvs`` keeps the virtualenvs of an earlier
           run in --workdir and reports the install times that run measured.
2 single   per engine, one slot, no prompt cache: load time (process start to the first
           answer), the server's RSS after load and at its peak, and for each prompt size,
           streamed: prefill tokens/s = prompt tokens / time to the first token; generation
           tokens/s = (tokens - 1) / (last token - first token), over --gen tokens.
3 batched  ``llm_query_batched`` of --batch prompts of about --batch-tokens tokens (sections of
           Python's language reference, each "summarise in two sentences"), through the real
           RLM loop (a scripted root, the local model as sub-model), against xllamacpp with
           each of --slots and against llama-cpp-python (one slot). Timed from the first
           sub-call's start to the last one's end; the ratio is against one xllamacpp slot,
           measured in the same run.

The result is also written to DIR/result.json. A run takes 30-50 minutes on 2 cores (the source build alone 8-16); all engines run with
every CPU. Nothing else should run meanwhile: llama.cpp's threads wait for each other, so a
busy neighbour slows it far more than its share.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from _common import machine

from rlm_runtime.budget import RunLimits
from rlm_runtime.config import paths_from_env
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.llm import local as local_mod
from rlm_runtime.llm.engines import LAUNCHER, Engine, ServerSettings
from rlm_runtime.llm.local import LocalModelClient, LocalServer
from rlm_runtime.llm.models import verify
from rlm_runtime.orchestrator import RLM
from rlm_runtime.sandbox import CellLimits

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
WORDS = ("grep chunk peek result line count answer model file value table index error report room code level "
         "window number small large first second third order batch query handle context river stone light "
         "market garden letter morning winter station bridge engine signal paper").split()


def xllamacpp_requirement() -> str:
    """The xllamacpp pin of the ``local`` extra (pyproject.toml)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return next(r for r in data["project"]["optional-dependencies"]["local"] if r.startswith("xllamacpp"))


@dataclass(frozen=True)
class LlamaCppPythonEngine(Engine):
    """llama-cpp-python's server (one slot; its RAM cache off: only the slot's own prefix is kept)."""

    def command(self, *, parent_pid: int, model: Path, alias: str, port: int, settings: ServerSettings) -> list[str]:
        return [self.python, str(LAUNCHER), str(parent_pid), "llama_cpp.server", "--model", str(model), "--model_alias", alias,
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(settings.n_ctx), "--n_threads",
                str(settings.n_threads), "--n_threads_batch", str(settings.n_threads), "--logits_all", "False",
                "--verbose", "False"]

    def describe(self) -> str:
        return "llama-cpp-python 0.3.36 (built from source here)"


# ------------------------------------------------------------------------ install


def install(name: str, requirement: str, workdir: Path, reuse: bool) -> dict[str, Any]:
    """A virtualenv holding the engine; the seconds ``pip install --no-cache-dir`` took."""
    venv = workdir / f"venv-{name}"
    times_file = workdir / "install-times.json"
    times = json.loads(times_file.read_text()) if times_file.exists() else {}
    python = venv / "bin" / "python"
    if reuse and python.exists() and name in times:
        return {**times[name], "python": str(python), "reused": True}
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-U", "pip"], check=True)
    began = time.perf_counter()
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", requirement], capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"pip could not install {requirement}: {proc.stderr[-2000:]}")
    times[name] = {"requirement": requirement, "install_s": round(seconds, 1), "when": time.strftime("%Y-%m-%d %H:%M")}
    times_file.write_text(json.dumps(times, indent=1))
    return {**times[name], "python": str(python), "reused": False}


# ------------------------------------------------------------------ one slot, one request


class RssWatch:
    """The peak RSS of a process and its children, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> int:
        try:
            root = psutil.Process(self.pid)
            return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
        except psutil.Error:
            return 0

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.now())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _post(server: LocalServer, body: dict[str, Any], timeout: float = 1800) -> Any:
    request = urllib.request.Request(f"{server.api_base}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"})
    return urllib.request.urlopen(request, timeout=timeout)


def streamed(server: LocalServer, alias: str, prompt: str, gen: int) -> dict[str, float]:
    """Prefill and generation rates of one streamed request (and its prompt's token count)."""
    messages = [{"role": "user", "content": prompt}]
    body = {"model": alias, "messages": messages, "max_tokens": gen, "temperature": 0.0, "stream": True, "ignore_eos": True}
    began = time.perf_counter()
    stamps: list[float] = []
    with _post(server, body) as response:
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            choices = chunk.get("choices") or []
            if choices and (choices[0].get("delta") or {}).get("content"):
                stamps.append(time.perf_counter())
    # The same prompt again for one token: its prefix is still in the slot, and the usage counts it.
    with _post(server, {"model": alias, "messages": messages, "max_tokens": 1, "temperature": 0.0}) as response:
        prompt_tokens = json.loads(response.read())["usage"]["prompt_tokens"]
    ttft = stamps[0] - began
    span = stamps[-1] - stamps[0]
    return {"prompt_tokens": prompt_tokens, "ttft_s": round(ttft, 2), "prefill_tps": round(prompt_tokens / ttft, 1),
            "generated": len(stamps), "gen_tps": round((len(stamps) - 1) / span, 1) if span > 0 else 0.0}


def single(engine: Engine, model: str, model_path: Path, prompts: list[int], gen: int, cpus: int) -> dict[str, Any]:
    n_ctx = max(prompts) + gen + 1024
    server = LocalServer(model, model_path, ServerSettings(n_threads=cpus, n_ctx=n_ctx, slots=1, cache_mb=0), engine=engine,
                         verify_model=False)
    began = time.perf_counter()
    server.start()
    load_s = time.perf_counter() - began
    assert server.process is not None
    watch = RssWatch(server.process.pid)
    out: dict[str, Any] = {"load_s": round(load_s, 1), "rss_loaded_mb": watch.now() >> 20, "prompts": {}}
    try:
        rng = random.Random(7)
        for size in prompts:
            text = f"Text:\n{_prose(rng, int(size * 0.95))}\n\nWrite a long essay about the text above."
            out["prompts"][size] = streamed(server, model, text, gen)
    finally:
        out["rss_peak_mb"] = watch.stop() >> 20
        server.stop()
    return out


# ---------------------------------------------------------------------- batched


def sections(count: int, tokens: int) -> list[str]:
    """``count`` sections of Python's language reference, each cut to about ``tokens`` tokens."""
    import pydoc_data.topics as topics

    from rlm_runtime.context.tokens import count_text

    out = []
    for key in sorted(topics.topics, key=lambda k: -len(topics.topics[k])):
        text = " ".join(topics.topics[key].split())
        cut = tokens * 4
        while cut > 100 and (count_text(text[:cut]) or cut // 4) > tokens:
            cut = int(cut * 0.95)
        out.append(text[:cut])
        if len(out) == count:
            return out
    raise SystemExit("not enough sections in pydoc_data.topics")


def batched(engine: Engine, model: str, slots: int, docs: list[str], workdir: Path) -> dict[str, Any]:
    """One llm_query_batched call of len(docs) prompts through the RLM loop."""
    local_mod.stop_all()  # a server of another engine or size must not be reused
    context = workdir / "batch-context.txt"
    context.write_text("\n".join(docs) + "\n", encoding="utf-8")
    sub = LocalModelClient(model, engine=engine, slots=slots)
    sub.complete([{"role": "user", "content": "Say OK."}], max_tokens=4)  # load the model first: not timed
    code = ("answers = llm_query_batched(['Summarise this text in two sentences:\\n' + line for line in context])\n"
            "FINAL(str(sum(len(a) for a in answers)))")
    events: list[dict[str, Any]] = []
    root = ScriptedClient([f"```python\n{code}\n```"], model="scripted:bench")
    rlm = RLM(root, sub, limits=RunLimits.for_small_model(max_wall_s=7200, max_iterations=2), trace=False,
              cell_limits=CellLimits(cell_timeout_s=600, memory_mb=512), on_event=events.append)
    try:
        result = rlm.run("Summarise each line.", context)
    finally:
        rlm.close()
        local_mod.stop_all()
    subs = [e for e in events if e["type"] == "sub_call"]
    if result.answer is None or any(e["error"] for e in subs):
        raise SystemExit(f"the batched run failed: {result.error} {[e['error'] for e in subs if e['error']]}")
    starts = [e["t"] - e["duration_s"] for e in subs]
    ends = [e["t"] for e in subs]
    return {"slots": slots, "calls": len(subs), "seconds": round(max(ends) - min(starts), 1),
            "output_tokens": sum(e["usage"].get("output_tokens", 0) for e in subs),
            "prompt_tokens": sum(e["usage"].get("input_tokens", 0) for e in subs),
            "median_call_s": round(statistics.median(e["duration_s"] for e in subs), 1)}


# ------------------------------------------------------------------------- report


def report(r: dict[str, Any]) -> str:
    rows = ["| engine | install (fresh venv, no pip cache) | load | RSS loaded / peak | "
            + " | ".join(f"prefill / generation at {p} tokens (tok/s)" for p in r["prompt_sizes"]) + " |",
            "|---|---|---|---|" + "---|" * len(r["prompt_sizes"])]
    for name, e in r["engines"].items():
        s = e.get("single")
        inst = f"{e['install']['install_s']:.0f} s" + (" (earlier run)" if e["install"]["reused"] else "")
        if s is None:
            rows.append(f"| {name} | {inst} | | | " + " | ".join("" for _ in r["prompt_sizes"]) + " |")
            continue
        cells = [f"{s['prompts'][p]['prefill_tps']} / {s['prompts'][p]['gen_tps']} ({s['prompts'][p]['prompt_tokens']} tok)"
                 for p in r["prompt_sizes"]]
        rows.append(f"| {name} | {inst} | {s['load_s']} s | {s['rss_loaded_mb']} / {s['rss_peak_mb']} MB | " + " | ".join(cells) + " |")
    rows += ["", f"llm_query_batched, {r['batch']} prompts of ~{r['batch_tokens']} tokens:", "",
             "| engine | slots | seconds | x one xllamacpp slot | output tokens | median call |", "|---|---|---|---|---|---|"]
    base = next((b["seconds"] for b in r["batched"] if b["engine"] == "xllamacpp" and b["slots"] == 1), None)
    for b in r["batched"]:
        ratio = f"{b['seconds'] / base:.2f}" if base else ""
        rows.append(f"| {b['engine']} | {b['slots']} | {b['seconds']} | {ratio} | {b['output_tokens']} | {b['median_call_s']} s |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/rlm-local-engines"))
    ap.add_argument("--reuse-venvs", action="store_true")
    ap.add_argument("--engines", default="xllamacpp,llama-cpp-python")
    ap.add_argument("--prompts", default="1000,8000")
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--batch-tokens", type=int, default=500)
    ap.add_argument("--slots", default="1,2,4")
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="single phase: rounds, engines alternated (the table shows the last)")
    ap.add_argument("--skip-batched", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    cpus = psutil.cpu_count() or 1
    model_path = verify(args.model, paths_from_env().models)
    prompt_sizes = [int(p) for p in args.prompts.split(",")]
    result: dict[str, Any] = {"machine": machine(), "model": args.model, "prompt_sizes": prompt_sizes, "batch": args.batch,
                              "batch_tokens": args.batch_tokens, "engines": {}, "batched": []}
    requirements = {"xllamacpp": xllamacpp_requirement(), "llama-cpp-python": LLAMA_CPP_PYTHON}
    engines: dict[str, Engine] = {}
    for name in args.engines.split(","):
        inst = install(name, requirements[name], args.workdir, args.reuse_venvs)
        engines[name] = (Engine("xllamacpp", python=inst["python"]) if name == "xllamacpp"
                         else LlamaCppPythonEngine("llama-cpp-python", python=inst["python"]))
        result["engines"][name] = {"install": inst}
        print(f"{name}: installed in {inst['install_s']} s", file=sys.stderr)
    for k in range(0 if args.skip_single else args.rounds):
        for name, engine in engines.items():  # alternated, so that a busy spell hits both
            row = single(engine, args.model, model_path, prompt_sizes, args.gen, cpus)
            result["engines"][name].setdefault("rounds", []).append(row)
            result["engines"][name]["single"] = row
            print(f"{name} (round {k + 1}): {row}", file=sys.stderr)
    docs = sections(args.batch, args.batch_tokens)
    runs = [("xllamacpp", int(s)) for s in args.slots.split(",") if "xllamacpp" in engines]
    runs += [("llama-cpp-python", 1)] if "llama-cpp-python" in engines else []
    runs = [] if args.skip_batched else runs
    for name, slots in runs:
        row = {"engine": name, **batched(engines[name], args.model, slots, docs, args.workdir)}
        result["batched"].append(row)
        print(f"batched: {row}", file=sys.stderr)
    (args.workdir / "result.json").write_text(json.dumps(result, indent=1))  # kept, whatever happens to stdout
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
