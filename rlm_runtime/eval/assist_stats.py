"""What each assist did in an ``rlm eval`` run, read from the trajectories' trace events.

Per assist (``rlm_runtime.assist``) and method: how many tasks it fired in (``assist`` or
``answer_check`` events of the task's top-level run or its sub-runs), how many answers it
questioned or replaced, and of those, how many it flipped: the answer it questioned scored
wrong and the task's final answer right (``wrong_to_right``), or the other way round
(``right_to_wrong``). The answer questioned is re-scored with the task's gold and scorer
(default scorer options; an event keeps its first 200 characters). A note after a cell has
no answer to compare: it counts as fired only.

Trajectories are read only when they resolve to a ``.jsonl`` file inside the run folder
(``report.trajectory_inside``); one that cannot be read counts as a task with no events.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Trajectories read per report, at most.
MAX_TRAJECTORIES = 2000


@dataclass
class AssistRow:
    """One assist's figures under one method (``label``)."""

    label: str
    name: str
    tasks: int  # tasks of the label with a readable trajectory
    fired: int  # tasks in which the assist spoke at least once
    events: int
    checked: int  # answers it questioned or replaced
    wrong_to_right: int
    right_to_wrong: int

    @property
    def fire_rate(self) -> float:
        return self.fired / self.tasks if self.tasks else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fire_rate": self.fire_rate}


def _correct(record: dict[str, Any], answer: str) -> bool | None:
    """Whether ``answer`` scores as correct for ``record``'s task (None: it cannot be scored)."""
    from rlm_runtime.eval.scorers import score
    from rlm_runtime.eval.tasks import Task

    try:
        task = Task(id=str(record.get("task_id") or "task"), question=str(record.get("question") or "?"),
                    answer=record["gold"], scorer=record.get("scorer"))
        return score(task, answer) >= 0.999
    except Exception:  # a judge task, a gold of another form: no flip is counted
        return None


def assist_rows(folder: Path, records: list[dict[str, Any]]) -> list[AssistRow]:
    """The figures of every assist that fired in ``records`` (of the run in ``folder``)."""
    from rlm_runtime.eval.report import trajectory_inside
    from rlm_runtime.trajectory import read_events

    root = folder.resolve()
    tasks: dict[str, int] = defaultdict(int)
    rows: dict[tuple[str, str], AssistRow] = {}
    for record in records[:MAX_TRAJECTORIES]:
        label = str(record.get("label") or record.get("method"))
        src = trajectory_inside(root, record.get("trajectory"))
        if src is None:
            continue
        try:
            events = [e for e in read_events(src) if e.get("type") in ("assist", "answer_check")]
        except Exception:  # a torn or hostile trajectory: no events from it
            continue
        tasks[label] += 1
        final_ok = bool(record.get("correct"))
        seen: set[str] = set()
        for event in events:
            name = str(event.get("name") or "?")[:60]
            row = rows.setdefault((label, name), AssistRow(label, name, 0, 0, 0, 0, 0, 0))
            row.events += 1
            if name not in seen:
                seen.add(name)
                row.fired += 1
            if event.get("type") == "answer_check":
                row.checked += 1
                before = _correct(record, str(event.get("answer") or ""))
                if before is False and final_ok:
                    row.wrong_to_right += 1
                elif before is True and not final_ok:
                    row.right_to_wrong += 1
    for row in rows.values():
        row.tasks = tasks[row.label]
    return sorted(rows.values(), key=lambda r: (r.label, -r.fired, r.name))


HEAD = ("method", "assist", "fired in", "fire rate", "events", "answers checked", "wrong to right", "right to wrong")


def cells(row: AssistRow) -> list[str]:
    return [row.label, row.name, f"{row.fired}/{row.tasks}", f"{row.fire_rate:.0%}", str(row.events), str(row.checked),
            str(row.wrong_to_right), str(row.right_to_wrong)]
