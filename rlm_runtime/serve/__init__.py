"""``rlm serve``: the runtime for agents, editors and other programs.

``service.Service`` holds what every protocol shares (the registry of contexts, the folders
clients may name, per-request limits, the sessions of connected clients) and exposes each
operation as a plain function of plain data; ``mcp.py`` (the official MCP SDK, stdio and
streamable HTTP) and ``rest.py`` (FastAPI) are thin adapters over it. The ``serve`` extra
installs what they need; importing this package imports none of it.
"""
