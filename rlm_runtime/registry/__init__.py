"""The registry of named contexts that outlive a process (``$RLM_HOME/registry.db``).

``Registry`` is the API (``store.py``): add, list, get, remove, refresh, resolve, record,
stats; ``Entry`` / ``Usage`` / ``Resolved`` what it returns. ``ctx:ID`` names a registered
context wherever a context is accepted (``refs.py`` opens it). Modules, one job each:
``ids`` (ids, names, tags), ``roots`` (the root check), ``metadata`` (kind and probe),
``migrations`` (the schema), ``db`` (the connection), ``usage`` (a session's counts).

Importing this package imports no context handle, so ``context.sources`` may import it.
"""

from rlm_runtime.registry.ids import REF_PREFIX, is_ref
from rlm_runtime.registry.refs import Opened, open_ref, open_resolved, source_of
from rlm_runtime.registry.roots import within
from rlm_runtime.registry.store import OPS, Entry, Registry, Resolved, Usage

__all__ = ["OPS", "REF_PREFIX", "Entry", "Opened", "Registry", "Resolved", "Usage", "is_ref", "open_ref", "open_resolved",
           "source_of", "within"]
