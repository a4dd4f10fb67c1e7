"""Scorers: how close a prediction is to a task's answer, from 0.0 to 1.0.

Normalisation (``normalize``): lower case, punctuation other than ``_ . - :`` inside a word
dropped, the articles a/an/the dropped, whitespace collapsed (SQuAD's, keeping the
characters codes and identifiers are made of). With several accepted answers the best
score counts.

* ``exact``: the normalised prediction equals an accepted answer.
* ``contains``: an accepted answer appears in the prediction as whole words (RULER's
  string match).
* ``numeric``: the first number in the prediction (thousands separators allowed); 1.0
  within ``tolerance`` / ``rel_tolerance``, else ``decay ** |gold - prediction|`` (OOLONG's
  0.75; ``decay=0`` makes it exact).
* ``f1``: token F1 (SQuAD).
* ``regex``: an accepted answer is a pattern found in the prediction (RE2: linear time in the
  prediction, compile memory capped; see ``tasks.compile_pattern``).
* ``set``: F1 over items (OOLONG-Pairs): items are the matches of ``item_pattern`` when given
  (taken ``group`` at a time, unordered: pairs), else a Python/JSON list, else the parts
  between commas, semicolons, new lines and "and".
* ``judge``: a model reads the question, the reference and the prediction
  (``brain/prompts/eval/judge.md``) and replies CORRECT or INCORRECT.

A missing prediction (the method failed) scores 0.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

from rlm_runtime.eval.tasks import ScorerOptions, Task, compile_pattern

#: ``judge(question, reference, prediction) -> float``: a model-graded score.
Judge = Callable[[str, str, str], float]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s.\-:]|(?<!\w)[.\-:]|[.\-:](?!\w)")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SPLIT = re.compile(r"[,;\n]|\band\b")


def normalize(text: str) -> str:
    """Lower case, punctuation and articles dropped, whitespace collapsed."""
    text = _PUNCT.sub(" ", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def score(task: Task, prediction: str | None, judge: Judge | None = None) -> float:
    """The score of ``prediction`` for ``task`` (0.0 when there is none).

    Raises:
        ValueError: a ``judge`` task without a judge.
    """
    if prediction is None:
        return 0.0
    name = task.scorer_name
    golds = task.golds
    opts = task.options
    if name == "judge":
        if judge is None:
            raise ValueError("the judge scorer needs a judge model (--judge-model)")
        return max(judge(task.question, g, prediction) for g in golds)
    if name == "set":
        return set_f1(golds, prediction, opts)
    one = _SCORERS[name]
    return max(one(g, prediction, opts) for g in golds)


def exact(gold: str, prediction: str, opts: ScorerOptions | None = None) -> float:
    return 1.0 if normalize(gold) == normalize(prediction) else 0.0


def contains(gold: str, prediction: str, opts: ScorerOptions | None = None) -> float:
    g, p = normalize(gold), normalize(prediction)
    if not g:
        return 0.0
    return 1.0 if re.search(r"(?<!\w)" + re.escape(g) + r"(?!\w)", p) else 0.0


def first_number(text: str) -> float | None:
    """The first number written in ``text`` (``1,234`` is one number), or None."""
    m = _NUMBER.search(text)
    if m is None:
        return None
    try:
        return float(m.group(0).replace(",", ""))
    except ValueError:
        return None


def numeric(gold: str, prediction: str, opts: ScorerOptions | None = None) -> float:
    opts = opts or ScorerOptions()
    g, p = first_number(gold), first_number(prediction)
    if g is None or p is None or math.isnan(p):
        return 0.0
    diff = abs(g - p)
    if diff <= opts.tolerance or (opts.rel_tolerance and diff <= opts.rel_tolerance * abs(g)):
        return 1.0
    if opts.decay <= 0 or math.isinf(diff):
        return 0.0
    return float(opts.decay ** diff)


def f1(gold: str, prediction: str, opts: ScorerOptions | None = None) -> float:
    g, p = normalize(gold).split(), normalize(prediction).split()
    if not g or not p:
        return float(g == p)
    common: dict[str, int] = {}
    counts: dict[str, int] = {}
    for t in g:
        counts[t] = counts.get(t, 0) + 1
    for t in p:
        if counts.get(t, 0) > 0:
            counts[t] -= 1
            common[t] = common.get(t, 0) + 1
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str, ignore_case: bool) -> Any:
    return compile_pattern(pattern, ignore_case)


def _text(prediction: str) -> bytes:
    # RE2 runs on UTF-8 bytes; an unpaired surrogate from a model's reply becomes U+FFFD.
    return prediction.encode("utf-8", errors="replace")


def regex(gold: str, prediction: str, opts: ScorerOptions | None = None) -> float:
    """1.0 when the pattern ``gold`` is found in ``prediction``.

    Raises:
        ValueError: ``gold`` is not a pattern RE2 runs.
    """
    pattern = _compiled(gold, opts is None or opts.ignore_case)
    return 1.0 if pattern.search(_text(prediction)) else 0.0


def items(text: str, opts: ScorerOptions | None = None) -> list[str]:
    """The items of a list answer, normalised (see the module docstring)."""
    opts = opts or ScorerOptions()
    if opts.item_pattern:
        pattern = _compiled(opts.item_pattern, opts.ignore_case)
        found = [normalize(m.group(0).decode("utf-8", errors="replace")) for m in pattern.finditer(_text(text))]
    else:
        found = [normalize(x) for x in _as_list(text)]
    found = [x for x in found if x]
    if opts.group > 1:
        n = opts.group
        found = [" ".join(sorted(found[i:i + n])) for i in range(0, len(found) - n + 1, n)]
    return found


def _as_list(text: str) -> list[str]:
    stripped = text.strip()
    if stripped[:1] in "[(":
        for parse in (json.loads, ast.literal_eval):
            try:
                value: Any = parse(stripped)
            except Exception:
                continue
            if isinstance(value, (list, tuple, set)):
                return [" ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in value]
    return _SPLIT.split(text)


def set_f1(golds: list[str], prediction: str, opts: ScorerOptions | None = None) -> float:
    """F1 of the predicted items against the gold items (each gold string may itself hold
    several items, as ``item_pattern`` finds them)."""
    gold_items: list[str] = []
    for g in golds:
        gold_items += items(g, opts) if opts and opts.item_pattern else [normalize(g)]
    gold_set = {g for g in gold_items if g}
    pred_set = set(items(prediction, opts))
    if not gold_set or not pred_set:
        return float(gold_set == pred_set)
    hit = len(gold_set & pred_set)
    if hit == 0:
        return 0.0
    precision, recall = hit / len(pred_set), hit / len(gold_set)
    return 2 * precision * recall / (precision + recall)


_SCORERS: dict[str, Callable[[str, str, ScorerOptions], float]] = {
    "exact": exact, "contains": contains, "numeric": numeric, "f1": f1, "regex": regex,
}


def parse_verdict(reply: str) -> float:
    """A judge's reply as a score: its last CORRECT / INCORRECT word (or a number 0-1)."""
    words = re.findall(r"\b(INCORRECT|CORRECT)\b", reply.upper())
    if words:
        return 1.0 if words[-1] == "CORRECT" else 0.0
    n = first_number(reply)
    return min(1.0, max(0.0, n)) if n is not None else 0.0


def model_judge(client: Any, brain_dirs: tuple[Any, ...], usage: Callable[[str, Any], None] | None = None) -> Judge:
    """A judge that asks ``client`` with ``brain/prompts/eval/judge.md``; ``usage(model,
    Usage)`` is told what each call cost."""
    from rlm_runtime import brain

    def judge(question: str, reference: str, prediction: str) -> float:
        text = brain.prompt("eval/judge", brain_dirs, question=question, reference=reference, prediction=prediction[:4000])
        completion = client.complete([{"role": "user", "content": text}], max_tokens=16)
        if usage is not None:
            usage(client.model, completion.usage)
        return parse_verdict(completion.text)

    return judge
