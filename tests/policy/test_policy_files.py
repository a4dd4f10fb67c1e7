"""Policy files: loaded by name or path, validated strictly, overridable from $RLM_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlm_runtime.errors import ConfigError
from rlm_runtime.sandbox.policy import Policy, check, load_policy, parse_policy

SHIPPED = Path(__file__).resolve().parents[2] / "sandbox_policies"


@pytest.fixture
def home() -> Path:
    """The temp RLM_HOME set by the autouse fixture of tests/conftest.py."""
    return Path(os.environ["RLM_HOME"])


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------- loading


def test_allows_loading_the_shipped_policies_by_name() -> None:
    """It allows `default` and `strict` by name, with the rules their files declare."""
    default, strict = load_policy("default"), load_policy("strict")
    assert (default.name, strict.name) == ("default", "strict")
    assert "re" in default.allowed_imports and "os" not in default.allowed_imports
    assert "string.Formatter" in default.denied_attributes
    assert "ClassDef" in strict.code.deny_constructs and default.code.deny_constructs == ()
    assert strict.limits.cell_timeout_s < default.limits.cell_timeout_s


@pytest.mark.parametrize("path", sorted(SHIPPED.glob("*.toml")), ids=lambda p: p.name)
def test_allows_every_shipped_policy_file(path: Path) -> None:
    """It allows every file in sandbox_policies/, named after its file."""
    assert load_policy(path).name == path.stem


def test_allows_loading_by_path(tmp_path: Path) -> None:
    """It allows a path given as str or Path, relative or absolute."""
    path = _write(tmp_path / "mine.toml", 'name = "mine"\n[imports]\nallow = ["re"]\n')
    assert load_policy(str(path)).allowed_imports == ("re",)
    assert load_policy(path).name == "mine"


def test_allows_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It allows a path relative to the working directory."""
    _write(tmp_path / "sub" / "rel.toml", '[imports]\nallow = ["json"]\n')
    monkeypatch.chdir(tmp_path)
    assert load_policy("sub/rel.toml").allowed_imports == ("json",)


def test_allows_a_nameless_file_to_be_named_after_itself(tmp_path: Path) -> None:
    """It allows a file without `name`: the policy takes the file's stem."""
    assert load_policy(_write(tmp_path / "anon.toml", "")).name == "anon"


def test_allows_a_policy_object_to_pass_through(default: Policy) -> None:
    """It allows a Policy where a name is expected, returned as is."""
    assert load_policy(default) is default


def test_allows_an_explicit_search_path(tmp_path: Path) -> None:
    """It allows a caller to name the folders searched for a policy name."""
    _write(tmp_path / "team.toml", 'description = "team"\n')
    assert load_policy("team", search=(tmp_path,)).description == "team"


def test_denies_an_unknown_name_listing_the_available_ones(home: Path) -> None:
    """It denies an unknown name with a ConfigError listing every available policy."""
    _write(home / "sandbox_policies" / "mine.toml", "")
    with pytest.raises(ConfigError) as err:
        load_policy("nosuch")
    assert str(err.value) == "no policy named 'nosuch'; available: default, mine, strict"


@pytest.mark.parametrize("name", ["bad name", "semi;colon", "dots.in.it", "tab\there"])
def test_denies_an_invalid_policy_name(name: str) -> None:
    """It denies a name that is not letters, digits, '-' and '_'."""
    with pytest.raises(ConfigError, match="invalid policy name"):
        load_policy(name)


def test_denies_a_missing_path(tmp_path: Path) -> None:
    """It denies a path that does not exist, naming it."""
    with pytest.raises(ConfigError, match="policy file not found: .*missing.toml"):
        load_policy(tmp_path / "missing.toml")


def test_denies_a_directory(tmp_path: Path) -> None:
    """It denies a directory given as a policy path."""
    with pytest.raises(ConfigError, match="cannot read policy file"):
        load_policy(tmp_path)


def test_denies_invalid_toml(tmp_path: Path) -> None:
    """It denies a file that is not TOML, naming the file and TOML's reason."""
    path = _write(tmp_path / "broken.toml", "[imports\nallow = [\n")
    with pytest.raises(ConfigError, match=r"broken\.toml: invalid TOML: .*line 1"):
        load_policy(path)


def test_denies_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    """It denies a policy file that is not UTF-8."""
    path = tmp_path / "latin.toml"
    path.write_bytes(b'description = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="cannot read policy file"):
        load_policy(path)


# ------------------------------------------------------------------- validation


def test_denies_unknown_top_level_keys() -> None:
    """It denies unknown top-level keys, listing them and the expected ones."""
    with pytest.raises(ConfigError) as err:
        parse_policy({"name": "x", "imprts": {}, "extra": 1}, "typo.toml")
    assert str(err.value) == ("typo.toml: unknown key(s) ['extra', 'imprts']; "
                              "expected ['attributes', 'code', 'description', 'imports', 'limits', 'name']")


@pytest.mark.parametrize(("table", "key"), [("code", "max_depth"), ("limits", "timeout")])
def test_denies_unknown_keys_in_code_and_limits(table: str, key: str) -> None:
    """It denies an unknown key in [code] or [limits], naming it."""
    with pytest.raises(ConfigError, match=f"typo.toml: {key}: Extra inputs are not permitted"):
        parse_policy({table: {key: 1}}, "typo.toml")


@pytest.mark.parametrize(("table", "key"), [("imports", "alow"), ("attributes", "denny")])
def test_denies_unknown_keys_in_imports_and_attributes(table: str, key: str) -> None:
    """It denies an unknown key in [imports] or [attributes]."""
    with pytest.raises(ConfigError):
        parse_policy({table: {key: ["string.Formatter"]}}, "typo.toml")


@pytest.mark.parametrize(("data", "match"), [
    ({"code": {"max_nesting": "deep"}}, "max_nesting: Input should be a valid integer"),
    ({"code": {"max_ast_nodes": 1.5}}, "max_ast_nodes: Input should be a valid integer"),
    ({"code": {"deny_constructs": "ClassDef"}}, "deny_constructs: Input should be a valid tuple"),
    ({"limits": {"memory_mb": [512]}}, "memory_mb: Input should be a valid integer"),
    ({"imports": ["re"]}, r"\[imports\] and \[attributes\] must be tables"),
    ({"attributes": "string.Formatter"}, r"\[imports\] and \[attributes\] must be tables"),
    ({"code": 5}, "argument after \\*\\* must be a mapping"),
    ({"limits": "fast"}, "argument after \\*\\* must be a mapping"),
    ({"name": 5}, "name: Input should be a valid string"),
    ({"description": ["x"]}, "description: Input should be a valid string"),
    ({"imports": {"allow": [1, 2]}}, r"\[imports\] allow must be a list of strings"),
])
def test_denies_wrong_types(data: dict[str, object], match: str) -> None:
    """It denies values of the wrong type with a ConfigError naming the file and the field."""
    with pytest.raises(ConfigError, match=f"^types.toml: .*{match}"):
        parse_policy(data, "types.toml")


@pytest.mark.parametrize("data", [{"imports": {"allow": "re"}}, {"attributes": {"deny": "string.Formatter"}}])
def test_denies_a_string_where_a_list_is_expected(data: dict[str, object]) -> None:
    """It denies a bare string for imports.allow or attributes.deny."""
    with pytest.raises(ConfigError):
        parse_policy(data, "types.toml")


def test_denies_an_attribute_without_its_module() -> None:
    """It denies `deny = ["Formatter"]`, which names no module."""
    with pytest.raises(ConfigError):
        parse_policy({"attributes": {"deny": ["Formatter"]}}, "attrs.toml")


@pytest.mark.parametrize(("data", "match"), [
    ({"code": {"max_nesting": 1000}}, "max_nesting: Input should be less than or equal to 190"),
    ({"code": {"max_nesting": 1}}, "max_nesting: Input should be greater than or equal to 2"),
    ({"code": {"max_ast_depth": 901}}, "max_ast_depth: Input should be less than or equal to 900"),
    ({"code": {"max_source_bytes": 0}}, "max_source_bytes: Input should be greater than or equal to 16"),
    ({"limits": {"memory_mb": 1}}, "memory_mb: Input should be greater than or equal to 32"),
    ({"limits": {"cell_timeout_s": 0}}, "cell_timeout_s: Input should be greater than 0"),
])
def test_denies_values_out_of_range(data: dict[str, object], match: str) -> None:
    """It denies numbers outside their range, naming the bound."""
    with pytest.raises(ConfigError, match=match):
        parse_policy(data, "range.toml")


def test_denies_unknown_deny_constructs_names(tmp_path: Path) -> None:
    """It denies deny_constructs names that are not AST node classes, listing them."""
    path = _write(tmp_path / "nodes.toml", '[code]\ndeny_constructs = ["ClassDef", "Classdef", "Lambada"]\n')
    with pytest.raises(ConfigError) as err:
        load_policy(path)
    assert str(err.value) == f"{path}: deny_constructs names unknown AST nodes ['Classdef', 'Lambada']"


@pytest.mark.parametrize("name", ["stmt", "expr", "Num", "Str"])
def test_denies_deny_constructs_names_that_never_match(name: str) -> None:
    """It denies a deny_constructs name no parsed node can have."""
    with pytest.raises(ConfigError):
        parse_policy({"code": {"deny_constructs": [name]}}, "nodes.toml")


@pytest.mark.parametrize(("kind", "source", "line"), [("For", "x = 1\nfor i in y:\n    pass", 2), ("Lambda", "f = lambda: 1", 1),
                                                      ("While", "while x:\n    break", 1)])
def test_denies_the_constructs_a_policy_lists(kind: str, source: str, line: int) -> None:
    """It denies any AST node a custom policy lists in deny_constructs."""
    policy = parse_policy({"code": {"deny_constructs": [kind]}}, "custom.toml")
    assert [(f.message, f.line) for f in check(source, policy).errors] == [(f"{kind} is not allowed by this policy", line)]
    assert check("x = 1", policy).ok


def test_allows_an_empty_table_set() -> None:
    """It allows an empty policy: no imports, nothing else special, default limits."""
    policy = parse_policy({}, "/some/where/empty.toml")
    assert (policy.name, policy.allowed_imports, policy.denied_attributes) == ("empty", (), ())
    assert not check("import re", policy).ok


def test_denies_changing_a_loaded_policy(default: Policy) -> None:
    """It denies assignment to a policy's fields (policies are frozen)."""
    with pytest.raises(ValueError):
        default.allowed_imports = ("os",)  # type: ignore[misc]


# ---------------------------------------------------------------- $RLM_HOME


def test_allows_rlm_home_to_override_a_shipped_policy(home: Path) -> None:
    """It allows $RLM_HOME/sandbox_policies/default.toml to take precedence over the shipped default."""
    _write(home / "sandbox_policies" / "default.toml", 'name = "default"\ndescription = "mine"\n[imports]\nallow = ["json"]\n')
    policy = load_policy("default")
    assert (policy.description, policy.allowed_imports) == ("mine", ("json",))
    assert load_policy("strict").description.startswith("Minimal toolbox")


def test_allows_new_policies_in_rlm_home(home: Path) -> None:
    """It allows a new policy in $RLM_HOME/sandbox_policies to be loaded by name."""
    _write(home / "sandbox_policies" / "batch.toml", '[imports]\nallow = ["re", "json"]\n')
    assert load_policy("batch").allowed_imports == ("re", "json")


def test_denies_an_invalid_override_in_rlm_home(home: Path) -> None:
    """It denies a broken override rather than falling back to the shipped file."""
    _write(home / "sandbox_policies" / "strict.toml", "[code]\nmax_nesting = 'x'\n")
    with pytest.raises(ConfigError, match="strict.toml: max_nesting"):
        load_policy("strict")


def test_denies_the_working_directory_a_say_in_policy_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It denies a file named `strict` in the working directory from replacing the strict policy."""
    _write(tmp_path / "strict", 'name = "strict"\n[imports]\nallow = ["os"]\n')
    monkeypatch.chdir(tmp_path)
    assert "os" not in load_policy("strict").allowed_imports
