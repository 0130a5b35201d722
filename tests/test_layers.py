"""The pipeline's layering, read from the source: kernels -> profiler -> calibrate -> predictor, with paraoracle
(commands that compose stages, e.g. `profiler calibrate --model`) on top: it may import every stage and nothing
imports it. No module imports a later stage (function-local imports included), and module-level imports form no
circle. The profiler measures and writes raw samples; its commands that fit, show or compare profiles are
paraoracle's (paraoracle/cli.py), and the op arithmetic both the profiler and calibrate use is profiler.opmath's."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("kernels", "profiler", "calibrate", "predictor", "paraoracle")


def _modules() -> dict[str, Path]:
    out = {}
    for stage in STAGES:
        for path in (ROOT / stage).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _imports(path: Path, package: str, top_level_only: bool) -> set[str]:
    """Our modules imported by a file (relative imports resolved against its package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] in STAGES}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def test_no_import_runs_backwards():
    modules = _modules()
    found: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        stage = STAGES.index(name.split(".")[0])
        for imported in _imports(path, package, top_level_only=False):
            if STAGES.index(imported.split(".")[0]) > stage:
                found.setdefault(name, set()).add(imported.split(".")[0])
    assert not found, f"imports from a later stage: { {m: sorted(p) for m, p in found.items()} }"


def test_module_level_imports_form_no_circle():
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = {_resolve(i, modules) for i in _imports(path, package, top_level_only=True)}
        graph[name] = {t for t in targets if t and t != name and not name.startswith(t + ".")}
    # Tarjan's strongly connected components: any component of more than one module is a circle
    index, low, on_stack, stack, circles, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, circles
