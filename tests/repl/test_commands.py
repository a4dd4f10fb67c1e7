"""Slash commands: each does its job, and bad input is a message with the nearest command."""

from __future__ import annotations

from pathlib import Path

from .conftest import ENTER, code


def test_help_lists_every_command(drive, write_script) -> None:
    """It lists every command."""
    from rlm_runtime.repl.commands import COMMANDS

    run = drive(write_script("unused"), "/help" + ENTER)
    for name in COMMANDS:
        assert name in run.out


def test_unknown_command_names_the_nearest(drive, write_script) -> None:
    """It says which command was probably meant."""
    run = drive(write_script("unused"), "/contxt list" + ENTER, "/hlep" + ENTER)
    assert "unknown command /contxt (did you mean /context?)" in run.err
    assert "did you mean /help?" in run.err


def test_context_add_and_list(drive, write_script, tmp_path: Path) -> None:
    """It adds a context to the live worker (variables kept) and lists the contexts."""
    doc = tmp_path / "notes.md"
    doc.write_text("alpha\nbeta launch code\n")
    run = drive(write_script("unused"), ">>> kept = 1" + ENTER, f"/context add {doc} notes" + ENTER, "/context list" + ENTER,
                ">>> print(grep('launch'), kept)" + ENTER, "/context add /no/such/file" + ENTER, "/context frob" + ENTER)
    assert "added notes as context" in run.out
    assert "notes" in run.out and "bytes" in run.out
    assert "2: beta launch code" in run.out and " 1" in run.out
    assert "no such file or folder: /no/such/file" in run.err
    assert "usage: /context add PATH [NAME] | /context rm NAME|N | /context refresh | /context list" in run.err


def test_model_and_sub_model_switch_later_questions(drive, write_script) -> None:
    """It switches the root model and the sub-model, and says so."""
    first = write_script(code("FINAL('from the first')"))
    second = write_script(code("FINAL('from the second')"))
    run = drive(first, f"/model scripted:{second}" + ENTER, f"/sub-model scripted:{first}" + ENTER, "/model" + ENTER, "which?" + ENTER)
    assert "from the second" in run.out
    assert f"sub-model: scripted:{first}" in run.out


def test_budget_shows_used_and_left(drive, write_script) -> None:
    """It shows the session's usage and the cost left under --budget-usd."""
    run = drive(write_script(code("FINAL('a')")), "q?" + ENTER, "/budget" + ENTER, budget_usd=2.5)
    assert "used: 1 model calls" in run.out
    assert "left: $2.5000 of the session's $2.5" in run.out


def test_limits_set_validated_and_shown(drive, write_script) -> None:
    """It changes a limit, and refuses an invalid value or an unknown name with a clear message."""
    run = drive(write_script("unused"), "/limits max_iterations=3 max_cost_usd=0.5" + ENTER, "/limits" + ENTER,
                "/limits max_iterations=0" + ENTER, "/limits max_iteration=4" + ENTER, "/limits max_depth" + ENTER)
    assert "max_iterations=3" in run.out and "max_iterations = 3" in run.out and "max_cost_usd = 0.5" in run.out
    assert "invalid limit: max_iterations: Input should be greater than or equal to 1" in run.err
    assert "unknown limit 'max_iteration' (did you mean max_iterations?)" in run.err
    assert "expected KEY=VALUE" in run.err


def test_vars_lists_the_namespace(drive, write_script) -> None:
    """It lists the variables with their types."""
    run = drive(write_script("unused"), ">>> answer_so_far = 'abc'" + ENTER, "/vars" + ENTER)
    assert "answer_so_far" in run.out and "str" in run.out


def test_reset_gives_a_fresh_worker(drive, write_script) -> None:
    """It drops the variables and keeps the session going."""
    run = drive(write_script("unused"), ">>> gone = 1" + ENTER, "/reset" + ENTER, ">>> print(gone)" + ENTER)
    assert "a fresh worker" in run.out
    assert "NameError" in run.err


def test_memory_search_and_remember(drive, write_script, tmp_path: Path) -> None:
    """It remembers answers when a store is in use (on by default) and finds them with /memory search."""
    store = tmp_path / "memory.db"
    script = write_script(code("FINAL('the pelican nests on the pier')"))
    run = drive(script, "where does the pelican nest?" + ENTER, "/memory search pelican" + ENTER, "/remember off" + ENTER,
                "/remember" + ENTER, memory=str(store))
    assert "pelican" in run.out.split("the pelican nests on the pier", 1)[1]
    assert "remembering answers: off" in run.out


def test_memory_edit_changes_a_chunk_in_place_and_show_lists_its_versions(drive, write_script, tmp_path: Path) -> None:
    """It edits a remembered answer from the REPL (text and tags, as rlm memory edit), keeps
    its id, shows the earlier version, and answers bad input with a message, the REPL going on."""
    from rlm_runtime.memory import MemoryStore

    store = tmp_path / "memory.db"
    script = write_script(code("FINAL('the pelican nests on the pier')"))
    run = drive(script, "where does the pelican nest?" + ENTER, "/memory search pelican" + ENTER,
                '/memory edit m1 --text "the pelican nests on the old lighthouse" --tag birds,decision' + ENTER,
                "/memory show m1 --history" + ENTER, "/memory edit m1 --confidence lots" + ENTER,
                "/memory edit 424242 --kind fact" + ENTER, "/memory edit m1 --colour red" + ENTER,
                '/memory edit m1 --text "unclosed' + ENTER, ">>> print('still here')" + ENTER, memory=str(store))
    assert "edited m1: text, tags; the version before is kept (/memory show 1 --history)" in run.out
    shown = run.out.split("/memory show 1 --history)", 1)[1]
    assert "tags: birds, decision" in shown and "the pelican nests on the old lighthouse" in shown
    assert "version 1" in shown and "the pelican nests on the pier" in shown.split("version 1", 1)[1]
    assert "--confidence is a number from 0 to 1, or none (got lots)" in run.err
    assert "424242" in run.err
    assert run.err.count("usage: /memory edit ID") == 2
    assert "still here" in run.out
    with MemoryStore(store, readonly=True) as reopened:
        view = reopened.read(1, record=False)
        assert view.text == "the pelican nests on the old lighthouse" and {"birds", "decision"} <= set(view.tags)
        assert len(reopened.history(1)) == 2


def test_memory_commands_without_a_store_say_how(drive, write_script) -> None:
    """It tells how to get a memory store instead of failing."""
    run = drive(write_script("unused"), "/memory search x" + ENTER, "/remember on" + ENTER, "/memory" + ENTER)
    assert run.err.count("start with --memory") == 2
    assert "usage: /memory search QUERY | show ID [--history] | edit ID --text T ..." in run.err


def test_trace_writes_the_html_trajectory(drive, write_script, tmp_path: Path) -> None:
    """It writes the session's trajectory as an HTML page and prints its path."""
    run = drive(write_script(code("FINAL('traced')")), "q?" + ENTER, "/trace" + ENTER)
    page = tmp_path / "trace.html"
    assert f"wrote {page}" in run.out
    assert "traced" in page.read_text()


def test_save_and_load_replay_a_session(drive, write_script, tmp_path: Path) -> None:
    """It saves questions, cells and state-changing commands, and /load replays them (a command
    that changes something after a yes)."""
    saved = tmp_path / "session.txt"
    first = write_script(code("FINAL('one')"))
    drive(first, ">>> base = 5" + ENTER, ">>> for i in range(2):" + ENTER, "base += i" + ENTER, ENTER,
          "/limits max_iterations=4" + ENTER, "ask one" + ENTER, "/budget" + ENTER, f"/save {saved}" + ENTER)
    text = saved.read_text()
    assert ">>> base = 5\n" in text and "...     base += i" in text and "/limits max_iterations=4" in text
    assert "ask one\n#   one" in text and "/budget" not in text
    second = write_script(code("FINAL(str(base))"))
    run = drive(second, f"/load {saved}" + ENTER, "y" + ENTER, "/limits" + ENTER, "/load /no/such" + ENTER)
    assert "replaying 4 entries" in run.err
    assert "6" in run.out  # the replayed cells ran, and the replayed question saw base
    assert "max_iterations = 4" in run.out
    assert "no such file: /no/such" in run.err


def test_exit_leaves(drive, write_script) -> None:
    """It stops reading at /exit."""
    run = drive(write_script("unused"), "/exit" + ENTER, ">>> print('never')" + ENTER)
    assert run.status == 0
    assert "never" not in run.out


def test_profile_lists_switches_and_clears(drive, write_script) -> None:
    """It lists the profiles, switches to one for the next questions, and clears it with none."""
    run = drive(write_script(code("FINAL('ok')")), "/profile" + ENTER, "/profile quick" + ENTER, "/limits" + ENTER,
                "/profile nope" + ENTER, "/profile none" + ENTER)
    assert "profile: none" in run.err or "profile: none" in run.out
    assert "research-analyst" in run.out
    assert "profile: quick (for the next questions): 7 turns, depth 0" in run.err + run.out
    assert "max_iterations = 7" in run.out
    assert "profile: none (for the next questions): 20 turns, depth 1" in run.out
    assert "unknown profile 'nope'" in run.err


def test_limits_set_by_hand_stay_through_a_profile(drive, write_script) -> None:
    """A /limits set before /profile stays (and is said to stay), as a flag wins over a
    profile on the command line; the profile's other limits apply."""
    run = drive(write_script(code("FINAL('ok')")), "/limits max_iterations=12" + ENTER, "/profile quick" + ENTER,
                "/limits" + ENTER)
    said = run.err + run.out
    assert "profile: quick (for the next questions): 12 turns, depth 0" in said
    assert "kept from /limits: max_iterations=12" in said
    assert "max_iterations = 12" in run.out and "max_depth = 0" in run.out


def test_a_profile_given_at_start_applies(drive, write_script) -> None:
    """It starts the session with --profile's limits."""
    run = drive(write_script(code("FINAL('ok')")), "/limits" + ENTER, profile="quick")
    assert "max_iterations = 7" in run.out and "max_depth = 0" in run.out


def test_the_welcome_fits_80_columns(drive, write_script) -> None:  # type: ignore[no-untyped-def]
    """The welcome is two lines, each within 80 columns (the first with a model name of up to
    36 characters, as local:qwen2.5-coder-1.5b's 24): it no longer wraps twice."""
    script = write_script("unused")
    run = drive(script)
    model = f"scripted:{script}"
    first, second = run.out.splitlines()[:2]
    assert first == f"rlm repl: {model}, 0 contexts; /help; Ctrl-D leaves"
    assert len(first) - len(model) <= 80 - 36 and len(second) <= 80


def test_help_fits_80_columns(drive, write_script) -> None:  # type: ignore[no-untyped-def]
    """/help lists every command within 80 columns (a long usage on a line of its own, long
    texts wrapped), so nothing wraps on an 80-column terminal."""
    from rlm_runtime.repl.commands import COMMANDS

    run = drive(write_script("unused"), "/help" + ENTER)
    shown = run.out + run.err
    helped = shown[shown.index("A line is a question for the model"):]
    assert all(len(line) < 80 for line in helped.splitlines())
    for name in COMMANDS:
        assert f"  {name}" in helped
