"""`predictor report`: one self-contained HTML page for a model and a profile, to share — the scaling curves and
table (`predictor scale`'s sweep), every strategy at one device count, the winner's time and memory breakdown,
the profile's provenance and the accuracy known for this kind of prediction (predictor.html_report)."""
from __future__ import annotations

import argparse
import hashlib
import shlex
from pathlib import Path

from predictor.cmd_scale import add_sweep_arguments, run_sweep
from profiler.cliutil import MAX_DEVICES, int_in
from profiler.errors import UserError

REPORT_NAME = "report.html"
MAX_SOURCES = 30  # published sources listed on the page


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_sweep_arguments(parser)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="DIR", help=f"write DIR/{REPORT_NAME} (DIR is made if its parent exists)")
    where.add_argument("--html", metavar="FILE", help="write the page to FILE (.html)")
    parser.add_argument("--compare-at", type=int_in(1, MAX_DEVICES), metavar="N",
                        help="device count of the strategy table (default: the largest count the best plan "
                             "scales to at the efficiency threshold)")
    parser.add_argument("--force", action="store_true", help="overwrite the page if it exists")


def _target(args) -> Path:
    """The page's path, checked before any prediction (a missing folder, an existing page without --force)."""
    from profiler.outputs import check_output

    if args.html:
        return check_output(args.html, "--html", args.force, (".html", ".htm"))
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--out {folder}: exists and is not a folder")
    if not folder.exists():
        parent = folder.parent if str(folder.parent) else Path(".")
        if not parent.is_dir():
            raise UserError(f"--out {folder}: folder '{parent}' does not exist")
        return folder / REPORT_NAME
    return check_output(folder / REPORT_NAME, "--out", args.force)


def _sources(coefficients) -> list[str]:
    """Distinct `sources` strings anywhere in a profile's coefficients, most cited first."""
    from collections import Counter

    found: Counter = Counter()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "sources" and isinstance(value, list):
                    found.update(str(v) for v in value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(coefficients)
    return [text for text, _ in found.most_common(MAX_SOURCES)]


def run(args) -> int:
    target = _target(args)
    result, graph, cm, path = run_sweep(args)
    from predictor.api import predict_all, rank, searched_layouts
    from predictor.flags import search_options
    from predictor.known_accuracy import for_prediction
    from predictor.plan import ADDON_STRATEGIES, STRATEGIES
    from predictor.scale_plot import breakdown_figure, png_bytes, scaling_figure
    from predictor.scale_table import findings, table
    from predictor.scaling import BEST
    from profiler.outputs import write_atomic
    from profiler.profile import load_profile

    lead = BEST if BEST in result.lines else next(iter(result.lines))
    compare = args.compare_at or result.last_efficient(lead) or result.devices[-1]
    batch = args.batch_per_gpu * compare if args.batch_per_gpu is not None else args.batch
    preds = predict_all(graph, batch, compare, cm, strategies=STRATEGIES + ADDON_STRATEGIES,
                        devices_per_node=args.gpus_per_node, dtype=args.dtype, optimizer=args.optimizer,
                        device_memory_bytes=args.memory_cap * 1e9 if args.memory_cap else None,
                        framework=args.framework, synthetic_data=args.synthetic_data, stack=args.stack,
                        memory_format=args.memory_format, cross_entropy=args.cross_entropy,
                        bn_group=args.bn_group, cuda_graphs=args.cuda_graphs)
    cap = args.memory_cap * 1e9 if args.memory_cap else None  # the searched 3-D and sharded layouts, as run's
    preds = rank(preds + searched_layouts(graph, cm, batch=batch, devices=compare, device_memory_bytes=cap,
                                          stack=args.stack, known=preds, **search_options(args)))
    at = next((pt for pt in result.lines[lead] if pt.devices == compare and pt.usable), None)
    winner = at.prediction if at is not None else next((p for p in preds if p.feasible), None)
    usable = [pt for pt in result.lines[lead] if pt.usable]
    breakdown = png_bytes(breakdown_figure(result, lead)) if usable else None
    profile = load_profile(path)
    header, rows = table(result, args.dataset_size, args.epochs, args.gpu_hour_cost)
    kind = "transformer" if any(layer.op in ("bmm", "sdpa") for layer in graph.layers) else "cnn"
    accuracy = for_prediction(kind, path.name, cm.provenance, bool(getattr(cm, "device_is_host", False)),
                              result.devices)
    scaling = (f"weak scaling, {result.batch_per_device} samples per device" if result.weak
               else f"strong scaling, global batch {result.global_batch}")
    warnings = []
    if cm.provenance == "published":
        warnings.append("Published profile: the machine's figures come from datasheets and the literature, not "
                        "from measurements on your cluster.")
    substituted = dict(getattr(cm, "substitutions", {}))
    if substituted:
        warnings.append("The profile has no calibrated family for " + ", ".join(sorted(
            {key.split()[0] for key in substituted})) + "; those layers are costed by explicit formulas.")
    from predictor import html_report

    page = html_report.page(
        title=f"{graph.name} on {path.name}: scaling and strategies",
        meta_lines=[f"model {graph.name}: {graph.params / 1e6:.2f} M parameters, {len(graph.layers)} layers; "
                    f"{scaling}; dtype {args.dtype}, optimizer {args.optimizer}, framework {args.framework}",
                    f"profile {path.name} ({cm.provenance}); the same sweep in a terminal: {_scale_command(args)}"],
        findings=findings(result), scaling_png=png_bytes(scaling_figure(result, f"{graph.name} on {path.name}")),
        scaling_header=header, scaling_rows=rows, compare_devices=compare, compare_batch=batch,
        strategy_preds=preds, breakdown_png=breakdown, winner=winner, provenance=_provenance(profile, path),
        accuracy=accuracy, warnings=warnings)
    try:
        target.parent.mkdir(exist_ok=True)
    except OSError as err:
        raise UserError(f"--out {target.parent}: cannot make the folder ({err.strerror})") from None
    write_atomic(target, page)
    print(f"report written to {target} ({len(page.encode()) / 1e3:.0f} kB, self-contained)")
    return 0


def _scale_command(args) -> str:
    """The `predictor scale` command that prints this page's sweep: every flag the two commands share
    (cmd_scale.add_sweep_arguments) that the report was given away from its default, in the parser's order."""
    parser = argparse.ArgumentParser(add_help=False)
    add_sweep_arguments(parser)
    words = ["predictor", "scale"]
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or value is None or value == action.default or value == []:
            continue
        flag = action.option_strings[-1] if action.option_strings[-1].startswith("--") else action.option_strings[0]
        if action.nargs == 0:  # a switch (store_true)
            words.append(flag)
        elif isinstance(value, list):
            for item in value:
                words += [flag, str(item)]
        else:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return " ".join(shlex.quote(w) for w in words)


def _provenance(profile, path: Path) -> dict:
    """The profile's provenance as rows of (field, value), and the published sources its coefficients cite."""
    m = profile.machine
    gpus: dict[str, int] = {}
    for g in m.gpus:
        name = f"{g.name}, {g.memory_bytes / 2**30:.0f} GiB" if g.memory_bytes else g.name
        gpus[name] = gpus.get(name, 0) + 1
    settings = ", ".join(f"{k} {profile.settings[k]}" for k in ("device", "grid", "threads", "duration_s")
                         if k in profile.settings)
    versions = ", ".join(f"{k} {v}" for k, v in m.versions.items() if v)
    rows = [["file", f"{path.name} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]})"],
            ["kind", "published: datasheet and literature figures" if profile.provenance.kind == "published"
             else "calibrated: measured on the machine below"],
            ["source", profile.provenance.source], ["created", profile.created],
            ["host", f"{m.hostname}: {m.cpu_model or 'unknown CPU'}, {m.cpu_cores or '?'} cores"],
            ["devices", "; ".join(f"{n} x {name}" for name, n in gpus.items()) or "none (the host's CPU)"],
            ["nodes, devices per node", f"{m.nodes}, {m.gpus_per_node}"],
            ["samples", f"{len(profile.samples)}" + (f" ({settings})" if settings else "")]]
    if versions:
        rows.append(["software", versions])
    if profile.correction is not None:
        rows.append(["residual correction", profile.correction.path])
    return {"rows": rows, "sources": _sources(profile.coefficients)}
