"""``rlm`` with one more provider: ``slow:PATH`` is the scripted model ``scripted:PATH`` that
sleeps ``RLM_TEST_SLOW_S`` seconds per call. Run as a script by the kill tests."""

from __future__ import annotations

import os
import sys

from rlm_runtime.cli import main
from rlm_runtime.llm import ScriptedClient, register_provider

if __name__ == "__main__":
    delay = float(os.environ.get("RLM_TEST_SLOW_S", "1"))
    register_provider("slow:", lambda name, **o: ScriptedClient(name.removeprefix("slow:"), model=name, delay_s=delay), replace=True)
    sys.exit(main(sys.argv[1:]))
