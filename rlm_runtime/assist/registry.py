"""The named assists, in the order their hooks run, and the ``assists`` setting read into
the names a run uses.

The order is part of the behaviour: a reply's hooks run in it, and before an answer the
first check that questions it wins.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlm_runtime.assist.base import Assist
from rlm_runtime.assist.read_field import ReadField
from rlm_runtime.assist.records_count import RecordsCount
from rlm_runtime.assist.replies import CopiedProse, InsistedProse, RepeatCut

#: Every assist by name, in hook order. The ten assists first measured for small models
#: (notes after a cell, the question's names and the chain from them, the records tally, four
#: answer checks, the chain settling of the last turn) were removed on 2026-11-26, and
#: ``question_fields`` (the first prompt showing ``records().about(question)``) on
#: 2026-11-27, and ``unseen_answer`` (a typed answer no output showed, questioned once) later
#: that day, none having gained on held-out tasks (bench/EVAL.md). ``read_field`` (another
#: value, or none, given for one field of one named record, questioned with the code that
#: reads it) gained there, and again on the held-out formats (2026-12-06: two answers of 35
#: turned from wrong to right, none back). ``follow_link`` (a linked value printed or
#: answered, followed with the code that reads the field asked), which gained on the
#: generator's held-out seeds, fired on none of the 36 development and 35 held-out format
#: tasks and was removed on 2026-12-06.
#: The ten answer rules the loop applied to every model until 2026-12-06 became assists
#: that day and were measured on the held-out formats (bench/formats/README.md): eight were
#: removed the same day, each having turned no answer from wrong to right there: five never
#: fired on the 35 tasks (``echo_lines``: feedback pasted into code; ``final_spelling``:
#: ``Final`` spelled so; ``records_reprompt``; ``value_as_code``; ``dated_final``: a date read
#: as a sum) and three questioned or read answers none of which came out right
#: (``question_echo``: the question copied back, 12 answers; ``question_words``, 2;
#: ``forced_reading``: the forced turn's sentence, 1). ``repeat_cut`` and ``insisted_prose``
#: stay: they end a run that loops (the same code again, the same sentence again) with an
#: answer. With ``read_field`` alone, seven of the 35 runs stopped on failing turns (two
#: with all twelve) and 9 were right (11 with all twelve: ``read_field`` turned two answers
#: there and one here; one more lookup was right with none and all twelve, not here).
#: A new assist is added here, by name, where its hooks should run.
REGISTRY: dict[str, type[Assist]] = {
    "repeat_cut": RepeatCut, "copied_prose": CopiedProse, "insisted_prose": InsistedProse, "read_field": ReadField,
    "records_count": RecordsCount,
}
#: Assists registered (callable by name) but not in the small-model set until a held-out
#: measure shows a gain. None now: ``records_count`` (a count the records contradict,
#: questioned) turned one answer of 35 from wrong to right on the held-out formats
#: (2026-12-06) and none back; ``copied_prose`` (a reply writing the runtime's words back,
#: taken out) one of 35 on 2026-12-07 (bench/formats/README.md), none back.
_NOT_MEASURED: frozenset[str] = frozenset()
#: The setting's words: ``auto`` (the set measured for the model's class), ``small`` (that
#: set whatever the model), ``none`` (the plain loop).
AUTO, SMALL, NONE = "auto", "small", "none"
#: The assists measured to help a small model (``rlm_runtime.llm.sizes.is_small_model``) on
#: held-out tasks, in hook order. ``read_field``, 2026-11-27 (bench/EVAL.md, "A field of one
#: record read as another value"): held out (seed 53), lookup 5/6 against 3/6 with none, two
#: answers flipped from wrong to right and none back; on the held-out formats (2026-12-06,
#: bench/formats/README.md) two of 35 flipped from wrong to right and none back. No set is measured for
#: larger models: ``auto`` gives them none until a held-out run shows a gain.
SMALL_MODEL_ASSISTS: tuple[str, ...] = tuple(n for n in REGISTRY if n not in _NOT_MEASURED)


def normalize(setting: str | Sequence[str]) -> str | tuple[str, ...]:
    """``setting`` as ``RunLimits.assists`` keeps it: ``"auto"``, ``"small"``, ``"none"``, or
    a tuple of known names (a comma-separated string is a list). Raises ``ValueError``
    naming an unknown assist and the known ones."""
    if isinstance(setting, str):
        word = setting.strip().lower()
        if word in (AUTO, SMALL, NONE):
            return word
        setting = [n for n in word.split(",")]
    names = tuple(dict.fromkeys(str(n).strip().lower() for n in setting if str(n).strip()))
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        known = ", ".join(REGISTRY) or "none is registered"
        raise ValueError(f"no assist named {unknown[0]!r}; assists: {AUTO}, {SMALL}, {NONE} or names of assists ({known})")
    return names


def names_for(setting: str | Sequence[str], model: str) -> tuple[str, ...]:
    """The assists a run of ``model`` uses, in hook order: for ``auto``, the small-model set
    when ``model`` is small (served locally, or stating at most ~8B parameters) and none
    otherwise (a model the set was not measured on gets nothing in its way); ``small``, that
    set for any model (the ``small-model`` profile, for a small model under another name);
    ``none``, none; names, those."""
    value = normalize(setting)
    if value == NONE:
        return ()
    if value == AUTO:
        from rlm_runtime.llm.sizes import is_small_model

        return SMALL_MODEL_ASSISTS if is_small_model(model) else ()
    if value == SMALL:
        return SMALL_MODEL_ASSISTS
    return tuple(n for n in REGISTRY if n in value)
