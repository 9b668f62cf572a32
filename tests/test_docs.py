"""The docs and the code, matched both ways.

README.md says what specdec is and how to start; docs/ARCHITECTURE.md (the data flow and
where every module is), docs/MODEL.md (the maths), docs/REFERENCE.md (commands, config,
JSON) and docs/BENCHMARKS.md (generated from benchmarks/results/) hold the rest. Each check
is a function of a doc's text that returns what is wrong (an empty list when nothing is), so
that the tests at the bottom can show every check catching a doc that lost something: a
config key, a command-line option, a JSON key, a section a pointer cites, a path, a link.

- config: every ``[deployment]`` key (model.deployment.DEPLOYMENT_KEYS), every key of
  specdec.config.SECTION_KEYS and ROUTE_KEYS is in REFERENCE.md's Config section; every key
  its table names is one the loader knows; every ```toml block outside "Planned" loads with
  specdec.config.load_config and its deployments validate; README's short key table names
  only keys the loader knows;
- commands: every option (and choice) of every subcommand, as main() and tune_gamma_main()
  build their parsers, is in that command's entry under REFERENCE.md's "Commands"; every
  ``--option`` a hand-written doc names is one of specdec's, of a script the docs give as an
  interface (benchmarks/real_vllm.py, benchmarks/gpu_checks.py, scripts/benchmarks_doc.py), or
  another program's listed
  below;
- JSON: every top-level, ``observed``, candidate and segment key of the tune-gamma JSON is in
  REFERENCE.md's "The tune-gamma JSON", and every key its tables name is in the JSON;
- pointers: no file names the retired design doc; a file outside docs/ names a doc by its
  path (docs/MODEL.md); every section a pointer cites ("docs/MODEL.md, Cost model") is a
  heading of that doc; every relative link of README and docs/ reaches a file (and a heading);
- paths: every repository path a hand-written doc names exists, and ARCHITECTURE.md's table
  names every tracked module;
- sizes: README ≤ 200 lines, ARCHITECTURE.md ≤ 250; README gives the commands .ci/run runs;
- benchmarks: docs/BENCHMARKS.md is what scripts/benchmarks_doc.py makes of the results files.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from specdec.cli import main, tune_gamma_main
from support import route_config, run_cli

ROOT = Path(__file__).resolve().parents[1]
DOC_NAMES = ("ARCHITECTURE", "MODEL", "REFERENCE", "BENCHMARKS")
REFERENCE_REL = "docs/REFERENCE.md"
ARCHITECTURE_REL = "docs/ARCHITECTURE.md"
# the hand-written docs (BENCHMARKS.md is generated; first-contact.md's table too)
WRITTEN = ("README.md", "docs/ARCHITECTURE.md", "docs/MODEL.md", "docs/REFERENCE.md")
LINKED = WRITTEN + ("docs/BENCHMARKS.md", "docs/first-contact.md")
RETIRED = "DESIGN" + ".md"  # the design doc these replaced (git history keeps it); spelled so as not to name it
PLANNED = "Planned"
README_MAX_LINES = 200
ARCHITECTURE_MAX_LINES = 250

# Options of other programs the docs name (vLLM's server, `vllm bench serve`, pip, promtool).
FOREIGN_OPTIONS = frozenset({
    "--speculative-config", "--additional-config", "--per-request-spec-decode-metrics",
    "--enable-per-request-metrics", "--enable-mfu-metrics", "--kv-cache-memory-bytes", "--no-deps",
    "--disable-log-stats", "--no-build-isolation", "--start", "--end", "--url",
    "--enable-logging-iteration-details",
})
# Scripts the docs give as interfaces: their options count as known.
SCRIPTS = ("benchmarks/real_vllm.py", "benchmarks/gpu_checks.py", "scripts/benchmarks_doc.py",
           "benchmarks/prometheus_vs_store.py")

# Top directories whose paths a doc may name (each must exist).
REPO_DIRS = ("acceptance", "model", "kernels", "specdec", "dashboard", "notebooks", "benchmarks", "tests", "docs",
             "scripts")
# Packages whose every tracked module ARCHITECTURE.md's table must name (itself or a folder above it).
MODULE_DIRS = ("acceptance", "model", "specdec", "kernels", "dashboard", "notebooks")

INLINE_ARGV = ["--survival", "0.9,0.8,0.7", "--drafts", "20000", "--json"]
# keys of `observed` that only a window (not an inline curve) has: checked on a real window
WINDOW_ONLY_OBSERVED = {"events", "batch_time_shares", "observed_tokens_per_second", "targets"}


# ------------------------------------------------------------------------------ the docs
def read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


def headings(text: str) -> list[str]:
    return [m.group(2).strip() for m in re.finditer(r"^(#{1,6}) (.+)$", text, re.M)]


def section(text: str, title: str) -> str:
    """The body under the heading ``title`` (any level), up to the next heading of the same
    or a higher level; '' when there is no such heading."""
    m = re.search(rf"^(#{{1,6}}) {re.escape(title)}\s*$", text, re.M)
    if m is None:
        return ""
    level = len(m.group(1))
    nxt = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, m.end())
    return text[m.end(): nxt.start() if nxt else len(text)]


def main_text(text: str) -> str:
    """A doc without its "Planned" section (what is built)."""
    m = re.search(rf"^## {PLANNED}\s*$", text, re.M)
    if m is None:
        return text
    return text[:m.start()] + text[m.end() + len(section(text, PLANNED)):]


def backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


def table_first_cells(text: str) -> list[list[str]]:
    """Per row of the Markdown tables in ``text`` (header and rule rows skipped): the
    backticked names of its first cell."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or re.match(r"^\|[-| ]+\|$", line):
            continue
        names = re.findall(r"`([^`]+)`", line.split("|")[1])
        if names:
            rows.append(names)
    return rows


# ------------------------------------------------------------------------------ config
def config_section(text: str) -> str:
    return section(text, "Config")


def missing_config_keys(text: str) -> list[str]:
    """Keys of the loader and of [deployment] that REFERENCE.md's Config section does not name."""
    from model.deployment import DEPLOYMENT_KEYS
    from specdec.config import ROUTE_KEYS, SECTION_KEYS, SECTIONS

    cfg = config_section(text)
    names = backticked(cfg)
    out = [f"[{s}]" for s in SECTIONS if f"[{s}]" not in cfg and f"[{s}." not in cfg]
    out += [f"[{s}] {k}" for s, keys in SECTION_KEYS.items() for k in keys if f"[{s}] {k}" not in names]
    out += [f"[routes.NAME] {k}" for k in ROUTE_KEYS if f"[routes.NAME] {k}" not in names]
    out += [f"[deployment] {k}" for k in DEPLOYMENT_KEYS if k not in names]
    return out


def unknown_reference_keys(text: str) -> list[str]:
    """Keys the Config section's reference table names that the loader does not know."""
    from model.deployment import DEPLOYMENT_KEYS
    from specdec.config import ROUTE_KEYS, SECTION_KEYS

    out = []
    for names in table_first_cells(config_section(text)):
        m = re.match(r"^\[(\w+)(?:\.NAME)?\] (\w+)$", names[0])
        if m:
            section_name, key = m.groups()
            known = ROUTE_KEYS if section_name == "routes" else SECTION_KEYS.get(section_name, ())
            if key not in known:
                out.append(names[0])
        elif names[0] not in DEPLOYMENT_KEYS:
            out.append(names[0])
    return out


def readme_reference_keys(text: str) -> set[tuple[str, str]]:
    """(section, key) of each row of README's "Config reference" table: a row's first cell names
    `[section] key` and then bare keys of the same section (`[source] kind` / `url`); a bare
    key with no section before it is a [deployment] key (a route may set it too)."""
    keys = set()
    for names in table_first_cells(section(text, "Config reference")):
        section_name = "deployment"
        for name in names:
            m = re.match(r"^\[(\w+)(?:\.NAME)?\] (\w+)$", name)
            if m:
                section_name = m.group(1)
            keys.add((section_name, m.group(2) if m else name))
    return keys


def readme_unknown_keys(text: str) -> list[tuple[str, str]]:
    """Keys README's short table names that the loader does not know (it names a few, not all:
    REFERENCE.md has every key)."""
    from model.deployment import DEPLOYMENT_KEYS
    from specdec.config import ROUTE_KEYS, SECTION_KEYS

    known = ({("routes", k) for k in ROUTE_KEYS} | {(s, k) for s, ks in SECTION_KEYS.items() for k in ks}
             | {("deployment", k) for k in DEPLOYMENT_KEYS})
    return sorted(readme_reference_keys(text) - known)


def toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", main_text(text), re.S)


def toml_errors(text: str, folder: Path) -> list[str]:
    """What the loader says of each ```toml block outside Planned (and of the deployments
    its routes merge), one line per block that fails."""
    from model.deployment import Deployment
    from specdec.config import load_config

    out = []
    for i, block in enumerate(toml_blocks(text)):
        path = folder / f"block{i}.toml"
        path.write_text(block, encoding="utf-8")
        try:
            config = load_config(path)
            Deployment.from_mapping(config.deployment, where=f"block {i} [deployment]")
            for name, route in config.routes.items():
                Deployment.from_mapping(route.deployment, where=f"block {i} [routes.{name}]")
        except ValueError as e:
            out.append(f"toml block {i}: {e}")
    return out


# ------------------------------------------------------------------------------ commands
class _Built(Exception):
    """Raised in place of parsing: the parser an entry point built."""


def built_parser(entry) -> argparse.ArgumentParser:
    """The parser ``entry`` (specdec.cli.main or tune_gamma_main) builds, caught at its
    parse_args call."""
    seen: list[argparse.ArgumentParser] = []

    def capture(self, args=None, namespace=None):
        seen.append(self)
        raise _Built

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", capture)
        with pytest.raises(_Built):
            entry([])
    return seen[0]


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """{"specdec", "specdec inspect", ..., "specdec model table", ..., "tune-gamma": parser}."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(path: str, parser: argparse.ArgumentParser) -> None:
        out[path] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{path} {name}", sub)

    walk("specdec", built_parser(main))
    walk("tune-gamma", built_parser(tune_gamma_main))
    return out


def has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def options(parser: argparse.ArgumentParser) -> list[tuple[str, tuple]]:
    """(--option, its choices) of a parser, argparse's own --help left out."""
    out = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        for opt in action.option_strings:
            if opt.startswith("--"):
                out.append((opt, tuple(action.choices or ())))
    return out


def script_options(rel: str) -> set[str]:
    """The --options a script's argparse calls declare, read from its source (not imported)."""
    tree = ast.parse(read(rel))
    return {arg.value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
            for arg in node.args if isinstance(arg, ast.Constant) and str(arg.value).startswith("--")}


def command_entries(text: str, paths) -> dict[str, str]:
    """The "Commands" bullets of each command path, joined: a bullet belongs to the longest
    path its first backticked span starts with."""
    body = section(text, "Commands")
    bullets = re.split(r"\n(?=- )", "\n" + body)
    out: dict[str, str] = {}
    for bullet in bullets:
        m = re.match(r"- `([^`]*)`", bullet)
        if not m:
            continue
        span = " ".join(m.group(1).split())
        owners = [p for p in paths if span == p or span.startswith(p + " ")]
        if owners:
            owner = max(owners, key=len)
            out[owner] = out.get(owner, "") + bullet
    return out


def missing_options(text: str) -> list[str]:
    """Commands without an entry, and options or choices missing from their command's entry."""
    parsers = command_parsers()
    entries = command_entries(text, list(parsers))
    out = []
    for path, parser in parsers.items():
        if path == "specdec":  # the top-level parser's own options: anywhere in the doc
            out += [f"specdec {opt}" for opt, _ in options(parser) if f"specdec {opt}" not in main_text(text)]
            continue
        if has_subcommands(parser):
            continue
        entry = entries.get(path)
        if entry is None:
            out.append(f"{path}: no entry under Commands")
            continue
        for opt, choices in options(parser):
            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", entry):
                out.append(f"{path} {opt}")
            out += [f"{path} {opt} {c}" for c in choices if not re.search(rf"(?<![\w-]){re.escape(str(c))}(?![\w-])", entry)]
    return out


def known_options() -> set[str]:
    return ({opt for parser in command_parsers().values() for opt, _ in options(parser)}
            | {opt for rel in SCRIPTS for opt in script_options(rel)})


def unknown_options(text: str) -> list[str]:
    """``--options`` a doc names outside Planned that no parser of specdec or of its documented
    scripts has, and that no other program listed in FOREIGN_OPTIONS has."""
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", main_text(text)))
    return sorted(named - known_options() - FOREIGN_OPTIONS)


# ------------------------------------------------------------------------------ JSON
def json_section(text: str) -> str:
    return section(text, "The tune-gamma JSON")


def json_tables(text: str) -> tuple[list[str], list[str]]:
    """The keys the JSON section's two tables name: (top-level, observed)."""
    body = json_section(text)
    head, _, observed = body.partition("`observed`:")
    flat = lambda rows: [n for names in rows for n in names if re.fullmatch(r"\w+", n)]  # noqa: E731
    return flat(table_first_cells(head)), flat(table_first_cells(observed))


def missing_json_keys(text: str, doc: dict) -> list[str]:
    """Keys of a tune-gamma document that the JSON section does not name."""
    names = backticked(json_section(text)) | set(re.findall(r'"(\w+)"', json_section(text)))
    out = [k for k in doc if k not in names]
    out += [f"observed.{k}" for k in doc["observed"] if k not in names]
    for c in doc["candidates"][:1]:
        out += [f"candidates[].{k}" for k in c if k not in names]
    for s in doc["observed"].get("segments") or []:
        out += [f"observed.segments[].{k}" for k in s if k not in names]
    return sorted(set(out))


def unknown_json_keys(text: str, top: set[str], observed: set[str]) -> list[str]:
    """Keys the JSON section's tables name that tune-gamma's documents do not have."""
    doc_top, doc_observed = json_tables(text)
    return [k for k in doc_top if k not in top] + [f"observed.{k}" for k in doc_observed if k not in observed]


# ------------------------------------------------------------------------------ pointers
def pointer_lines(needle: str) -> list[tuple[str, str]]:
    """(file, line) of every line of the repository's tracked or untracked (not ignored)
    files that contains ``needle``."""
    try:
        done = subprocess.run(["git", "grep", "-n", "-I", "--untracked", "-F", needle], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"git grep unavailable: {e}")
    if done.returncode not in (0, 1):
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    out = []
    for line in done.stdout.splitlines():
        path, _, rest = line.partition(":")
        out.append((path, rest.partition(":")[2]))
    return out


def retired_pointers(lines: list[tuple[str, str]]) -> list[str]:
    """Lines that still name the retired design doc."""
    return [f"{path}: {line.strip()}" for path, line in lines if RETIRED in line]


CITE = re.compile(rf"(docs/)?\b({'|'.join(DOC_NAMES)})\.md(?:, | \()([A-Z][^,;:.)(`\x22']*)")


def cite(name: str, words: str, folder: str = "docs/") -> str:
    """A pointer as code cites a section ("docs/MODEL.md, Cost model"), built here so that
    this file's own lines cite nothing."""
    return f"{folder}{name}.md, {words}"


def dangling_pointers(lines: list[tuple[str, str]]) -> list[str]:
    """Lines of files outside docs/ that cite a doc's section without the doc's folder (the
    bare name where docs/MODEL.md is meant). Inside docs/ a bare name is a sibling."""
    return [f"{path}: {line.strip()}" for path, line in lines if not path.startswith("docs/")
            and any(m.group(1) is None for m in CITE.finditer(line))]


def uncited_sections(docs: dict[str, str], lines: list[tuple[str, str]]) -> list[str]:
    """Pointers "docs/NAME.md, Section" or "docs/NAME.md (Section" whose section is not a
    heading of that doc (a heading that begins with the cited words, up to a word's end, counts)."""
    heads = {name: headings(text) for name, text in docs.items()}
    out = []
    for path, line in lines:
        for m in CITE.finditer(line):
            name, words = m.group(2), m.group(3).strip()
            if not any(h == words or (h.startswith(words) and not h[len(words)].isalnum()) for h in heads.get(name, [])):
                out.append(f"{path}: cites {name}.md {words!r}")
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces → -."""
    return re.sub(r" ", "-", re.sub(r"[^\w\- ]", "", heading.strip().lower()))


def broken_links(rel: str, text: str) -> list[str]:
    """Relative Markdown links of ``text`` (a file at ``rel``) whose file, or heading, is missing."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (ROOT / rel).parent / file if file else ROOT / rel
        if not dest.exists():
            out.append(f"{rel}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in {slug(h) for h in headings(dest.read_text(encoding="utf-8"))}:
            out.append(f"{rel}: {target} (no such heading)")
    return out


# ------------------------------------------------------------------------------ paths
def missing_paths(text: str) -> list[str]:
    pattern = re.compile(rf"^(?:{'|'.join(REPO_DIRS)})/[\w./-]*$")
    return sorted(p for p in backticked(text) if pattern.match(p) and not (ROOT / p).exists())


def unlisted_modules(text: str, modules: list[str]) -> list[str]:
    """Modules (``__init__.py`` aside) that ARCHITECTURE.md's "Where things are" names neither
    by their path nor by a folder above them."""
    named = backticked(section(text, "Where things are"))
    return [m for m in modules if not m.endswith("__init__.py") and m not in named
            and not any(n.endswith("/") and m.startswith(n) for n in named)]


def tracked_modules() -> list[str]:
    done = subprocess.run(["git", "ls-files", *MODULE_DIRS], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    return [p for p in done.stdout.split() if p.endswith(".py") and (ROOT / p).exists()]


# ------------------------------------------------------------------------------ benchmarks
def benchmarks_doc():
    spec = importlib.util.spec_from_file_location("benchmarks_doc", ROOT / "scripts" / "benchmarks_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------ the tests
@pytest.fixture(scope="module")
def text() -> str:
    """docs/REFERENCE.md: the commands, config and JSON."""
    return read(REFERENCE_REL)


@pytest.fixture(scope="module")
def docs() -> dict[str, str]:
    return {name: read(f"docs/{name}.md") for name in DOC_NAMES}


@pytest.fixture(scope="module")
def inline_doc() -> dict:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = tune_gamma_main(list(INLINE_ARGV))
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_config_keys_are_in_the_reference(text):
    assert missing_config_keys(text) == []


def test_the_config_reference_names_only_known_keys(text):
    assert unknown_reference_keys(text) == []


def test_the_readme_config_table_names_only_known_keys():
    readme = read("README.md")
    assert len(readme_reference_keys(readme)) >= 10, "README's short config table is gone"
    assert readme_unknown_keys(readme) == []
    # the check catches a table that names a key nobody reads
    assert readme_unknown_keys(readme.replace("| `draft_model` |", "| `drafter` |")) == [("deployment", "drafter")]


@pytest.mark.parametrize("rel", (REFERENCE_REL, "README.md"))
def test_the_docs_toml_examples_load(rel, tmp_path):
    doc = read(rel)
    assert toml_blocks(doc), "no ```toml example"
    assert toml_errors(doc, tmp_path) == []


def test_every_option_of_every_command_is_in_its_entry(text):
    assert missing_options(text) == []


@pytest.mark.parametrize("rel", WRITTEN)
def test_every_option_a_doc_names_exists(rel):
    assert unknown_options(read(rel)) == []


def test_no_foreign_option_is_specdecs():
    known = {opt for parser in command_parsers().values() for opt, _ in options(parser)}
    assert not FOREIGN_OPTIONS & known, "an option listed as another program's is specdec's own"


def test_tune_gamma_json_keys_are_in_the_reference(text, capsys):
    code, out, err = run_cli(capsys, tune_gamma_main, list(INLINE_ARGV))
    assert code == 0, err
    doc = json.loads(out)
    assert missing_json_keys(text, doc) == []
    assert unknown_json_keys(text, set(doc), set(doc["observed"]) | WINDOW_ONLY_OBSERVED) == []


def test_a_window_documents_keys_are_in_the_reference(text, tmp_path, capsys, inline_doc):
    """tune-gamma --json on a 3 s live window of a simulated fleet: the keys only a window has."""
    from acceptance.sim import Fleet, build_scenario

    with Fleet(build_scenario("independent", seed=7)) as fleet:
        urls = list(fleet.serve().values())
        fleet.start_realtime(speed=120.0)
        cfg = route_config(tmp_path, urls, flat=True)
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "independent", "--config", str(cfg),
                                                            "--window", "3s", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["observed"]) - set(inline_doc["observed"]) == WINDOW_ONLY_OBSERVED
    assert doc["observed"]["segments"], "the window has a segment whose keys the doc must name"
    assert missing_json_keys(text, doc) == []
    assert unknown_json_keys(text, set(doc), set(doc["observed"])) == []


def test_nothing_names_the_retired_design_doc():
    assert not (ROOT / "docs" / RETIRED).exists()
    assert retired_pointers(pointer_lines(RETIRED)) == []


def test_no_pointer_dangles():
    assert dangling_pointers(pointer_lines(".md")) == []


def test_every_cited_section_exists(docs):
    assert uncited_sections(docs, pointer_lines(".md")) == []


@pytest.mark.parametrize("rel", LINKED)
def test_every_link_reaches_its_file_and_heading(rel):
    assert broken_links(rel, read(rel)) == []


@pytest.mark.parametrize("rel", WRITTEN)
def test_the_paths_a_doc_names_exist(rel):
    assert missing_paths(read(rel)) == []


def test_the_module_table_names_every_tracked_module():
    assert unlisted_modules(read(ARCHITECTURE_REL), tracked_modules()) == []


def test_the_readme_and_architecture_stay_short():
    assert read("README.md").count("\n") <= README_MAX_LINES
    assert read(ARCHITECTURE_REL).count("\n") <= ARCHITECTURE_MAX_LINES


def test_the_readme_gives_the_commands_ci_runs():
    readme = read("README.md")
    assert "make demo" in readme and "make test " in readme
    for target in re.findall(r"^make ([\w-]+)\s*$", read(".ci/run"), re.M):
        assert f"make {target}" in readme, f".ci/run runs make {target}, which README does not give"


def test_planned_is_the_last_section_and_the_probe_is_built(text, docs):
    """What is decided but not built is in ARCHITECTURE.md's last section only: the probe
    decision and a running probe's data are built (REFERENCE.md and MODEL.md say so)."""
    arch = docs["ARCHITECTURE"]
    assert re.findall(r"^## (.+)$", arch, re.M)[-1].strip() == PLANNED
    assert all(PLANNED not in headings(docs[name]) for name in ("MODEL", "REFERENCE"))
    assert "| `decision` | change, keep, off, probe, or undecided" in text
    assert "| `probe_segment` |" in text and "stop it early" in docs["MODEL"]
    assert "probe" not in section(arch, PLANNED)


def test_the_benchmarks_doc_is_what_the_results_give():
    assert benchmarks_doc().check() == [], "run python scripts/benchmarks_doc.py"


# -------------------------------------------------------------- each check catches a loss
def drop_lines(text: str, needle: str) -> str:
    return "\n".join(line for line in text.splitlines() if needle not in line)


def test_each_check_catches_a_doc_that_lost_something(text, docs, tmp_path, inline_doc):
    assert "[deployment] draft_overhead" in missing_config_keys(drop_lines(text, "`draft_overhead`"))
    assert "[collect] max_engines" in missing_config_keys(drop_lines(text, "`[collect] max_engines`"))
    assert "[routes.NAME] selector" in missing_config_keys(drop_lines(text, "`[routes.NAME] selector`"))
    bad_row = text.replace("| `min_gain` |", "| `min_gain` | 0.03 | x |\n| `min_gian` |", 1)
    assert unknown_reference_keys(bad_row) == ["min_gian"]
    assert toml_errors(text.replace('retention = "30d"', 'retension = "30d"', 1), tmp_path)
    assert toml_errors(text.replace('draft_cost = 0.0\n', 'draft_cots = 0.0\n', 1), tmp_path)  # a route's key
    assert "specdec collect --serve-window" in missing_options(text.replace("--serve-window", "--serve-span"))
    assert "tune-gamma --deployed-gamma" in missing_options(text.replace("--deployed-gamma", "--deployed"))
    assert "specdec replay --backend numpy" in missing_options(text.replace("auto|cute|torch|numpy", "auto|cute|torch"))
    assert "specdec calibrate ingest: no entry under Commands" in missing_options(
        text.replace("- `specdec calibrate ingest", "- `specdec calibrate-ingest"))
    assert unknown_options(text.replace("[--seed N] [--speed X]", "[--seed N] [--speed X] [--sped X]", 1)) == ["--sped"]
    assert unknown_options("`real_vllm.py traffic --prompt-repeat 2 --prompt-repat 2`") == ["--prompt-repat"]
    assert "drafts_factor_to_settle" in missing_json_keys(drop_lines(text, "`drafts_factor_to_settle`"), inline_doc)
    assert "observed.undrafted_token_share" in missing_json_keys(drop_lines(text, "undrafted_token_share"),
                                                                 inline_doc)
    assert "candidates[].expected_tokens" in missing_json_keys(text.replace('"expected_tokens"', '"x"'), inline_doc)
    extra_row = text.replace("| `gain` |", "| `gains` | x |\n| `gain` |", 1)
    assert unknown_json_keys(extra_row, set(inline_doc), set(inline_doc["observed"]) | WINDOW_ONLY_OBSERVED) == ["gains"]
    # pointers: the retired doc, a doc named without its folder, a section no doc has
    old = f"see docs/{RETIRED}, Cost model"
    assert retired_pointers([("model/x.py", old)]) == [f"model/x.py: {old}"]
    bare = "see " + cite("MODEL", "Cost model", folder="")
    assert dangling_pointers([("model/x.py", bare)]) == [f"model/x.py: {bare}"]
    assert dangling_pointers([("model/x.py", "see " + cite("MODEL", "Cost model"))]) == []
    assert dangling_pointers([("docs/REFERENCE.md", bare)]) == []
    cites = [("model/x.py", f"({cite('MODEL', 'Cost model')})"), ("acceptance/x.py", cite("REFERENCE", "The store."))]
    assert uncited_sections(docs, cites) == []
    assert uncited_sections(dict(docs, MODEL=docs["MODEL"].replace("\n## Cost model\n", "\n## Costs\n")), cites) == [
        "model/x.py: cites MODEL.md 'Cost model'"]
    assert uncited_sections(docs, [("model/x.py", cite("REFERENCE", "Cost model"))])  # the section is in another doc
    # links and paths
    readme = read("README.md")
    assert broken_links("README.md", readme.replace("(docs/MODEL.md)", "(docs/MODELS.md)", 1)) == [
        "README.md: docs/MODELS.md (no such file)"]
    assert broken_links("README.md", readme.replace("REFERENCE.md#config)", "REFERENCE.md#configuration)", 1)) == [
        "README.md: docs/REFERENCE.md#configuration (no such heading)"]
    assert missing_paths(docs["ARCHITECTURE"] + "\n`model/no_such_module.py`\n") == ["model/no_such_module.py"]
    assert unlisted_modules(docs["ARCHITECTURE"], ["model/no_such_module.py", "model/anchor.py",
                                                   "model/decision/rules.py"]) == ["model/no_such_module.py"]
    assert unlisted_modules(drop_lines(docs["ARCHITECTURE"], "`model/anchor.py`"), ["model/anchor.py"]) == ["model/anchor.py"]


def test_the_benchmarks_check_catches_a_stale_doc_and_records_what_is_not_recorded():
    module = benchmarks_doc()
    doc = module.DOC.read_text(encoding="utf-8")
    assert module.check(drop_lines(doc, "| 2 | 18 |"))  # a run's row lost
    chaos = json.loads((ROOT / "benchmarks" / "results" / "chaos.json").read_text())
    stored = f"{chaos['healthy_samples_stored']} of {chaos['healthy_samples_expected']}"
    assert stored in doc
    assert module.check(doc.replace(stored, f"{chaos['healthy_samples_stored'] - 1} of "
                                            f"{chaos['healthy_samples_expected']}"))  # a figure edited by hand
    lines = module.provenance({}, "benchmarks/x.py")
    assert lines[:3] == ["- command: not recorded (the file is written by `benchmarks/x.py`)",
                         "- machine: not recorded", "- date: not recorded"]
    lines = module.provenance({"command": "python benchmarks/x.py --n 3", "machine": "2 cores",
                               "date": "2026-12-05"}, "benchmarks/x.py")
    assert lines[:3] == ["- command: `python benchmarks/x.py --n 3`", "- machine: 2 cores", "- date: 2026-12-05"]
