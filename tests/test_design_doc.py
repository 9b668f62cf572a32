"""docs/DESIGN.md and the code, matched both ways (issue 20, item 7).

Each check is a function of the doc's text that returns what is wrong (an empty list when
nothing is), so that the tests at the bottom can show every check catching a doc that lost
something: a config key, a command-line option, a JSON key, a section a pointer cites.

- config: every ``[deployment]`` key (model.deployment.DEPLOYMENT_KEYS), every key of
  specdec.config.SECTION_KEYS and ROUTE_KEYS is in the doc's Config section; every key its
  reference table names is one the loader knows; every ```toml block outside "Planned"
  loads with specdec.config.load_config and its deployments validate;
- commands: every option (and choice) of every subcommand, as main() and tune_gamma_main()
  build their parsers, is in that command's entry under "Commands"; every ``--option`` the
  doc names outside "Planned" is one of specdec's, or another program's listed below;
- JSON: every top-level, ``observed``, candidate and segment key of the tune-gamma JSON is in
  "The tune-gamma JSON", and every key its tables name is in the JSON;
- pointers: no file of the repository points at the design doc by any path but
  docs/DESIGN.md (except the files other engineers are updating, listed below), and every
  section a pointer cites ("docs/DESIGN.md, Cost model") is a heading of the doc;
- paths: every repository path the doc names exists.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
from pathlib import Path

import pytest

from specdec.cli import main, tune_gamma_main
from support import route_config, run_cli

ROOT = Path(__file__).resolve().parents[1]
DOC_REL = "docs/DESIGN.md"
DOC = ROOT / DOC_REL
DOC_NAME = Path(DOC_REL).name
PLANNED = "Planned"

# Pointers other engineers are updating: files that still cite the design doc by its bare
# name, and that this change was not to edit. Remove a file once its pointers say docs/.

# Options of other programs the doc names (vLLM's server, `vllm bench serve`, pip).
FOREIGN_OPTIONS = frozenset({
    "--speculative-config", "--additional-config", "--per-request-spec-decode-metrics",
    "--enable-per-request-metrics", "--enable-mfu-metrics", "--kv-cache-memory-bytes", "--no-deps",
})

# Top directories whose paths the doc may name (each must exist).
REPO_DIRS = ("acceptance", "model", "kernels", "specdec", "dashboard", "notebooks", "benchmarks", "tests", "docs",
             "scripts")

INLINE_ARGV = ["--survival", "0.9,0.8,0.7", "--drafts", "20000", "--json"]
# keys of `observed` that only a window (not an inline curve) has: checked on a real window
WINDOW_ONLY_OBSERVED = {"events", "batch_time_shares", "observed_tokens_per_second", "targets"}


# ------------------------------------------------------------------------------ the doc
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


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
    """The doc without its "Planned" section (what is built)."""
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
    return section(section(text, "Interfaces"), "Config")


def missing_config_keys(text: str) -> list[str]:
    """Keys of the loader and of [deployment] that the doc's Config section does not name."""
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
    `[section] key` and then bare keys of the same section (`[collect] interval` / `timeout`);
    a bare key with no section before it is a [deployment] key (a route may set it too)."""
    start = text.index("## Config reference")
    end = text.find("\n## ", start + 1)
    keys = set()
    for names in table_first_cells(text[start:end if end > 0 else None]):
        section_name = "deployment"
        for name in names:
            m = re.match(r"^\[(\w+)(?:\.NAME)?\] (\w+)$", name)
            if m:
                section_name = m.group(1)
            keys.add((section_name, m.group(2) if m else name))
    return keys


def readme_key_mismatch(text: str) -> tuple[list, list]:
    """(keys the loader knows that README's table leaves out, keys it names that the loader
    does not know)."""
    from model.deployment import DEPLOYMENT_KEYS
    from specdec.config import ROUTE_KEYS, SECTION_KEYS

    known = ({("routes", k) for k in ROUTE_KEYS} | {(s, k) for s, ks in SECTION_KEYS.items() for k in ks}
             | {("deployment", k) for k in DEPLOYMENT_KEYS})
    named = readme_reference_keys(text)
    return sorted(known - named), sorted(named - known)


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


def command_entries(text: str, paths) -> dict[str, str]:
    """The "Commands" bullets of each command path, joined: a bullet belongs to the longest
    path its first backticked span starts with."""
    body = section(section(text, "Interfaces"), "Commands")
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


def unknown_options(text: str) -> list[str]:
    """``--options`` the doc names outside Planned that no parser of specdec has."""
    known = {opt for parser in command_parsers().values() for opt, _ in options(parser)}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", main_text(text)))
    return sorted(named - known - FOREIGN_OPTIONS)


# ------------------------------------------------------------------------------ JSON
def json_section(text: str) -> str:
    return section(section(text, "Interfaces"), "The tune-gamma JSON")


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
def pointer_lines() -> list[tuple[str, str]]:
    """(file, line) of every line of the repository's tracked or untracked (not ignored)
    files that mentions the design doc's name."""
    try:
        done = subprocess.run(["git", "grep", "-n", "-I", "--untracked", "-F", DOC_NAME], cwd=ROOT,
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


def dangling_pointers(lines: list[tuple[str, str]]) -> list[str]:
    bare = re.compile(rf"(?<!docs/){re.escape(DOC_NAME)}")
    return [f"{path}: {line.strip()}" for path, line in lines
            if bare.search(line)]


def uncited_sections(text: str, lines: list[tuple[str, str]]) -> list[str]:
    """Pointers to the doc's path followed by ", Section" or " (Section" whose section is not
    a heading of the doc (a heading that begins with the cited words counts)."""
    heads = headings(text)
    cite = re.compile(rf"{re.escape(DOC_REL)}(?:, | \()([A-Z][^,;:.)(`\x22']*)")
    out = []
    for path, line in lines:
        for m in cite.finditer(line):
            words = m.group(1).strip()
            if not any(h == words or h.startswith(words + " ") or h.startswith(words + ":") for h in heads):
                out.append(f"{path}: cites {words!r}")
    return out


# ------------------------------------------------------------------------------ paths
def missing_paths(text: str) -> list[str]:
    pattern = re.compile(rf"^(?:{'|'.join(REPO_DIRS)})/[\w./-]*$")
    return sorted(p for p in backticked(text) if pattern.match(p) and not (ROOT / p).exists())


# ------------------------------------------------------------------------------ the tests
@pytest.fixture(scope="module")
def text() -> str:
    assert DOC.exists(), f"{DOC_REL} is missing: every pointer to it dangles"
    return doc_text()


@pytest.fixture(scope="module")
def inline_doc() -> dict:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = tune_gamma_main(list(INLINE_ARGV))
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_config_keys_are_in_the_doc(text):
    assert missing_config_keys(text) == []


def test_the_config_reference_names_only_known_keys(text):
    assert unknown_reference_keys(text) == []


def test_the_readme_config_table_names_every_key_and_only_known_ones():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_key_mismatch(readme) == ([], [])
    # the check catches a table that lost a key, and one that names a key nobody reads
    lost = readme.replace("| `draft_model` |", "| `drafter` |")
    assert readme_key_mismatch(lost) == ([("deployment", "draft_model")], [("deployment", "drafter")])


def test_the_docs_toml_examples_load(text, tmp_path):
    assert toml_blocks(text), "no ```toml example outside Planned"
    assert toml_errors(text, tmp_path) == []


def test_every_option_of_every_command_is_in_its_entry(text):
    assert missing_options(text) == []


def test_every_option_the_doc_names_exists(text):
    assert unknown_options(text) == []
    known = {opt for parser in command_parsers().values() for opt, _ in options(parser)}
    assert not FOREIGN_OPTIONS & known, "an option listed as another program's is specdec's own"


def test_tune_gamma_json_keys_are_in_the_doc(text, capsys):
    code, out, err = run_cli(capsys, tune_gamma_main, list(INLINE_ARGV))
    assert code == 0, err
    doc = json.loads(out)
    assert missing_json_keys(text, doc) == []
    assert unknown_json_keys(text, set(doc), set(doc["observed"]) | WINDOW_ONLY_OBSERVED) == []


def test_a_window_documents_keys_are_in_the_doc(text, tmp_path, capsys, inline_doc):
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


def test_no_pointer_dangles():
    assert dangling_pointers(pointer_lines()) == []


def test_every_cited_section_exists(text):
    assert uncited_sections(text, pointer_lines()) == []


def test_the_paths_the_doc_names_exist(text):
    assert missing_paths(text) == []


def test_planned_is_the_last_section_and_the_probe_is_built(text):
    """What is decided but not built is in the last section only: the probe decision and a
    running probe's data are built (the main text says so), so Planned no longer lists them."""
    assert re.findall(r"^## (.+)$", text, re.M)[-1].strip() == PLANNED
    assert "| `decision` | change, keep, off, probe, or undecided" in main_text(text)
    assert "stop it early" in main_text(text) and "| `probe_segment` |" in main_text(text)
    assert "probe" not in section(text, PLANNED)


# -------------------------------------------------------------- each check catches a loss
def drop_lines(text: str, needle: str) -> str:
    return "\n".join(line for line in text.splitlines() if needle not in line)


def test_each_check_catches_a_doc_that_lost_something(text, tmp_path, inline_doc):
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
    assert "drafts_factor_to_settle" in missing_json_keys(drop_lines(text, "`drafts_factor_to_settle`"), inline_doc)
    assert "observed.undrafted_token_share" in missing_json_keys(drop_lines(text, "`undrafted_token_share`"),
                                                                 inline_doc)
    assert "candidates[].expected_tokens" in missing_json_keys(text.replace('"expected_tokens"', '"x"'), inline_doc)
    extra_row = text.replace("| `gain` |", "| `gains` | x |\n| `gain` |", 1)
    assert unknown_json_keys(extra_row, set(inline_doc), set(inline_doc["observed"]) | WINDOW_ONLY_OBSERVED) == ["gains"]
    assert dangling_pointers([("model/x.py", f"see {DOC_NAME}, Cost model")]) == [f"model/x.py: see {DOC_NAME}, Cost model"]
    assert dangling_pointers([("model/x.py", f"see {DOC_REL}, Cost model")]) == []
    cites = [("model/x.py", f"({DOC_REL}, Scale)")]
    assert uncited_sections(text, cites) == []
    assert uncited_sections(text.replace("\n## Scale\n", "\n## Size\n"), cites)
    assert missing_paths(text + "\n`model/no_such_module.py`\n") == ["model/no_such_module.py"]
