"""Packaging and the Makefile's set-up, as a new user meets them.

- pyproject.toml states its license as a PEP 639 SPDX string, not the deprecated TOML table
  that makes setuptools warn on every build step, and asks for a setuptools that reads it.
- `make demo`, `make test` and `make notebook` say what each pip install does, and roughly
  how long it takes, before it runs (pip -q prints nothing for up to a minute or two).
- `make notebook` installs JupyterLab into .venv once, then opens the what-if notebook on
  127.0.0.1.
- The two large environments (vLLM 0.33's, the real engine's) refuse a disk that cannot
  hold them in one line before pip starts: a pip install that runs out of space halfway
  prints a page and leaves a broken environment.

The Makefile is read through `make -n` (print the recipes, run nothing) with VENV pointed
at a temporary folder, so the chains are those of a fresh machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.licenses import canonicalize_license_expression
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
ANNOUNCE = re.compile(r"^echo .*\babout [\d.]+ (s|min)\b")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_is_an_spdx_string():
    project = _pyproject()["project"]
    license_ = project.get("license")
    assert isinstance(license_, str), f"project.license should be an SPDX string (PEP 639), not {license_!r}"
    assert canonicalize_license_expression(license_) == license_ == "Apache-2.0"
    # setuptools refuses a license expression beside License :: classifiers.
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]


def test_build_requires_a_setuptools_that_reads_spdx_strings():
    requires = [Requirement(r) for r in _pyproject()["build-system"]["requires"]]
    setuptools = next(r for r in requires if r.name == "setuptools")
    # PEP 639's license strings arrived in setuptools 77.
    assert not setuptools.specifier.contains("76.1.0")
    assert setuptools.specifier.contains("77.0.0")


def _dry_run(target: str, venv: Path, *settings: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "--no-print-directory", f"VENV={venv}", *settings, target], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True,
                         env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")})
    return out.stdout.splitlines()


@pytest.mark.parametrize("target", ["demo", "test", "notebook"])
def test_each_install_announces_itself_with_a_rough_time(target, tmp_path):
    lines = _dry_run(target, tmp_path / "venv")
    installs = [i for i, line in enumerate(lines) if re.search(r"\bpip install\b", line)]
    assert installs, lines
    previous = -1
    for i in installs:
        # Between the previous install (or the start) and this one: one line saying what and how long.
        announced = [line for line in lines[previous + 1:i] if ANNOUNCE.search(line)]
        assert announced, f"{target}: {lines[i]!r} runs without saying what it does and how long it takes"
        previous = i


def test_make_notebook_installs_jupyter_once_then_opens_the_notebook(tmp_path):
    venv = tmp_path / "venv"
    lines = _dry_run("notebook", venv)
    jupyter = [line for line in lines if re.search(r"\bpip install\b.*\bjupyterlab\b", line)]
    assert len(jupyter) == 1
    assert "ipykernel" in jupyter[0]
    assert lines.index(jupyter[0]) > next(i for i, line in enumerate(lines) if "pip install -q -e ." in line), \
        "JupyterLab goes into the venv after the core"
    launch = lines[-1]
    assert f"{venv}/bin/jupyter lab " in launch
    assert "--ip=127.0.0.1" in launch
    notebook = re.search(r"(notebooks/\S+\.ipynb)", launch).group(1)
    assert (ROOT / notebook).is_file()
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^\.PHONY:.*\bnotebook\b", makefile, re.M)

    # Installed once: with the stamps up to date only the launch is left.
    (venv / "bin").mkdir(parents=True)
    for name in ("bin/python", ".installed-core", ".installed-notebook"):
        (venv / name).touch()
    future = (ROOT / "pyproject.toml").stat().st_mtime + 60
    for name in ("bin/python", ".installed-core", ".installed-notebook"):
        os.utime(venv / name, (future, future))
    assert _dry_run("notebook", venv) == [launch]


def _need_disk(gib: float, target: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(ROOT / "scripts/need_disk.sh"), str(gib), str(target), "the install"],
                          capture_output=True, text=True, timeout=60)


def _free_gib(path: Path) -> float:
    return shutil.disk_usage(path).free / 2**30


def test_an_install_the_disk_cannot_hold_is_refused_in_one_line(tmp_path):
    target = tmp_path / "not" / "made" / "yet"
    refused = _need_disk(_free_gib(tmp_path) + 50, target)
    assert refused.returncode == 1 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith("the install needs about ") and str(target) in line and "GiB is free there" in line
    assert not target.exists() and not (tmp_path / "not").exists()
    assert _need_disk(max(_free_gib(tmp_path) - 1, 0.001), target).returncode == 0


def test_what_the_environment_already_holds_counts_toward_a_reinstall(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "wheel").write_bytes(os.urandom(64 << 20))  # 64 MiB already installed
    free = _free_gib(tmp_path)
    assert _need_disk(free + 32 / 1024, venv).returncode == 0  # 32 MiB more than free: what it holds covers it
    assert _need_disk(free + 96 / 1024, venv).returncode == 1


def test_the_large_environments_check_the_disk_before_pip_starts(tmp_path):
    lines = _dry_run("test-vllm", tmp_path / "venv", f"VLLM_VENV={tmp_path / 'venv-vllm'}")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    vllm_install = next(i for i, line in enumerate(lines) if re.search(r"pip install .*\[vllm", line))
    assert any("need_disk.sh" in line for line in lines[:vllm_install]), lines
    assert "need_disk.sh" not in "".join(lines[vllm_install:])
    assert re.search(r"^VLLM_DISK_GIB := \d+", makefile, re.M)
    real = (ROOT / "scripts/install_real_engine.sh").read_text(encoding="utf-8")
    assert real.index("need_disk.sh") < real.index("-m venv") < real.index("pip install")


TOP_LEVEL = ("acceptance", "model", "kernels", "dashboard", "specdec")


def test_the_wheel_finds_every_package_of_the_five_import_names():
    """The wheel's packages are found, not listed by hand: a subpackage left out of a hand list
    (model.probe, model.decision once) gives an installed tune-gamma that fails at import. Every
    folder under the five top-level names that holds modules is a package setuptools' own
    finder takes with pyproject.toml's settings, and nothing else is (tests, benchmarks)."""
    from setuptools import find_packages

    find = _pyproject()["tool"]["setuptools"]["packages"]["find"]
    assert not isinstance(_pyproject()["tool"]["setuptools"]["packages"], list), "packages listed by hand"
    found = set(find_packages(str(ROOT), include=find["include"], exclude=find.get("exclude", ())))
    folders = {".".join(p.parent.relative_to(ROOT).parts) for top in TOP_LEVEL for p in (ROOT / top).rglob("*.py")
               if "__pycache__" not in p.parts}
    assert folders - found == set(), "folders of modules the wheel leaves out (add an __init__.py)"
    assert {name.split(".")[0] for name in found} == set(TOP_LEVEL)


def test_ci_builds_and_runs_the_installed_wheel():
    """.ci/run runs make test-wheel, whose script builds the wheel from a copy of the checkout,
    installs it into a new venv and runs the commands from another folder."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test-wheel" in ci
    script = (ROOT / "scripts" / "check_wheel.sh").read_text(encoding="utf-8")
    for command in ("specdec\" demo", "tune-gamma\" --route", "specdec\" inspect", "specdec\" dashboard",
                    "vllm.stat_logger_plugins"):
        assert command in script, command
