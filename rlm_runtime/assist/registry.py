"""The named assists, in the order their hooks run, and the ``assists`` setting read into
the names a run uses.

The order is part of the behaviour: after a cell, the first exclusive assist that speaks
is the cell's lead note (a hint's lines before the question's name, the question's words
before ranked chunks); before an answer, the first check that questions it wins.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlm_runtime.assist.base import Assist
from rlm_runtime.assist.checks import CountCheck, FollowCheck, GroundingCheck, UnlinkedCheck
from rlm_runtime.assist.leads import Leads
from rlm_runtime.assist.notes import EmptyGrepLines, QuestionWords, Records, SearchHint
from rlm_runtime.assist.settle import ChainAnswer

#: Every assist by name, in hook order.
REGISTRY: dict[str, type[Assist]] = {cls.name: cls for cls in (
    EmptyGrepLines, Leads, QuestionWords, SearchHint, Records,
    CountCheck, GroundingCheck, UnlinkedCheck, FollowCheck,
    ChainAnswer,
)}
#: The setting's two words: ``auto`` (the set for the model) and ``none`` (the plain loop).
AUTO, NONE = "auto", "none"


def normalize(setting: str | Sequence[str]) -> str | tuple[str, ...]:
    """``setting`` as ``RunLimits.assists`` keeps it: ``"auto"``, ``"none"``, or a tuple of
    known names (a comma-separated string is a list). Raises ``ValueError`` naming an
    unknown assist and the known ones."""
    if isinstance(setting, str):
        word = setting.strip().lower()
        if word in (AUTO, NONE):
            return word
        setting = [n for n in word.split(",")]
    names = tuple(dict.fromkeys(str(n).strip().lower() for n in setting if str(n).strip()))
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise ValueError(f"no assist named {unknown[0]!r}; assists: {AUTO}, {NONE} or names of {', '.join(REGISTRY)}")
    return names


def names_for(setting: str | Sequence[str], model: str) -> tuple[str, ...]:
    """The assists a run of ``model`` uses, in hook order. ``auto`` is every assist, for
    every model: what the runtime did before the switch existed (measuring which assists
    help which model class is the next step, issue 23); ``none`` is none."""
    value = normalize(setting)
    if value == NONE:
        return ()
    if value == AUTO:
        return tuple(REGISTRY)
    return tuple(n for n in REGISTRY if n in value)
