"""The project's own imports: no circle, and no arrow against the flow of data
(acceptance ← kernels, model ← specdec ← dashboard ← notebooks: the dashboard reads through
specdec's pipeline, and nothing of specdec imports the dashboard) — read from the source
with ast, so the rule holds for every module, imported lazily or not."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("acceptance", "kernels", "model", "specdec", "dashboard", "notebooks")
LAYER = {"acceptance": 0, "kernels": 1, "model": 1, "specdec": 2, "dashboard": 3, "notebooks": 4}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _imported(node: ast.AST, module: str, is_package: bool) -> set[str]:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        if node.level:
            head = base[:len(base) - node.level + 1]
            target = ".".join(head + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        return {target} | {f"{target}.{a.name}" for a in node.names}
    return set()


def import_graph() -> dict[str, set[str]]:
    """module → the project's modules it imports (a name resolved to its longest module)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _imported(node, name, path.name == "__init__.py"):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _against_the_flow(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, deps in sorted(graph.items()):
        top = module.split(".")[0]
        for dep in sorted(deps):
            dep_top = dep.split(".")[0]
            if LAYER[dep_top] > LAYER[top] or (dep_top != top and LAYER[dep_top] == LAYER[top]):
                out.append(f"{module} -> {dep}")
    return out


def test_no_import_circle():
    assert _circles(import_graph()) == []


def test_no_import_against_the_flow():
    assert _against_the_flow(import_graph()) == []


def test_the_checks_catch_what_they_forbid():
    graph = {"acceptance.a": {"model.b", "kernels.k"}, "model.b": {"acceptance.a"}, "specdec.c": {"dashboard.d"},
             "dashboard.d": {"specdec.c"}, "kernels.k": set()}
    assert _circles(graph) == [["acceptance.a", "model.b"], ["dashboard.d", "specdec.c"]]
    assert _against_the_flow(graph) == ["acceptance.a -> kernels.k", "acceptance.a -> model.b",
                                        "specdec.c -> dashboard.d"]


def test_the_notebook_generator_reads_the_tool_not_the_other_way():
    graph = import_graph()
    assert "notebooks.build_what_if" in graph, "the notebook's generator is scanned too"
    assert not any(dep.startswith("notebooks") for deps in graph.values() for dep in deps)
