"""``python -m rlm_runtime.cli ARGS``: the ``rlm`` command."""

from rlm_runtime.cli import entry

entry()
