"""``rlm serve``: the runtime as an MCP server (stdio, for editors and agents) or over HTTP
(a REST API under ``/api`` and MCP's streamable HTTP at ``/mcp``, behind a bearer token),
and the tokens it takes: its own (``--show-token``, ``--rotate-token``) and named ones, each
with a scope and a memory store (``--add-token``, ``--list-tokens``, ``--remove-token``).

Needs the ``serve`` extra (``pip install 'rlm_runtime[serve]'``).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from rlm_runtime.cli.common import EXIT_OK, UsageError, add_command, say

DEFAULT_PORT = 8765


def add_commands(commands: Any) -> None:
    """Register ``serve`` on ``rlm``'s subcommand table."""
    sv = add_command(commands, "serve", help="serve agents and programs: MCP (stdio or HTTP) and a REST API",
                     description="Serve the runtime to agents, editors and other programs. --mcp speaks MCP on "
                                 "standard input and output (what an editor launches); --http serves a REST API under "
                                 "/api and MCP at /mcp on a loopback port, behind a bearer token created on first start "
                                 "(0600, under $RLM_HOME/serve/; --show-token prints it). More tokens, each read-only or "
                                 "with a memory store of its own: --add-token, --list-tokens, --remove-token. Clients read "
                                 "the registered contexts (rlm context add) and what lies under the --root folders; they "
                                 "register contexts only under the roots.",
                     examples=("rlm serve --mcp -m openai/gpt-4o-mini --root ~/projects",
                               "rlm serve --http --port 8765 -m local:qwen2.5-coder-1.5b",
                               "rlm serve --add-token alice --read-only --store ~/notes/alice.db"))
    how = sv.add_mutually_exclusive_group()
    how.add_argument("--mcp", action="store_true", help="MCP on standard input and output")
    how.add_argument("--http", action="store_true", help="REST under /api and MCP at /mcp over HTTP")
    how.add_argument("--show-token", action="store_true", help="print the HTTP bearer token (created if there is none)")
    how.add_argument("--rotate-token", action="store_true", help="replace the HTTP bearer token and print the new one")
    how.add_argument("--add-token", metavar="NAME",
                     help="make another HTTP token named NAME and print it (shown once: only its hash is kept)")
    how.add_argument("--list-tokens", action="store_true", help="list the named tokens: name, scope, store (never a secret)")
    how.add_argument("--remove-token", metavar="NAME", help="remove a named token (a running server refuses it within a second)")
    sv.add_argument("--read-only", action="store_true",
                    help="with --add-token: the token may read and search, never write (no note, edit or registration)")
    sv.add_argument("--store", metavar="PATH",
                    help="with --add-token: a memory store of the token's own (created if missing), apart from the "
                         "default store; in $RLM_HOME it goes in $RLM_HOME/brain/NAME.db")
    sv.add_argument("-m", "--model", help="the model every question uses (default: $RLM_MODEL)")
    sv.add_argument("--sub-model", help="model of llm_query and child RLMs (default: --model)")
    sv.add_argument("--root", action="append", default=[], metavar="DIR",
                    help="a folder clients may read and register contexts under (repeatable; default: none)")
    sv.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1, loopback)")
    sv.add_argument("--allow-host", action="append", default=[], metavar="NAME:PORT",
                    help="another Host header to accept (the name a proxy forwards; repeatable)")
    sv.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT}; 0: any free port)")
    sv.add_argument("--policy", default="default", help="sandbox policy name or TOML path")
    sv.add_argument("--profile", help="a profile (rlm profile list) or a profile TOML path")
    sv.add_argument("--sessions", type=int, help="client sessions kept at once (default: what this machine's memory allows)")
    sv.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                    help="questions may search the memory store (default: yes); with --no-memory, a memory store a "
                         "client names is opened read-only")
    sv.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env

    paths = paths_from_env()
    if (args.read_only or args.store is not None) and args.add_token is None:
        raise UsageError("--read-only and --store go with --add-token NAME")
    if args.add_token is not None or args.list_tokens or args.remove_token is not None:
        return _tokens(args, paths)
    if args.show_token or args.rotate_token:
        from rlm_runtime.serve import auth

        token = auth.rotate_token(paths) if args.rotate_token else auth.load_or_create_token(paths)[0]
        print(token)
        if args.rotate_token:
            from rlm_runtime.serve import running

            if running.find(paths) is not None:
                say(f"rlm: the running server takes the new token within {auth.TOKEN_CHECK_S:.0f} s; the old one stops "
                    "working then", err=True)
        return EXIT_OK
    if not (args.mcp or args.http):
        raise UsageError("say how to serve: --mcp (standard input and output) or --http")
    _more_open_files()
    service = _service(args, paths)
    for root in service.roots:
        home = paths.home.expanduser().resolve()
        if home == root or home.is_relative_to(root):
            say(f"rlm: {root} holds $RLM_HOME ({home}); clients are refused everything in it (the token, the registry, "
                "traces) and walks of the root leave it out, but a narrower --root is simpler", err=True)
    try:
        if args.mcp:
            from rlm_runtime.serve.mcp import run_stdio

            run_stdio(service)
            return EXIT_OK
        return _http(args, service, paths)
    finally:
        service.close()


def _tokens(args: argparse.Namespace, paths: Any) -> int:
    """``--add-token``, ``--list-tokens``, ``--remove-token``."""
    import time

    from rlm_runtime.serve import running, tokens

    live = f"a running server takes the change within {tokens.TOKENS_CHECK_S:.0f} s"
    if args.add_token is not None:
        secret, entry = tokens.add_token(paths, args.add_token, read_only=args.read_only, store=args.store)
        print(secret)
        store = "the default memory store" if entry.store is None else f"its own memory store {entry.store}"
        say(f"rlm: token {entry.name!r} made ({'read-only' if entry.read_only else 'full access'}, {store}); "
            f"it is shown this once, only its hash is kept"
            f"{'; ' + live if running.find(paths) is not None else ''}", err=True)
        return EXIT_OK
    if args.remove_token is not None:
        if not tokens.remove_token(paths, args.remove_token):
            raise UsageError(f"there is no token named {args.remove_token!r} (rlm serve --list-tokens)")
        say(f"rlm: token {args.remove_token!r} removed{'; ' + live if running.find(paths) is not None else ''}", err=True)
        return EXIT_OK
    rows = [(tokens.OWNER_NAME, "full", "default", "rlm serve --show-token")]
    for entry in tokens.load_tokens(paths):
        made = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created)) if abs(entry.created) < 1e11 else "?"
        rows.append((entry.name, "read-only" if entry.read_only else "full",
                     "default" if entry.store is None else str(entry.store), made))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    say(f"{'NAME':<{widths[0]}}  {'SCOPE':<{widths[1]}}  {'STORE':<{widths[2]}}  MADE")
    for row in rows:
        say(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
    return EXIT_OK


def _service(args: argparse.Namespace, paths: Any) -> Any:
    try:
        import mcp  # noqa: F401 - the serve extra, checked before anything starts
    except ImportError as e:
        raise UsageError("rlm serve needs the serve extra: pip install 'rlm_runtime[serve]'") from e
    from rlm_runtime.config import default_model
    from rlm_runtime.errors import ConfigError
    from rlm_runtime.llm import checked_client
    from rlm_runtime.serve.limits import ServeLimits
    from rlm_runtime.serve.service import Service

    name = args.model
    if not name:
        name, note = default_model()
        if note:
            say(f"rlm: {note}", err=True)
    if args.sessions is not None and args.sessions < 1:
        raise UsageError("--sessions must be at least 1")
    # The names are checked now, not at a client's first question. A model named on the
    # command line must run; the default one may be missing: peek, grep, chunk, search and
    # the registry need no model, so the server starts, says so once, and refuses ask alone.
    missing: ConfigError | None = None
    for model in filter(None, (name, args.sub_model)):
        try:
            checked_client(model).close()
        except ConfigError as e:
            if args.model or model == args.sub_model:
                raise
            missing = e
    options: dict[str, Any] = {"policy": args.policy, "memory": True if args.memory else None}
    if args.profile:
        options["profile"] = args.profile
    service = Service(name, args.sub_model, roots=args.root, paths=paths, limits=ServeLimits(sessions=args.sessions),
                      session_options=options)
    if missing is not None:
        service.model_error = ConfigError(f"ask needs a model, and this server has none: {missing} "
                                          "(or start it with -m MODEL)")
        say(f"rlm: {service.model_error}; everything else (peek, grep, chunk, search, the registry) works", err=True)
    return service


def _http(args: argparse.Namespace, service: Any, paths: Any) -> int:
    from rlm_runtime.serve import auth, running, tokens
    from rlm_runtime.serve.http import run_http

    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be from 0 to 65535")
    token, created = auth.load_or_create_token(paths)
    named = tokens.TokensFile(paths)  # a damaged file stops the start here, with why
    key = running.new_key()
    if not _loopback(args.host):
        say(f"rlm: serving on {args.host}, not loopback: anyone who can reach it and holds the token can read what the "
            "server reads. Put a TLS-terminating proxy in front of it (docs/serve.md).", err=True)

    def ready(url: str) -> None:
        # rlm ask --server finds the warm server here (removed when it stops).
        running.announce(paths, running.Running(url, os.getpid(), str(service.model), tuple(map(str, service.roots)), key))
        say(f"rlm: serving {url}/api (REST, docs at {url}/docs) and {url}/mcp (MCP)", err=True)
        if created:
            say(f"rlm: a bearer token was created (shown once; rlm serve --show-token prints it): {token}", err=True)
        else:
            say("rlm: clients send the bearer token from rlm serve --show-token", err=True)
        sys.stderr.flush()

    try:
        run_http(service, host=args.host, port=args.port, token=auth.TokenFile(paths, token), mcp=True, ready=ready,
                 extra_hosts=args.allow_host, stopped=lambda: running.withdraw(paths), hello_key=key, tokens=named)
    except KeyboardInterrupt:  # Ctrl-C: everything is closed by now
        pass
    finally:
        running.withdraw(paths)
    return EXIT_OK


def _more_open_files() -> None:
    """Raise this process's soft limit of open files to its hard limit: a server maps many
    documents for many clients, and connections take descriptors too."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = 1 << 20
        if soft != resource.RLIM_INFINITY and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # no resource module (Windows), or a limit the kernel refuses
        pass


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
