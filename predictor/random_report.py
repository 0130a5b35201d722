"""The report of a random-architecture validation (`predictor validate --suite random:N`): accuracy per net
family and per family x strategy, ranking agreement per net, and the residual correction's accuracy on a
family it never saw (leave one family out).

Rows are `predictor validate` JSONL rows carrying a `generator` field (others are ignored). Ranking per net: is the
strategy predicted fastest the one measured fastest, over all its strategies whatever their ranks, and the share
of strategy pairs ordered as measured. Leave one family out: `fit_correction` on the other families' runs, exactly
as `predictor train-correction`, applied to the family's runs. docs/validation.md ("Random architectures").

    python -m predictor.random_report --profile P.yaml --runs runs.jsonl [--seed 0] [--no-lofo]
"""
from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from predictor.validate_report import accuracy
from profiler.errors import UserError

Row = Mapping[str, Any]


def family_of(row: Row) -> str | None:
    generator = row.get("generator")
    return generator.get("family") if isinstance(generator, Mapping) else None


def _predicted(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if family_of(r) and r.get("predicted_time_s") and r.get("measured_time_s")]


def per_family_accuracy(rows: Sequence[Row]) -> dict[str, tuple[float, int]]:
    """family -> (mean accuracy, runs)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in _predicted(rows):
        groups[family_of(r)].append(accuracy(r["predicted_time_s"], r["measured_time_s"]))
    return {f: (statistics.fmean(v), len(v)) for f, v in sorted(groups.items())}


def per_family_strategy_accuracy(rows: Sequence[Row]) -> dict[tuple[str, str], tuple[float, int]]:
    """(family, strategy label) -> (mean accuracy, runs)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in _predicted(rows):
        groups[(family_of(r), r["label"])].append(accuracy(r["predicted_time_s"], r["measured_time_s"]))
    return {k: (statistics.fmean(v), len(v)) for k, v in sorted(groups.items())}


def net_ranking(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per net with >= 2 predicted and measured strategies: the fastest predicted and measured strategy,
    whether they agree, and how many strategy pairs the prediction orders as measured. A strategy measured
    more than once for a net (appended validations) counts with its mean times."""
    nets: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    families = {}
    for r in _predicted(rows):
        nets[r["model"]][r["label"]].append((r["predicted_time_s"], r["measured_time_s"]))
        families[r["model"]] = family_of(r)
    out = []
    for model, labels in sorted(nets.items()):
        if len(labels) < 2:
            continue
        times = {label: (statistics.fmean(p for p, _ in v), statistics.fmean(m for _, m in v)) for label, v in labels.items()}
        names = sorted(times)
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        alike = sum((times[a][0] - times[b][0]) * (times[a][1] - times[b][1]) > 0 for a, b in pairs)
        best_pred = min(names, key=lambda n: times[n][0])
        best_meas = min(names, key=lambda n: times[n][1])
        out.append({"net": model, "family": families[model], "strategies": len(names), "predicted_best": best_pred,
                    "measured_best": best_meas, "agree": best_pred == best_meas, "pairs_alike": alike,
                    "pairs": len(pairs)})
    return out


def leave_one_family_out(rows: Sequence[Row], profile, seed: int = 0) -> dict[str, Any]:
    """{"families": [{family, runs, train_runs, analytical, corrected, applied, in_domain, chosen} or
    {family, runs, train_runs, analytical, error}], "note": why nothing was computed ("" otherwise)}.
    `rows` should be the rows as stored (JSON round-tripped), as the correction reads them."""
    from calibrate.correction import Correction, fit_correction

    records = _predicted(rows)
    families = sorted({family_of(r) for r in records})
    if len(families) < 2:
        return {"families": [], "note": f"needs predicted and measured runs of >= 2 families (have: {', '.join(families) or 'none'})"}
    out = []
    for family in families:
        train = [r for r in records if family_of(r) != family]
        test = [r for r in records if family_of(r) == family]
        entry: dict[str, Any] = {
            "family": family, "runs": len(test), "train_runs": len(train),
            "analytical": statistics.fmean(accuracy(r["predicted_time_s"], r["measured_time_s"]) for r in test)}
        try:
            spec, report = fit_correction(train, profile, seed=seed,
                                          runs_source={"held_out_family": family, "rows": len(train)})
            correction = Correction(spec=spec, path=Path("(leave-one-family-out)"))
            applied = [correction.apply(r) for r in test]
        except (UserError, ValueError) as err:
            entry["error"] = str(err)
            out.append(entry)
            continue
        entry.update(corrected=statistics.fmean(accuracy(c.corrected_s, r["measured_time_s"]) for c, r in zip(applied, test)),
                     applied=sum(c.applied for c in applied), in_domain=sum(c.in_domain for c in applied),
                     chosen=report.chosen)
        out.append(entry)
    return {"families": out, "note": ""}


def render(rows: Sequence[Row], lofo: Mapping[str, Any] | None = None) -> str:
    """The random-net sections of the validate report."""
    lines = ["random nets: mean accuracy per family (time)"]
    fam = per_family_accuracy(rows)
    if not fam:
        lines.append("  no predicted and measured runs of random nets")
    for family, (mean, n) in fam.items():
        lines.append(f"  {family:<14} {mean:7.1%}  ({n} runs)")
    cells = per_family_strategy_accuracy(rows)
    if cells:
        labels = sorted({label for _, label in cells})
        lines += ["", "mean accuracy per family and strategy:",
                  f"  {'family':<14} " + " ".join(f"{label:>16}" for label in labels)]
        for family in fam:
            values = [f"{cells[(family, l)][0]:>9.1%} ({cells[(family, l)][1]:>2})" if (family, l) in cells else f"{'-':>16}"
                      for l in labels]
            lines.append(f"  {family:<14} " + " ".join(values))
    ranks = net_ranking(rows)
    if ranks:
        agree = sum(r["agree"] for r in ranks)
        alike, pairs = sum(r["pairs_alike"] for r in ranks), sum(r["pairs"] for r in ranks)
        lines += ["", f"ranking agreement per net (fastest strategy, any ranks): {agree}/{len(ranks)} nets "
                      f"({agree / len(ranks):.0%}); strategy pairs ordered as measured: {alike}/{pairs} ({alike / pairs:.0%})"]
        for r in ranks:
            mark = "ok  " if r["agree"] else "MISS"
            lines.append(f"  {mark} {Path(r['net']).name:<28} {r['family']:<14} predicted best {r['predicted_best']:<16} "
                         f"measured best {r['measured_best']:<16} pairs {r['pairs_alike']}/{r['pairs']}")
    if lofo is not None:
        lines += ["", "residual correction, leave one family out (fitted on the other families' runs, applied to this one):"]
        if lofo.get("note"):
            lines.append(f"  not computed: {lofo['note']}")
        for e in lofo.get("families", []):
            head = f"  {e['family']:<14} {e['runs']:>3} runs (trained on {e['train_runs']:>3})  analytical {e['analytical']:7.1%}"
            if "error" in e:
                lines.append(f"{head}  correction not fitted: {e['error']}")
            else:
                lines.append(f"{head}  corrected {e['corrected']:7.1%}  applied to {e['applied']}/{e['runs']}, "
                             f"in domain {e['in_domain']}/{e['runs']} ({e['chosen']})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Report a (pooled) dataset of random-net runs: python -m predictor.random_report --profile P --runs F."""
    import json

    from profiler.cliutil import OneLineParser, seed
    from profiler.inputs import parse_json, read_text
    from profiler.profile import load_profile

    parser = OneLineParser(prog="python -m predictor.random_report", description=main.__doc__)
    parser.add_argument("--runs", required=True, help="JSONL dataset of `predictor validate --suite random:N`")
    parser.add_argument("--profile", help="the profile the runs were predicted with (for leave-one-family-out)")
    parser.add_argument("--seed", type=seed, default=0, help="random seed of the correction's tree models")
    parser.add_argument("--no-lofo", action="store_true", help="skip the leave-one-family-out correction")
    args = parser.parse_args(argv)
    try:
        rows = []
        for number, line in enumerate(read_text(args.runs, "runs", f"--runs {args.runs}").splitlines(), start=1):
            if line.strip():
                row = parse_json(line, args.runs, line=number)
                if isinstance(row, dict) and family_of(row):
                    rows.append(json.loads(json.dumps(row)))
        lofo = None
        if not args.no_lofo:
            if not args.profile:
                raise UserError("--profile is required for leave-one-family-out (or pass --no-lofo)")
            lofo = leave_one_family_out(rows, load_profile(args.profile), args.seed)
    except UserError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return err.exit_code
    print(render(rows, lofo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
