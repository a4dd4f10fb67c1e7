"""``rlm model install|list|remove``: the embedded local models (``local:NAME``), and the
quality tier's embedding model of search by meaning (``minilm-l6``: ``contextual.py``)."""

from __future__ import annotations

import argparse
from typing import Any

from rlm_runtime.cli.common import EXIT_FAILED, EXIT_OK, add_actions, add_command, say
from rlm_runtime.errors import ConfigError
from rlm_runtime.termsafe import one_line


def add_commands(commands: Any) -> None:
    """Register ``rlm model ...`` on ``rlm``'s subcommand table."""
    model = add_actions(add_command(
        commands, "model", help="embedded local models: install, list, remove",
        description="Embedded local models, served by llama.cpp on this machine and used as --model local:NAME "
                    "(no key, no network once installed).",
        examples=("rlm model list", "rlm model install qwen2.5-coder-1.5b",
                  'rlm ask "What is the launch code?" -c notes.txt -m local:qwen2.5-coder-1.5b')))
    mi = add_command(model, "install", help="download, assemble and verify a local model",
                     examples=("rlm model install qwen2.5-coder-1.5b",))
    mi.add_argument("name", help="qwen2.5-coder-1.5b or qwen2.5-coder-0.5b; minilm-l6: the quality tier of search by meaning")
    mi.set_defaults(run=_model_install)
    ml = add_command(model, "list", help="local models: installed or not, sizes, licence", examples=("rlm model list",))
    ml.set_defaults(run=_model_list)
    mr = add_command(model, "remove", help="delete an installed local model", examples=("rlm model remove qwen2.5-coder-0.5b",))
    mr.add_argument("name")
    mr.set_defaults(run=_model_remove)


def _model_install(args: argparse.Namespace) -> int:
    from rlm_runtime import contextual
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import models

    if args.name == contextual.MODEL:
        try:
            contextual.install(paths_from_env().models, progress=lambda m: say(m, err=True))
        except contextual.ContextualError as e:
            say(f"rlm: error: {one_line(str(e))}", err=True)
            return EXIT_FAILED
        say(f"{contextual.MODEL}: installed; rlm memory reindex --quality fills the store's quality vectors", err=True)
        return EXIT_OK
    models.spec(args.name)  # unknown names are a usage error before anything is fetched
    try:
        models.install(args.name, paths_from_env().models, progress=lambda m: say(m, err=True))
    except models.ModelError as e:
        say(f"rlm: error: {one_line(str(e))}", err=True)
        return EXIT_FAILED
    return EXIT_OK


def _model_list(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import models

    folder = paths_from_env().models
    have = {s.name: size for s, _, size in models.installed(folder)}
    for s in models.MODELS.values():
        state = f"installed, {have[s.name] / 1e9:.2f} GB" if s.name in have else "not installed"
        say(f"{s.name:22} {state:26} licence: {s.licence}; {s.note}")
    from rlm_runtime import contextual

    state = "installed" if contextual.installed(folder) else "not installed"
    say(f"{contextual.MODEL:22} {state:26} licence: {contextual.LICENCE}; the quality tier of search by meaning")
    say(f"(folder: {folder})")
    say(f"served by: {_engine_line()}")
    return EXIT_OK


def _engine_line() -> str:
    """Which engine serves ``local:`` models here, with its version, or why none can."""
    from rlm_runtime.config import local_engine_choice
    from rlm_runtime.llm.engines import find_engine

    try:
        return find_engine(local_engine_choice()).describe()
    except ConfigError as e:
        return f"no engine: {e}"


def _model_remove(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.llm import models

    if args.name == "minilm-l6":
        from rlm_runtime import contextual

        folder = paths_from_env().models
        found = [p for p in (*contextual.files(folder), *contextual.made_files(folder)) if p.is_file()]
        for p in found:
            p.unlink()
        say(f"removed {args.name}" if found else f"{args.name} is not installed")
        return EXIT_OK if found else EXIT_FAILED
    if models.remove(args.name, paths_from_env().models):
        say(f"removed {args.name}")
        return EXIT_OK
    say(f"{args.name} is not installed")
    return EXIT_FAILED
