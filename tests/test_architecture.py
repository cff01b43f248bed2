"""The package's shape: no import circle between tb_gpuinsight modules (any import: top level, inside a function,
under TYPE_CHECKING, relative or absolute), imports that run down the pipeline, and no module over MAX_LINES
lines. See docs/architecture.md."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

PACKAGE = Path(__file__).resolve().parent.parent / "tb_gpuinsight"
MAX_LINES = 600
# Modules allowed over MAX_LINES, each with the reason it still is.
LONG_ALLOWED: Dict[str, str] = {}


def modules(root: Path = PACKAGE) -> Dict[str, Tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__) for every .py file under `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _from_target(name: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` statement reads from (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _known(target: str, mods: Dict[str, Tuple[Path, bool]]) -> Optional[str]:
    """The project module an import name lands in (`a.b.c` of a non-module `c` is `a.b`), or None."""
    while target and target not in mods:
        target = target.rpartition(".")[0]
    return target or None


def imports(name: str, mods: Dict[str, Tuple[Path, bool]]) -> Set[str]:
    """Project modules `name` imports anywhere in its file."""
    path, is_pkg = mods[name]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_target(name, is_pkg, node)
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        found.update(t for t in (_known(t, mods) for t in targets) if t and t != name)
    return found


def import_graph(root: Path = PACKAGE) -> Dict[str, Set[str]]:
    """Module -> the project modules it imports."""
    mods = modules(root)
    return {name: imports(name, mods) for name in mods}


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import circle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


# Each step of the pipeline may import the steps before it, never those after: the reader knows no estimate, the
# estimates no analysis, and none of them the summaries, the service, the routes, the commands or the API module.
LATER = {
    "trace": ("estimate", "analysis"),
    "estimate": ("analysis",),
    "analysis": (),
}
UPPER = ("store", "service", "span_state", "routes", "commands", "cli", "plugin")


def pipeline_violations(graph: Dict[str, Set[str]], package: str = "tb_gpuinsight") -> List[str]:
    """`a -> b` for every import of a lower step into a later one."""
    out = []
    for name, targets in sorted(graph.items()):
        step = name.split(".")[1] if name.count(".") else ""
        if step not in LATER:
            continue
        later = tuple(f"{package}.{s}" for s in LATER[step] + UPPER)
        out += [f"{name} -> {t}" for t in sorted(targets) if t == package or t.startswith(later)]
    return out


def test_imports_run_down_the_pipeline():
    bad = pipeline_violations(import_graph())
    assert not bad, "imports against the pipeline (trace -> estimate -> analysis -> store -> service): " + \
        "; ".join(bad)


def test_no_module_over_the_line_limit():
    long = {}
    for name, (path, _) in modules().items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in LONG_ALLOWED:
            long[name] = lines
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"


# The thin layers stay thin: the service (split by what it does), the command line and each route module.
THIN_MAX_LINES = 400
THIN = ("tb_gpuinsight.service", "tb_gpuinsight.cli", "tb_gpuinsight.routes")


def test_service_cli_and_routes_stay_thin():
    long = {}
    for name, (path, _) in modules().items():
        if name in THIN or name.startswith(tuple(f"{t}." for t in THIN)):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > THIN_MAX_LINES:
                long[name] = lines
    assert not long, f"service, cli and route modules over {THIN_MAX_LINES} lines (split them): {long}"
    assert "tb_gpuinsight.service.follow" in modules()  # the check sees the service's parts

def test_the_checks_see_circles_and_function_level_imports(tmp_path):
    """A package with a circle closed only by a relative import inside a function is caught; without it, none."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("import os\n\ndef f():\n    from ..a import g\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert find_cycle(graph) in (["pkg.a", "pkg.sub.b", "pkg.a"], ["pkg.sub.b", "pkg.a", "pkg.sub.b"])
    (pkg / "sub" / "b.py").write_text("from .. import x\n")  # `x` is a name of pkg, not a module
    assert find_cycle(import_graph(pkg)) is None


def test_the_pipeline_check_sees_an_analysis_importing_the_store():
    graph = {"tb_gpuinsight.analysis.kernels.rows": {"tb_gpuinsight.store.worker", "tb_gpuinsight.trace.table"},
             "tb_gpuinsight.trace.kineto": {"tb_gpuinsight.estimate.devices"},
             "tb_gpuinsight.store.worker": {"tb_gpuinsight.analysis.kernels.efficiency"}}
    assert pipeline_violations(graph) == ["tb_gpuinsight.analysis.kernels.rows -> tb_gpuinsight.store.worker",
                                          "tb_gpuinsight.trace.kineto -> tb_gpuinsight.estimate.devices"]


# The frontend (frontend/src, TypeScript): each view's files in views/<view>/, only what two or more views share in
# components/, and no import circle between its modules either.
FRONTEND_SRC = PACKAGE.parent / "frontend" / "src"
# `import ... from "x"`, `export ... from "x"` (one line or several), `import "x"` and `import("x")`; a statement
# in a comment starts with `//` or `*` and does not match.
TS_IMPORT = re.compile(
    r"""^\s*(?:import|export)\s+(?:type\s+)?[\w\s{},*$]*?\bfrom\s*["']([^"']+)["']"""
    r"""|^\s*import\s*["']([^"']+)["']"""
    r"""|\bimport\(\s*["']([^"']+)["']\s*\)""", re.M)
# At most this many files of components/ may be named after one view (a shared table named by what it lists).
MAX_VIEW_NAMED_SHARED = 2
# Names a view's files went by before its folder, beside the folder's own name.
VIEW_ALIASES = {"kernels": ("kernel", "kernelEfficiency"), "shapes": ("shape", "tensorShapes"),
                "graph": ("executionGraph",), "distributed": ("ranks", "rank"), "trends": ("trend",)}


def ts_import_graph(root: Path = FRONTEND_SRC) -> Dict[str, Set[str]]:
    """Frontend module (path under `root`) -> the frontend modules it imports (packages from node_modules left out)."""
    graph: Dict[str, Set[str]] = {}
    for path in sorted(root.rglob("*.ts")):
        found: Set[str] = set()
        for m in TS_IMPORT.finditer(path.read_text(encoding="utf-8")):
            spec = next(s for s in m.groups() if s)
            if not spec.startswith("."):
                continue
            base = (path.parent / spec).resolve()
            target = next((c for c in (base.with_name(base.name + ".ts"), base / "index.ts", base)
                           if c.suffix == ".ts" and c.is_file()), None)
            if target is not None:
                found.add(target.relative_to(root.resolve()).as_posix())
        graph[path.relative_to(root).as_posix()] = found
    return graph


def view_named(components: Path, views: Path) -> List[str]:
    """Files of the shared `components` folder whose name starts with a view's (`graphCanvas` of `views/graph/`)."""
    names = set()
    for folder in (p.name for p in views.iterdir() if p.is_dir()):
        names |= {folder, *VIEW_ALIASES.get(folder, ())}
    out = []
    for stem in sorted(p.stem for p in components.glob("*.ts")):
        if any(stem == n or (stem.startswith(n) and stem[len(n)].isupper()) for n in names):
            out.append(stem)
    return out


def test_no_frontend_import_circle():
    graph = ts_import_graph()
    assert "views/index.ts" in graph["main.ts"] and "api.ts" in graph["main.ts"]  # the parse sees imports
    cycle = find_cycle(graph)
    assert cycle is None, "frontend import circle: " + " -> ".join(cycle)


def test_shared_components_are_not_named_after_a_view():
    named = view_named(FRONTEND_SRC / "components", FRONTEND_SRC / "views")
    assert len(named) <= MAX_VIEW_NAMED_SHARED, (
        f"components/ files named after a view (move them to frontend/src/views/<view>/): {named}")


def test_the_frontend_checks_see_circles_and_view_names(tmp_path):
    """A circle closed by a several-line import of a folder's index.ts is caught, a commented one is not; files of
    the shared folder are counted by the view name they start with."""
    src = tmp_path / "src"
    (src / "views" / "graph").mkdir(parents=True)
    (src / "components").mkdir()
    (src / "api.ts").write_text('import { x } from "./components/picker";\nimport tabulator from "tabulator";\n')
    (src / "components" / "picker.ts").write_text('// import { y } from "../api";\nimport "../views";\n')
    (src / "views" / "index.ts").write_text('export {\n  graphTab,\n} from "./graph/tab";\n')
    (src / "views" / "graph" / "tab.ts").write_text('const m = import("../../api");\n')
    graph = ts_import_graph(src)
    assert graph["api.ts"] == {"components/picker.ts"} and graph["components/picker.ts"] == {"views/index.ts"}
    assert find_cycle(graph) is not None
    (src / "views" / "graph" / "tab.ts").write_text('/* import { y } from "../../api"; */\n')
    assert find_cycle(ts_import_graph(src)) is None
    for name in ("graphCanvas", "graph", "graphite", "rankBars", "states"):
        (src / "components" / f"{name}.ts").write_text("")
    (src / "views" / "distributed").mkdir()
    assert view_named(src / "components", src / "views") == ["graph", "graphCanvas", "rankBars"]
