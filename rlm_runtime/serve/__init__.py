"""``rlm serve``: the runtime for agents, editors and other programs.

``service.Service`` holds what every protocol shares (the registry of contexts, the folders
clients may name, per-request limits, the sessions of connected clients) and exposes each
operation as a plain function of plain data; ``mcp.py`` (the official MCP SDK, stdio and
streamable HTTP) and ``rest.py`` (FastAPI) are thin adapters over it. Who may call over
HTTP: ``auth.py`` (the server's own token, the Host check) and ``tokens.py`` (named tokens,
each with a scope and a memory store). The ``serve`` extra
installs what they need; importing this package imports none of it.
"""
