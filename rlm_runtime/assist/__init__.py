"""The small-model assists as one mechanism: the runtime doing small things for the model at
fixed points of the turn loop, each named, each switchable, each traced, each measured.

* ``base.py``: the ``Assist`` protocol (hooks ``on_reply``, ``after_cell``, ``on_answer``,
  ``last_found``), ``Host`` (what a run lends them), ``Turn`` (a reply and what a hook may
  change of it), ``Cell`` (what a cell did), ``Answer`` / ``Question`` (an answer about to
  be taken; a hook's doubt of it) and ``AssistState`` (what the assists of one run share).
* ``registry.py``: the assists by name, in hook order (``REGISTRY``), the set measured to
  help small models (``SMALL_MODEL_ASSISTS``), and the ``assists`` setting
  (``RunLimits.assists``: ``auto``, ``small``, ``none`` or names) read into the names a run
  uses. With none the loop is the plain loop.
* ``replies.py``: what is done to a reply (``repeat_cut``, ``insisted_prose``): of the ten
  rules the loop applied to every model until 2026-12-06, the two kept by their held-out
  measure (registry.py says why the other eight went).
* ``read_field.py``, ``records_count.py``: answer checks over the records the model's code
  read; the twelve assists measured before them on 2026-11-26 and -27 gained nothing on
  held-out tasks and were removed (bench/EVAL.md), and ``follow_link`` (a linked value
  printed, followed) on 2026-12-06, having fired on none of the 71 development and held-out
  format tasks; ARCHITECTURE.md has the recipe for a new one.
* ``lookups.py``: an assist's typed reads of the text (``Sandbox.lookup``): lines, counts,
  tallies, and the question's reads and counts over the records the model's code parsed.
* ``runner.py``: ``Assists``, the one object the loop calls, which writes the ``assist``
  and ``answer_check`` trace events.
"""

from rlm_runtime.assist.base import Answer, Assist, AssistState, Cell, Host, Question, Turn
from rlm_runtime.assist.registry import REGISTRY, names_for, normalize
from rlm_runtime.assist.runner import Assists

__all__ = ["REGISTRY", "Answer", "Assist", "AssistState", "Assists", "Cell", "Host", "Question", "Turn", "names_for", "normalize"]
