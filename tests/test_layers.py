"""The pipeline's layering, read from the source: kernels -> profiler -> calibrate -> predictor, with paraoracle
(commands that compose stages, e.g. `profiler calibrate --model`) on top: it may import every stage and nothing
imports it. No module imports a later stage (function-local imports included), and module-level imports form no
circle. The profiler measures and writes raw samples; its commands that fit, show or compare profiles are
paraoracle's (paraoracle/cli.py), and the op arithmetic both the profiler and calibrate use is profiler.opmath's.
Data follows the same direction: no stage writes into another stage's package (a generated file lies in its
writer's stage; no command's --out default is another stage's path)."""
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


# ---- data direction: no stage writes into an earlier stage's package ------------------------------------------
def _writer(path: Path) -> str | None:
    """The module a generated data file names as its writer: the first `python -m X` of its leading comments."""
    import re

    head = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[:8]:
        if not line.startswith("#"):
            break
        head.append(line)
    match = re.search(r"`python -m ([\w.]+)", " ".join(head))
    return match.group(1) if match else None


def test_generated_data_lives_in_its_writers_stage():
    """A data file written by `python -m X` lies in X's stage (the fitted system constants are the predictor's:
    predictor/data/system_constants.yaml, an input calibrate.published is given)."""
    written, found = 0, {}
    for stage in STAGES:
        for path in (ROOT / stage).rglob("*"):
            if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
                writer = _writer(path)
                if writer and writer.split(".")[0] in STAGES:
                    written += 1
                    if writer.split(".")[0] != stage:
                        found[str(path.relative_to(ROOT))] = writer
    assert written >= 4, "the generated files' headers no longer name their writer (`python -m X`)"
    assert not found, f"data written into another stage's package: {found}"


def test_no_command_writes_by_default_into_another_stages_package():
    """An --out/--out-dir default built from a path another stage's module names (e.g. a later stage writing
    calibrate's data) is refused; a command may write into its own stage or outside the packages (docs/)."""
    found, defaults = [], 0
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = {}  # local name -> module it came from
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module if not node.level else ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [node.module])
                imported.update({(a.asname or a.name): base for a in node.names})
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
                    and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("--out")):
                continue
            for kw in node.keywords:
                if kw.arg != "default":
                    continue
                defaults += 1
                for used in ast.walk(kw.value):
                    origin = imported.get(getattr(used, "id", None))
                    if origin and origin.split(".")[0] in STAGES and origin.split(".")[0] != name.split(".")[0]:
                        found.append(f"{name}: {node.args[0].value} defaults to {origin}.{used.id}")
    assert defaults >= 3, "no --out default found: the scan no longer sees the commands"
    assert not found, found
