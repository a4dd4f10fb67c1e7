"""``records()`` over source code (``context/code.py``): one record a definition, over a kiln
controller in Python and Go, and prose that shows a few definitions staying prose."""

from __future__ import annotations

import time

from rlm_runtime.context.records import parse_text, sniff

KILN = '''"""A kiln controller."""
import time


class Kiln:
    """One kiln and its firings."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fire(self, cone: int, hold_s: float = 0.0) -> bool:
        """Fire to a cone, holding at the top."""
        self.ramp(cone)
        time.sleep(hold_s)
        return check_cone(cone)

    def ramp(self, cone):
        return heat(cone * 10)


def check_cone(cone: int) -> bool:
    # A cone bends at its temperature.
    return cone > 4
'''

GO = '''package kiln

import "fmt"

// Glaze is a coat fired onto a pot.
type Glaze struct {
	Name string
	Cone int
}

// Fire runs one firing.
func (k *Kiln) Fire(cone int) error {
	if err := k.Ramp(cone); err != nil {
		return fmt.Errorf("ramp: %w", err)
	}
	return nil
}

func Mix(parts []string) Glaze {
	return Glaze{Name: join(parts)}
}
'''


def test_each_definition_is_a_record_with_its_parts() -> None:
    """A Python file reads as one record a definition: name, kind, enclosing class, params,
    return annotation, doc line, the names it calls, its text and its first line."""
    recs = parse_text(KILN)
    assert recs.shape == "code"
    assert sniff(KILN.split("\n")).describe().startswith("source code, one record a definition; fields: 'name', 'kind'")
    assert [r["name"] for r in recs] == ["Kiln", "__init__", "fire", "ramp", "check_cone"]
    fire = recs.find("fire")[0]
    assert (fire["kind"], fire["in"], fire.line) == ("def", "Kiln", 11)
    assert fire["params"] == "self, cone: int, hold_s: float = 0.0" and fire["returns"] == "bool"
    assert fire["doc"] == "Fire to a cone, holding at the top."
    assert fire["calls"] == ["ramp", "sleep", "check_cone"]
    assert fire["text"].splitlines()[-1].strip() == "return check_cone(cone)"
    top = recs.find("check_cone")[0]
    assert top.get("in") is None and top["doc"] == "A cone bends at its temperature."
    # code filters them as any records: which definitions call check_cone, which are methods
    assert [r["name"] for r in recs if "check_cone" in r["calls"]] == ["fire"]
    assert len(recs.where("in", "Kiln")) == 3


def test_go_types_and_methods_with_receivers() -> None:
    """Go's ``type``, a method with a receiver and a function each read as a definition,
    their comments above them staying in the text before."""
    recs = parse_text(GO)
    assert recs.shape == "code"
    assert [(r["name"], r["kind"]) for r in recs] == [("Glaze", "type"), ("Fire", "func"), ("Mix", "func")]
    assert recs.find("Fire")[0]["params"] == "cone int" and "Ramp" in recs.find("Fire")[0]["calls"]


def test_prose_showing_a_few_definitions_keeps_its_shape() -> None:
    """A tutorial whose paragraphs show three definitions is not code: most of its lines are
    sentences. Blocks of ``key: value`` lines stay blocks."""
    tutorial = "\n\n".join(
        f"Step {i}. To fire a kiln safely you first write a small helper, as below, and then call it.\n"
        f"def step_{i}(cone):\n    return cone\nThe helper returns the cone it was given, which the caller reads."
        for i in range(4))
    assert sniff(tutorial.split("\n")).kind != "code"
    # nor is a bulleted list with definitions in it: a bullet is no line of code
    bullets = "\n".join(f"* the helper step_{i} returns its cone\ndef step_{i}(cone):" for i in range(4))
    assert sniff(bullets.split("\n")).kind != "code"
    blocks = "\n\n".join(f"Kiln: k{i}\nCone: {i}\nGlaze: ash" for i in range(5))
    assert sniff(blocks.split("\n")).kind == "blocks"


def test_hostile_code_stays_linear() -> None:
    """Lines of megabytes, unclosed parentheses and thousands of definitions parse in time
    linear in the text; a definition's text is cut, its calls capped."""
    long_line = "def f(" + "a, " * 300_000 + "\n"
    many = "".join(f"def d{i}(x):\n    return g{i}(x) + " + " + ".join(f"h{j}(x)" for j in range(80)) + "\n" for i in range(3_000))
    began = time.perf_counter()
    recs = parse_text(long_line + many)
    assert time.perf_counter() - began < 10
    assert len(recs) == 3_001 and len(recs[1]["calls"]) == 50
    assert len(recs[0]["text"]) <= 20_000


def test_a_first_line_opening_with_one_space_is_no_crash() -> None:
    """A text whose first line opens with one space has no fixed-width columns: sniffing it
    used to raise (``rlm probe`` printed an internal error)."""
    assert sniff([" Intro line one", "second line", "third line"]).kind == "paragraphs"
