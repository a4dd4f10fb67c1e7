"""Red-team pass on cancel (after issue 22): ``rlm_query(p, context=[...])`` over a list of
hundreds of thousands of texts made each a document on the host, unreachable by
``cancel()`` (44 s after it, for 900,000 texts); the list is now made a corpus in batches
with a look at the budget between them."""

from __future__ import annotations

import threading
import time
from typing import Any

from rlm_runtime import Session
from rlm_runtime.budget import RunLimits
from rlm_runtime.llm import ScriptedClient


def code(src: str) -> str:
    return f"```python\n{src}\n```"


def test_cancel_reaches_the_documents_of_a_huge_rlm_query_list() -> None:
    """It ends a question within seconds of cancel() while rlm_query's 600,000 texts are made documents."""
    root = ScriptedClient([code("print(rlm_query('q', context=['ab'] * 600000))"), code("FINAL('done')")])
    sub = ScriptedClient(lambda messages: code("FINAL('ok')"))
    out: dict[str, Any] = {}
    with Session(root, sub, contexts=["some text"], limits=RunLimits(max_iterations=3, max_wall_s=600.0, max_depth=1)) as s:
        worker = threading.Thread(target=lambda: out.setdefault("result", s.ask("q")))
        worker.start()
        time.sleep(2.5)
        s.cancel()
        cancelled = time.monotonic()
        worker.join(120)
        waited = time.monotonic() - cancelled
    assert not worker.is_alive()
    assert out["result"].error_type == "Cancelled", out["result"].error
    assert waited < 10, f"{waited:.1f} s after cancel()"
