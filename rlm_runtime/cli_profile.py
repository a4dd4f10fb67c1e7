"""``rlm profile list`` and ``rlm profile show NAME``: what each profile sets.

``show`` prints the parameters a profile gives for a model (``--model``, default the one
``rlm ask`` would use): its knobs, the limits that differ from that model's own, the
sub-model, the temperature, the answer style and the text it adds to the system prompt.
Profile files are the user's own text: what is printed from them goes through ``cli._say``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rlm_runtime import cli


def add_profile_commands(commands: Any) -> None:
    profile = commands.add_parser("profile", help="list profiles and show what one sets").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    pl = profile.add_parser("list", help="the profiles (shipped, and yours under $RLM_HOME/brain/profiles)")
    pl.add_argument("--json", action="store_true", help="print one JSON object")
    pl.set_defaults(run=_list)
    ps = profile.add_parser("show", help="what a profile sets, for a model")
    ps.add_argument("name", help="a profile name or a profile TOML path")
    ps.add_argument("--model", help="the model whose own limits the profile changes (default: as rlm ask)")
    ps.add_argument("--json", action="store_true", help="print one JSON object")
    ps.set_defaults(run=_show)


def _list(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.profiles import list_profiles

    found = list_profiles(paths_from_env().brain_dirs)
    if args.json:
        cli._print_json(args, {"profiles": [{"name": p.name, "description": p.description, "source": p.source}
                                            for p in found]})
        return cli.EXIT_OK
    width = max((len(p.name) for p in found), default=0)
    for p in found:
        cli._say(f"{p.name.ljust(width)}  {p.description}")
    if not found:
        cli._say("no profiles found")
    return cli.EXIT_OK


def _show(args: argparse.Namespace) -> int:
    from rlm_runtime.budget import RunLimits
    from rlm_runtime.config import default_model, paths_from_env
    from rlm_runtime.profiles import KNOBS, describe, load_profile

    brain_dirs = paths_from_env().brain_dirs
    profile = load_profile(args.name, brain_dirs)
    model = args.model or default_model()[0]
    info = describe(profile, RunLimits.for_model(model), brain_dirs)
    info["model"] = model
    if args.json:
        cli._print_json(args, info)
        return cli.EXIT_OK
    cli._say(f"{info['name']}: {info['description'] or '(no description)'}")
    cli._say(f"  file: {info['source']}")
    cli._say(f"  for model: {model}")
    for knob in KNOBS:
        if knob.name in info["knobs"]:
            cli._say(f"  knob {knob.name} = {info['knobs'][knob.name]} -> {knob.parameter} ({knob.describe})")
    changed = info["limits_changed"]
    cli._say("  limits: " + (", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "the model's own"))
    cli._say(f"  sub-model: {info['sub_model'] or '(the root model)'}")
    cli._say(f"  temperature: {info['temperature'] if info['temperature'] is not None else '(the client default)'}")
    cli._say(f"  answer style: {info['answer_style']}")
    if info["system_addendum"]:
        cli._say("  added to the system prompt:")
        for line in info["system_addendum"].splitlines():
            cli._say(f"    {line}")
    return cli.EXIT_OK
