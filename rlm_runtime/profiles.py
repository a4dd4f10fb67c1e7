"""Profiles: named sets of real run parameters (limits, sub-model, temperature, a system-prompt
addendum, an answer style), with 0-100 knobs mapped onto those parameters by one table.

A profile is a TOML file ``brain/profiles/NAME.toml``; one of the same name under
``$RLM_HOME/brain/profiles/`` overrides the shipped one, and a path to a ``.toml`` file works
too. Everything in it is optional::

    description = "Thorough: more turns, recursion on, answers cite line numbers."
    sub_model = "openai/gpt-4o-mini"   # the model of llm_query and child runs
    temperature = 0.2                  # of every model call (0-2)
    prompt = "research-analyst"        # brain/prompts/profiles/research-analyst.md, appended
    answer_style = "evidence"          # brief | plain | evidence
    always = ["ctx:me"]                # contexts in every question (registry.always)

    [knobs]                            # 0-100 each; see KNOBS
    thoroughness = 80
    recursion = 60

    [limits]                           # any RunLimits field; wins over the knobs
    max_iterations = 24

Precedence, lowest first: the model's own limits (``RunLimits.for_model``), the knobs, the
profile's ``[limits]``, then what the caller passes explicitly (``Session(limits=...)``,
``--max-iterations``). ``directness`` appends a prompt file (how plainly to state an answer),
``tool_use`` sets whether sub-calls are offered and how many model calls a question may make.
The seed's other sliders (humour, "soul") are left out: no parameter of a run would change
with them, and a knob that changes nothing would be a lie.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlm_runtime.budget import RunLimits
from rlm_runtime.config import user_path
from rlm_runtime.errors import ConfigError

AnswerStyle = Literal["brief", "plain", "evidence"]


@dataclass(frozen=True)
class Knob:
    """One 0-100 knob: the parameter it sets and how (``describe`` says it in words)."""

    name: str
    parameter: str
    describe: str


#: The knobs and what each sets; ``apply_knobs`` is the code of this table.
KNOBS: tuple[Knob, ...] = (
    Knob("thoroughness", "max_iterations, max_llm_calls",
         "turns per question: 3 at 0 to 30 at 100 (3 + 27 * k / 100, rounded); model calls at least 10x that"),
    Knob("recursion", "max_depth",
         "how deep rlm_query may nest: 0 below 25, 1 below 60, 2 below 85, else 3"),
    Knob("verbosity", "answer_style",
         "brief below 34, plain below 67, else with evidence (quoted lines and line numbers)"),
    Knob("creativity", "temperature",
         "sampling temperature: k / 100 (0 = deterministic, 1 = the provider's usual)"),
    Knob("directness", "the system prompt",
         "below 34: weigh the readings and say what is uncertain (prompts/directness/weigh.md); from 67: state "
         "the answer plainly, no hedging (prompts/directness/plain.md); between: neither"),
    Knob("tool_use", "sub_calls, max_llm_calls",
         "below 20: no llm_query or rlm_query (code alone; model calls = turns); from 20: sub-calls on, model "
         "calls per question = turns * (1 + k / 10, rounded)"),
)


class Knobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    thoroughness: int | None = Field(None, ge=0, le=100)
    recursion: int | None = Field(None, ge=0, le=100)
    verbosity: int | None = Field(None, ge=0, le=100)
    creativity: int | None = Field(None, ge=0, le=100)
    directness: int | None = Field(None, ge=0, le=100)
    tool_use: int | None = Field(None, ge=0, le=100)


class Profile(BaseModel):
    """A profile as written in its file (``resolve`` turns it into run settings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    sub_model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    prompt: str | None = None
    answer_style: AnswerStyle | None = None
    knobs: Knobs = Field(default_factory=Knobs)
    limits: dict[str, Any] = Field(default_factory=dict)
    #: Registered contexts (``ctx:ID``) whose text every question of this profile sees (``registry.always``).
    always: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class Settings:
    """What a profile does to a run: every field a real parameter."""

    limits: RunLimits
    sub_model: str | None
    temperature: float | None
    #: Appended to the system prompt (the profile's prompt file and its answer style's).
    system_addendum: str


def profile_dirs(brain_dirs: tuple[Path, ...]) -> tuple[Path, ...]:
    return tuple(d / "profiles" for d in brain_dirs)


def load_profile(name: str | Path, brain_dirs: tuple[Path, ...]) -> Profile:
    """The profile ``name`` (first found in ``brain_dirs``), or the ``.toml`` file at that path.

    Raises:
        ConfigError: no such profile, unreadable TOML, or an invalid field (named).
    """
    text = str(name)
    if text.endswith(".toml") or "/" in text:
        path = user_path(text)
        if not path.is_file():
            raise ConfigError(f"profile file not found: {path}")
        return _read(path, path.stem)
    if not text or not all(ch.isalnum() or ch in "-_" for ch in text):
        raise ConfigError(f"invalid profile name {text!r}: letters, digits, - and _ only")
    for folder in profile_dirs(brain_dirs):
        path = folder / f"{text}.toml"
        if path.is_file():
            return _read(path, text)
    known = ", ".join(p.name for p in list_profiles(brain_dirs)) or "none"
    raise ConfigError(f"unknown profile {text!r}; known profiles: {known}")


def list_profiles(brain_dirs: tuple[Path, ...]) -> list[Profile]:
    """Every profile, a user's hiding a shipped one of the same name; sorted by name. A
    broken file is listed by name with its error as description, not skipped in silence."""
    found: dict[str, Profile] = {}
    for folder in profile_dirs(brain_dirs):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            if path.stem in found:
                continue
            try:
                found[path.stem] = _read(path, path.stem)
            except ConfigError as e:
                found[path.stem] = Profile(name=path.stem, description=f"(invalid: {e})", source=str(path))
    return [found[k] for k in sorted(found)]


def _read(path: Path, name: str) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read profile {path}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    except RecursionError as e:  # tomllib recurses once per nested array or table
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from e
    try:
        profile = Profile(name=name, source=str(path), **data)
    except ValidationError as e:
        raise ConfigError(f"{path}: {_first_error(e)}") from e
    except TypeError as e:  # a key clashing with name/source
        raise ConfigError(f"{path}: {e}") from e
    _check_limits(profile.limits, path)
    return profile


def _check_limits(limits: dict[str, Any], where: Path | str) -> None:
    unknown = sorted(set(limits) - set(RunLimits.model_fields))
    if unknown:
        raise ConfigError(f"{where}: [limits] has no field {unknown[0]!r}; fields: {', '.join(RunLimits.model_fields)}")
    try:
        RunLimits(**limits)
    except ValidationError as e:
        raise ConfigError(f"{where}: [limits] {_first_error(e)}") from e


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    field = ".".join(str(x) for x in err.get("loc", ())) or "value"
    return f"{field}: {err.get('msg', 'invalid')}"


def directness_prompt(knobs: Knobs) -> str | None:
    """The prompt file the ``directness`` knob appends (``directness/NAME``), or None."""
    d = knobs.directness
    return None if d is None or 34 <= d < 67 else ("directness/weigh" if d < 34 else "directness/plain")


def apply_knobs(knobs: Knobs, limits: RunLimits) -> tuple[RunLimits, AnswerStyle | None, float | None]:
    """``limits`` with the knobs applied (the table ``KNOBS``), the answer style and the
    temperature they set (None: the knob is not set); ``directness`` acts on the prompt
    (``directness_prompt``)."""
    changes: dict[str, Any] = {}
    if knobs.thoroughness is not None:
        turns = 3 + round(27 * knobs.thoroughness / 100)
        changes["max_iterations"] = turns
        changes["max_llm_calls"] = max(limits.max_llm_calls, 10 * turns)
    if knobs.recursion is not None:
        r = knobs.recursion
        changes["max_depth"] = 0 if r < 25 else 1 if r < 60 else 2 if r < 85 else 3
    style: AnswerStyle | None = None
    if knobs.verbosity is not None:
        v = knobs.verbosity
        style = "brief" if v < 34 else "plain" if v < 67 else "evidence"
    if knobs.tool_use is not None:
        turns = changes.get("max_iterations", limits.max_iterations)
        t = knobs.tool_use
        changes["sub_calls"] = t >= 20
        changes["max_llm_calls"] = turns if t < 20 else turns * (1 + round(t / 10))
    temperature = None if knobs.creativity is None else round(knobs.creativity / 100, 2)
    return limits.model_copy(update=changes), style, temperature


def resolve(profile: Profile, base: RunLimits, brain_dirs: tuple[Path, ...]) -> Settings:
    """The run settings of ``profile`` over ``base`` (the model's own limits)."""
    from rlm_runtime import brain

    limits, style, temperature = apply_knobs(profile.knobs, base)
    if profile.limits:
        limits = RunLimits(**{**limits.model_dump(), **profile.limits})
    style = profile.answer_style or style
    temperature = profile.temperature if profile.temperature is not None else temperature
    parts = []
    if profile.prompt:
        parts.append(brain.prompt(f"profiles/{profile.prompt}", brain_dirs))
    if (direct := directness_prompt(profile.knobs)) is not None:
        parts.append(brain.prompt(direct, brain_dirs))
    if style and style != "plain":
        parts.append(brain.prompt(f"answer_style/{style}", brain_dirs))
    return Settings(limits=limits, sub_model=profile.sub_model, temperature=temperature,
                    system_addendum="\n\n".join(parts))


def describe(profile: Profile, base: RunLimits, brain_dirs: tuple[Path, ...]) -> dict[str, Any]:
    """What ``rlm profile show`` prints: the file, the knobs, and the parameters they give."""
    settings = resolve(profile, base, brain_dirs)
    defaults = base.model_dump()
    return {
        "name": profile.name, "source": profile.source, "description": profile.description,
        "knobs": profile.knobs.model_dump(exclude_none=True),
        "limits_changed": {k: v for k, v in settings.limits.model_dump().items() if defaults.get(k) != v},
        "sub_model": settings.sub_model, "temperature": settings.temperature,
        "answer_style": profile.answer_style or apply_knobs(profile.knobs, base)[1] or "plain",
        "system_addendum": settings.system_addendum,
    }
