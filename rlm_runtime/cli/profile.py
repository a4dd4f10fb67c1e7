"""``rlm profile list`` and ``rlm profile show NAME``: what each profile sets.

``show`` prints the parameters a profile gives for a model (``--model``, default the one
``rlm ask`` would use): its knobs, the limits that differ from that model's own, the
sub-model, the temperature, the answer style and the text it adds to the system prompt.
Profile files are the user's own text: what is printed from them goes through ``common.say``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rlm_runtime.cli.common import EXIT_OK, add_actions, add_command, print_json, say


def add_commands(commands: Any) -> None:
    """Register ``rlm profile ...`` on ``rlm``'s subcommand table."""
    profile = add_actions(add_command(
        commands, "profile", help="list profiles and show what one sets",
        description="Profiles: named settings of a run (limits, sub-model, temperature, a prompt addendum) for "
                    "rlm ask|repl|eval --profile NAME. Shipped ones, and yours under $RLM_HOME/brain/profiles.",
        examples=("rlm profile list", "rlm profile show research-analyst -m openai/gpt-4o-mini")))
    pl = add_command(profile, "list", help="the profiles (shipped, and yours under $RLM_HOME/brain/profiles)",
                     examples=("rlm profile list", "rlm profile list --json"))
    pl.add_argument("--json", action="store_true", help="print one JSON object")
    pl.set_defaults(run=_list)
    ps = add_command(profile, "show", help="what a profile sets, for a model",
                     examples=("rlm profile show research-analyst", "rlm profile show ./mine.toml -m local:qwen2.5-coder-1.5b --json"))
    ps.add_argument("name", help="a profile name or a profile TOML path")
    ps.add_argument("-m", "--model", help="the model whose own limits the profile changes (default: as rlm ask)")
    ps.add_argument("--json", action="store_true", help="print one JSON object")
    ps.set_defaults(run=_show)


def _list(args: argparse.Namespace) -> int:
    from rlm_runtime.config import paths_from_env
    from rlm_runtime.profiles import list_profiles

    found = list_profiles(paths_from_env().brain_dirs)
    if args.json:
        print_json(args, {"profiles": [{"name": p.name, "description": p.description, "source": p.source} for p in found]})
        return EXIT_OK
    width = max((len(p.name) for p in found), default=0)
    for p in found:
        say(f"{p.name.ljust(width)}  {p.description}")
    if not found:
        say("no profiles found")
    return EXIT_OK


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
        print_json(args, info)
        return EXIT_OK
    say(f"{info['name']}: {info['description'] or '(no description)'}")
    say(f"  file: {info['source']}")
    say(f"  for model: {model}")
    for knob in KNOBS:
        if knob.name in info["knobs"]:
            say(f"  knob {knob.name} = {info['knobs'][knob.name]} -> {knob.parameter} ({knob.describe})")
    changed = info["limits_changed"]
    say("  limits: " + (", ".join(f"{k}={v}" for k, v in changed.items()) if changed else "the model's own"))
    say(f"  sub-model: {info['sub_model'] or '(the root model)'}")
    say(f"  temperature: {info['temperature'] if info['temperature'] is not None else '(the client default)'}")
    say(f"  answer style: {info['answer_style']}")
    if info["system_addendum"]:
        say("  added to the system prompt:")
        for line in info["system_addendum"].splitlines():
            say(f"    {line}")
    return EXIT_OK
