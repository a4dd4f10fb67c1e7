"""The slack every time bound in the tests adds: the suite shares two CPU cores with others.

A bound is what the code promises plus ``SLACK_S``: ``took < TIMEOUT_S + GRACE_S + SLACK_S``,
``elapsed < 0.5 + SLACK_S``. A test that proves something happens in time must still fail
when it never happens, or happens only after the slow path it rules out: make that path
wait on an event the test sets only after measuring, or last longer than the bound.

``RLM_TEST_SLACK`` scales the slack (``RLM_TEST_SLACK=3`` on a very slow or busy machine,
``0.2`` to look for slow spots on a quiet one). Import it as ``from _timing import SLACK_S``:
this folder is on ``sys.path`` once ``tests/conftest.py`` is loaded.
"""

from __future__ import annotations

import os

#: How much slack to give, from RLM_TEST_SLACK (default 1).
FACTOR = float(os.environ.get("RLM_TEST_SLACK") or 1.0)
#: Seconds added to every time bound (the fault tests' slack since they were written).
SLACK_S = 5.0 * max(FACTOR, 0.0)
