"""Profiles: files of real parameters, knobs mapped by one table, and where they apply
(Session, RLM, rlm ask, rlm profile list/show)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rlm_runtime import RLM, Session
from rlm_runtime.assist import names_for
from rlm_runtime.budget import RunLimits
from rlm_runtime.config import paths_from_env
from rlm_runtime.errors import ConfigError
from rlm_runtime.llm import ScriptedClient
from rlm_runtime.profiles import Knobs, Profile, apply_knobs, list_profiles, load_profile, resolve

from .support import CLIResult, code, fast, of_type, read_trace

CLI = Callable[..., CLIResult]


def brain() -> tuple[Path, ...]:
    return paths_from_env().brain_dirs


def user_profile(home: Path, name: str, text: str) -> Path:
    folder = home / "brain" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_shipped_profile_loads_and_resolves() -> None:
    """It ships base, quick, research-analyst, code-copilot and creative, each valid for a small and a large model."""
    names = {p.name for p in list_profiles(brain())}
    assert {"base", "quick", "research-analyst", "code-copilot", "creative"} <= names
    for name in names:
        profile = load_profile(name, brain())
        assert profile.description and "invalid" not in profile.description
        for model in ("local:qwen2.5-coder-1.5b", "openai/gpt-4o-mini"):
            resolve(profile, RunLimits.for_model(model), brain())


def test_the_base_profile_changes_nothing() -> None:
    """It leaves the model's own limits and prompt as they are under the base profile."""
    base = RunLimits.for_model("local:qwen2.5-coder-1.5b")
    settings = resolve(load_profile("base", brain()), base, brain())
    assert settings.limits == base and settings.system_addendum == "" and settings.temperature is None


def test_the_small_model_profile_gives_a_large_name_the_small_model_limits() -> None:
    """It gives a model served under a name that states no size (openai/my-model) exactly the limits
    a local: model gets by itself."""
    settings = resolve(load_profile("small-model", brain()), RunLimits.for_model("openai/my-model"), brain())
    assert settings.limits == RunLimits.for_small_model(assists="small")
    # and the assists a local model gets by itself ("auto" is the small-model set for it)
    assert names_for(settings.limits.assists, "openai/my-model") == names_for("auto", "local:qwen2.5-coder-1.5b")
    assert RunLimits.for_model("openai/my-model") != RunLimits.for_small_model()


@pytest.mark.parametrize(("knob", "value", "expected"), [
    ("thoroughness", 0, {"max_iterations": 3}), ("thoroughness", 100, {"max_iterations": 30, "max_llm_calls": 300}),
    ("thoroughness", 50, {"max_iterations": 17}),
    ("recursion", 0, {"max_depth": 0}), ("recursion", 24, {"max_depth": 0}), ("recursion", 25, {"max_depth": 1}),
    ("recursion", 60, {"max_depth": 2}), ("recursion", 85, {"max_depth": 3}), ("recursion", 100, {"max_depth": 3}),
    ("tool_use", 0, {"sub_calls": False, "max_llm_calls": 20}), ("tool_use", 19, {"sub_calls": False}),
    ("tool_use", 20, {"sub_calls": True, "max_llm_calls": 60}), ("tool_use", 100, {"sub_calls": True, "max_llm_calls": 220}),
])
def test_knobs_set_limits_by_the_table(knob: str, value: int, expected: dict[str, int]) -> None:
    """It maps each knob value onto its limit as the KNOBS table says."""
    limits, _, _ = apply_knobs(Knobs(**{knob: value}), RunLimits())
    for field, want in expected.items():
        assert getattr(limits, field) == want


def test_tool_use_counts_turns_after_thoroughness() -> None:
    """It sets model calls from the turns the thoroughness knob gave (3 + 27 * 0.5 = 17 turns, 6x them at 50)."""
    limits, _, _ = apply_knobs(Knobs(thoroughness=50, tool_use=50), RunLimits())
    assert (limits.max_iterations, limits.sub_calls, limits.max_llm_calls) == (17, True, 102)


def test_directness_appends_its_prompt_and_creative_ships(tmp_path: Path) -> None:
    """It appends the weigh prompt below 34 and the plain one from 67 (neither between), and the creative profile
    reaches the run: its prompt, its temperature, its weighing directness."""
    for value, says in ((10, "give the one you think best first"), (50, None), (90, "state the answer plainly")):
        settings = resolve(Profile(name="t", knobs=Knobs(directness=value)), RunLimits(), brain())
        assert (says in settings.system_addendum) if says else settings.system_addendum == ""
    client = ScriptedClient([code("FINAL('ok')")])
    with Session(client, profile="creative", trace=False) as s:
        assert s.ask("name the product").answer == "ok"
        assert s.limits.sub_calls
    system = client.prompts[0][0]["content"]
    assert "offer three distinct options" in system and "give the one you think best first" in system
    assert resolve(load_profile("creative", brain()), RunLimits(), brain()).temperature == 0.9


def test_verbosity_and_creativity_set_the_answer_style_and_temperature() -> None:
    """It maps verbosity to brief / plain / evidence and creativity to a temperature."""
    assert [apply_knobs(Knobs(verbosity=v), RunLimits())[1] for v in (0, 33, 34, 66, 67, 100)] == \
        ["brief", "brief", "plain", "plain", "evidence", "evidence"]
    assert apply_knobs(Knobs(creativity=35), RunLimits())[2] == 0.35
    assert apply_knobs(Knobs(), RunLimits()) == (RunLimits(), None, None)


def test_the_profiles_own_limits_win_over_its_knobs(_rlm_home: Path) -> None:
    """It applies [limits] after the knobs."""
    user_profile(_rlm_home, "mine", "[knobs]\nthoroughness = 100\n[limits]\nmax_iterations = 5\n")
    settings = resolve(load_profile("mine", brain()), RunLimits(), brain())
    assert settings.limits.max_iterations == 5 and settings.limits.max_llm_calls == 300


def test_a_users_profile_hides_the_shipped_one(_rlm_home: Path) -> None:
    """It reads $RLM_HOME/brain/profiles/NAME.toml before the shipped file of that name."""
    user_profile(_rlm_home, "quick", 'description = "my own quick"\n')
    assert load_profile("quick", brain()).description == "my own quick"
    assert [p.description for p in list_profiles(brain()) if p.name == "quick"] == ["my own quick"]


@pytest.mark.parametrize(("text", "says"), [
    ("[knobs\n", "not valid TOML"),
    ("colour = 'blue'\n", "colour"),
    ("[knobs]\nhumor = 50\n", "humor"),
    ("[knobs]\nthoroughness = 101\n", "thoroughness"),
    ("[limits]\nmax_turns = 3\n", "max_turns"),
    ("[limits]\nmax_iterations = 0\n", "max_iterations"),
    ("answer_style = 'chatty'\n", "answer_style"),
    ("temperature = 9\n", "temperature"),
])
def test_an_invalid_profile_is_a_clear_error(_rlm_home: Path, text: str, says: str) -> None:
    """It refuses a broken profile with a ConfigError naming the file and the field."""
    path = user_profile(_rlm_home, "broken", text)
    with pytest.raises(ConfigError) as err:
        load_profile("broken", brain())
    assert str(path) in str(err.value) and says in str(err.value)
    listed = [p for p in list_profiles(brain()) if p.name == "broken"]
    assert listed and listed[0].description.startswith("(invalid")


@pytest.mark.parametrize("name", ["../../etc/passwd", "a b", "", "quick;rm"])
def test_a_profile_name_is_a_name_not_a_path(name: str) -> None:
    """It refuses names with path or shell characters (a path must end in .toml)."""
    with pytest.raises(ConfigError):
        load_profile(name, brain())


def test_an_unknown_profile_lists_the_known_ones() -> None:
    """It names the profiles there are when asked for one that is not."""
    with pytest.raises(ConfigError, match="known profiles: .*quick"):
        load_profile("nope", brain())


def test_a_session_with_a_profile_uses_its_limits_and_prompt(tmp_path: Path) -> None:
    """It gives the run the profile's limits and appends its texts to the system prompt."""
    client = ScriptedClient([code("FINAL('ok')")])
    trace = tmp_path / "t.jsonl"
    with Session(client, profile="research-analyst", trace=trace) as s:
        assert s.limits.max_iterations == 25 and s.limits.max_depth == 2
        assert s.ask("q").answer == "ok"
    system = client.prompts[0][0]["content"]
    assert system.rstrip().endswith("with\ntheir line numbers.")
    assert "Work thoroughly." in system
    start = of_type(read_trace(trace), "run_start")[0]
    assert start["limits"]["max_iterations"] == 25


def test_explicit_limits_win_over_the_profile() -> None:
    """It keeps limits given to the Session as they are (the prompt addendum still applies)."""
    with Session(ScriptedClient([]), limits=fast(max_iterations=4), profile="research-analyst", trace=False) as s:
        assert s.limits.max_iterations == 4
        assert "Work thoroughly." in s.setup.system_addendum


def test_a_profile_temperature_and_sub_model_reach_clients_made_from_names(_rlm_home: Path) -> None:
    """It makes named models with the profile's temperature and its sub-model."""
    user_profile(_rlm_home, "warm", 'sub_model = "openai/gpt-4o-mini"\n[knobs]\ncreativity = 70\n')
    with Session("openai/gpt-4o", profile="warm", trace=False) as s:
        assert s.setup.client.extra["temperature"] == 0.7  # type: ignore[attr-defined]
        assert s.setup.sub_client.model == "openai/gpt-4o-mini"
        assert s.setup.sub_client.extra["temperature"] == 0.7  # type: ignore[attr-defined]
        s.set_profile("quick")
        assert "temperature" not in s.setup.client.extra  # type: ignore[attr-defined]
        assert s.setup.sub_client is s.setup.client  # the old profile's sub-model went with it
        assert s.limits.max_iterations == 7 and "short as it can be" in s.setup.system_addendum
        s.set_profile(None)
        assert s.limits == RunLimits.for_model("openai/gpt-4o") and s.setup.system_addendum == ""


def test_rlm_takes_a_profile(tmp_path: Path) -> None:
    """It runs RLM with a profile object's limits and prompt."""
    client = ScriptedClient([code("FINAL('fine')")])
    profile = Profile(name="inline", answer_style="brief", limits={"max_iterations": 6})
    with RLM(client, profile=profile, trace=False) as rlm:
        assert rlm.limits.max_iterations == 6
        assert rlm.run("q", "text").answer == "fine"
    assert "short as it can be" in client.prompts[0][0]["content"]


def test_rlm_ask_with_a_profile_and_a_flag(write_script: Callable[..., Path], rlm_cli: CLI, tmp_path: Path) -> None:
    """It applies --profile, with --max-iterations winning over it."""
    script = write_script(code("FINAL('done')"))
    trace = tmp_path / "t.jsonl"
    res = rlm_cli("ask", "q", "--model", f"scripted:{script}", "--profile", "research-analyst", "--max-iterations", "9",
                  "--trace", trace, "-q")
    assert res.code == 0, res.err
    limits = of_type(read_trace(trace), "run_start")[0]["limits"]
    assert limits["max_iterations"] == 9 and limits["max_depth"] == 2


def test_rlm_ask_with_an_unknown_profile_is_a_usage_error(write_script: Callable[..., Path], rlm_cli: CLI) -> None:
    """It exits 2 with one line naming the known profiles."""
    res = rlm_cli("ask", "q", "--model", f"scripted:{write_script(code('FINAL(1)'))}", "--profile", "nope")
    assert res.code == 2 and "unknown profile 'nope'" in res.err and "Traceback" not in res.err


def test_rlm_profile_list_and_show(rlm_cli: CLI) -> None:
    """It lists the profiles and shows what one sets for a model."""
    listed = rlm_cli("profile", "list")
    assert listed.code == 0 and "research-analyst" in listed.out and "quick" in listed.out
    shown = rlm_cli("profile", "show", "quick", "--model", "openai/gpt-4o-mini")
    assert shown.code == 0
    assert "max_iterations=7" in shown.out and "answer style: brief" in shown.out
    data = rlm_cli("profile", "show", "research-analyst", "--json").json()
    assert data["limits_changed"]["max_depth"] == 2 and data["answer_style"] == "evidence"


def test_a_profile_sets_the_assists(_rlm_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It takes assists from a profile's [limits] (a word or a list) and names an unknown one."""
    from rlm_runtime.assist import REGISTRY, Assist

    for name in ("first", "second"):  # no assist ships: two of the test's own, registered
        monkeypatch.setitem(REGISTRY, name, type(name.title(), (Assist,), {"name": name}))
    user_profile(_rlm_home, "plain", '[limits]\nassists = "none"\n')
    assert resolve(load_profile("plain", brain()), RunLimits(), brain()).limits.assists == "none"
    user_profile(_rlm_home, "some", '[limits]\nassists = ["second", "first"]\n')
    assert resolve(load_profile("some", brain()), RunLimits(), brain()).limits.assists == ("second", "first")
    user_profile(_rlm_home, "bad", '[limits]\nassists = ["magic"]\n')
    with pytest.raises(ConfigError, match="no assist named 'magic'"):
        load_profile("bad", brain())
