"""The size rules of the tree, kept by a test (one house whose rooms say what they hold):
no module of acceptance/, model/, specdec/ or dashboard/ over 700 lines, no function over
100 lines, no function taking more than 8 parameters (a function that wants more wants to
take one object, or to be several), and specdec/pipeline.py — wiring only — at most 200 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("acceptance", "model", "specdec", "dashboard")
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 100
MAX_PIPELINE_LINES = 200
MAX_PARAMETERS = 8


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _lines(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n")


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit]


def many_parameters(path: Path, limit: int = MAX_PARAMETERS) -> list[str]:
    """Functions taking more than ``limit`` parameters: positional, keyword-only, *args and
    **kwargs, not counting a method's self or cls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        count = len(names) - (names[:1] in (["self"], ["cls"])) + (a.vararg is not None) + (a.kwarg is not None)
        if count > limit:
            out.append(f"{path.name}:{node.lineno} {node.name} ({count} parameters)")
    return out


def test_the_rules_below_read_the_modules_that_matter():
    """The size rules are parametrised over _modules(): they would pass vacuously over none."""
    named = {str(p.relative_to(ROOT)) for p in _modules()}
    assert {"acceptance/windows.py", "model/recommend.py", "specdec/cli.py", "dashboard/app.py"} <= named


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_700_lines(path):
    assert _lines(path) <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)}: {_lines(path)} lines"


def test_no_function_over_100_lines():
    assert [f for path in _modules() for f in long_functions(path)] == []


def test_no_function_takes_more_than_8_parameters():
    assert [f for path in _modules() for f in many_parameters(path)] == []


def test_the_pipeline_is_wiring_only():
    assert _lines(ROOT / "specdec" / "pipeline.py") <= MAX_PIPELINE_LINES


def test_the_checks_catch_what_they_forbid(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n", encoding="utf-8")
    assert long_functions(source) == [f"long.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_the_parameter_check_counts_every_kind_of_parameter(tmp_path):
    source = tmp_path / "wide.py"
    source.write_text("def wide(a, b, c, d, e, *rest, f, g, **more):\n    pass\n\n\n"
                      "class C:\n    def method(self, a, b, c, d, e, f, g, h):\n        pass\n\n\n"
                      "def narrow(a, b, c, d, e, f, g, h):\n    pass\n", encoding="utf-8")
    assert many_parameters(source) == ["wide.py:1 wide (9 parameters)"]
