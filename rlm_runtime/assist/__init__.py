"""The small-model assists as one mechanism: the runtime doing small things for the model at
fixed points of the turn loop, each named, each switchable, each traced, each measured.

* ``base.py``: the ``Assist`` protocol (hooks ``after_cell``, ``before_answer``,
  ``last_turn`` / ``last_found``, ``settle``), ``Host`` (what a run lends them), ``Cell``
  (what a cell did) and ``AssistState`` (what the assists of one run share).
* ``registry.py``: the assists by name, in hook order (``REGISTRY``), the set measured to
  help small models on held-out text (``SMALL_MODEL_ASSISTS``), and the ``assists`` setting
  (``RunLimits.assists``: ``auto``, ``small``, ``none`` or names) read into the names a run
  uses. Two ship, in both: ``follow_link`` (``follow_link.py``) and ``read_field``
  (``read_field.py``); the twelve assists measured before them on 2026-11-26 and -27 gained
  nothing on held-out tasks and were removed (bench/EVAL.md); ARCHITECTURE.md has the recipe
  for a new one.
* ``lookups.py``: an assist's typed reads of the text (``Sandbox.lookup``): lines, counts,
  tallies, and the question's chains and reads over the records the model's code parsed.
* ``runner.py``: ``Assists``, the one object the loop calls, which writes the ``assist``
  and ``answer_check`` trace events.
"""

from rlm_runtime.assist.base import Assist, AssistState, Cell, Host
from rlm_runtime.assist.registry import REGISTRY, names_for, normalize
from rlm_runtime.assist.runner import Assists

__all__ = ["REGISTRY", "Assist", "AssistState", "Assists", "Cell", "Host", "names_for", "normalize"]
