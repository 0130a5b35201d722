"""`predictor validate --published FILE`: predict published measured runs and report the accuracy.

Four predictions per row (predictor.published.loso): `datasheet` profiles (no corpus constant), the
`shipped` profiles (per-GPU-family constants fitted to every source), `loso` (the constants refitted
without the row's source) and `loso_corrected` (loso times the residual correction trained without the row's
source, predictor.published.correction). The headline figures are the shipped profiles'; the loso figure is the one an
unseen cluster should expect.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from calibrate.gpu_specs import find_spec
from calibrate.shipped import resolve_profile
from predictor.published.corpus import CORPUS_DIR, load_corpus, load_records, parse_record
from predictor.published.correction import loso_corrected
from predictor.published.constants_fit import Decompositions
from predictor.published.loso import base_cost_models, deepbench_cost_models, interval_coverage, loso_predictions
from predictor.published.report import plot, render_text, subset_summary, summarise
from predictor.published.rowmap import Skipped, interpret, load_rules
from predictor.published.validate import Predictor, validate_runs
from predictor.report import finite_json
from profiler.profile import check_writable, load_profile, write_atomic

SHIPPED = {"cnn": CORPUS_DIR / "cnn_runs.yaml"}
#: corpus names whose report comes from predictor.published.transformer (both transformer files together)
TRANSFORMER = "transformer"
#: both: the CNN corpus and the transformer runs
ALL = "all"
#: vTrain's single-node runs, reported apart from the transformer report (predictor.published.transformer)
VTRAIN_SINGLE = "vtrain-single"


def transformer_report(profiles_dir: Path | None = None, corpus=None, vtrain=None, attention: str | None = None,
                       runs=None, sources=None, profile: Path | None = None) -> dict:
    """The report of the published transformer runs (transformer_runs.yaml and vTrain's CSV), predicted with the
    shipped profiles. Nothing is fitted to these rows (the profiles' constants come from the CNN corpus), so the
    figure is already a held-out one and there is no leave-one-source-out refit. attention: every row's attention
    knob replaced (a sensitivity, docs/validation.md); None keeps the mapping's. runs (with sources, the files they
    came from): a user's transformer rows instead of the shipped files (`read_corpus`). profile: predict every row
    with this profile instead of its system's (`with_profile`)."""
    from predictor.published.transformer import (TRANSFORMER_FILE, VTRAIN_FILE, interpret_transformer,
                                                  load_transformer_corpus, load_vtrain_csv)
    corpus, vtrain = corpus or TRANSFORMER_FILE, vtrain or VTRAIN_FILE
    if runs is None:
        runs, sources = load_transformer_corpus(corpus) + load_vtrain_csv(vtrain), [corpus, vtrain]
    def interpret_row(run, rules):
        setup = interpret_transformer(run, rules)
        if attention is None or not hasattr(setup, "knobs"):
            return setup
        return replace(setup, knobs=tuple(sorted({**dict(setup.knobs), "attention": attention}.items())))

    rules = load_rules()
    if profile is not None:
        rules, interpret_row = with_profile(rules, interpret_row, profile)
    results, skipped = validate_runs(runs, rules, Predictor(profiles_dir), interpret_row=interpret_row)
    report = summarise(results, skipped)
    report["corpus"] = [str(x) for x in sources]
    report["fitted_to_these_rows"] = "nothing (profile constants fitted to the CNN corpus only)"
    for row, r in zip(report["rows"], results):
        row["plan"] = dict(r.setup.plan)
        row["knobs"] = dict(r.setup.knobs)
        row["seq_mix"] = [list(x) for x in r.setup.seq_mix]
    from predictor.published import megatron_papers
    if any(row["source"] in megatron_papers.SOURCES for row in report["rows"]):  # reported apart (issue 41)
        report["megatron_papers"] = {"rows": megatron_papers.rows(report), "table5": megatron_papers.table5(report)}
    from predictor.published import moe_context_rows
    found = moe_context_rows.rows(report)
    if found:  # reported apart (issue 41 item 4)
        report["moe_context"] = {"rows": found}
    return report


def vtrain_single_report(profiles_dir: Path | None = None, profile: Path | None = None) -> dict:
    """The report of vTrain's 1440 single-node runs (2-8 A100s, Megatron-DeepSpeed; data/ground_truth_single.csv),
    reported apart from the transformer report: nothing is fitted to them either."""
    from predictor.published.transformer import VTRAIN_SINGLE_FILE, VTRAIN_SINGLE_SOURCE, load_vtrain_csv

    runs = load_vtrain_csv(VTRAIN_SINGLE_FILE, source=VTRAIN_SINGLE_SOURCE)
    return transformer_report(profiles_dir, runs=runs, sources=[VTRAIN_SINGLE_FILE], profile=profile)


def is_transformer_record(rec) -> bool:
    """Whether a corpus record has the transformer schema (predictor.published.transformer: parallelism a mapping
    of degrees; the model's layers, hidden size and heads) rather than the CNN one (parallelism free text)."""
    if not isinstance(rec, dict):
        return False
    details = rec.get("model_details")
    return isinstance(rec.get("parallelism"), dict) or (
        isinstance(details, dict) and all(k in details for k in ("layers", "hidden", "heads")))


def read_corpus(path: str | Path) -> tuple[list, list]:
    """(CNN runs, transformer runs) of a user's corpus file: a vTrain-format CSV (`.csv`, every row a transformer
    run) or a YAML list whose records are each read by the schema they have (`is_transformer_record`), so a
    transformer corpus, a CNN one or a file holding both is read; ids unique across the file. A malformed record is a
    one-line UserError naming the file, the record and the field."""
    from predictor.published.transformer import load_vtrain_csv, parse_transformer_record

    name = str(path)
    if name.lower().endswith(".csv"):
        return [], load_vtrain_csv(path)
    runs = load_records(path, lambda rec, i, file: (parse_transformer_record if is_transformer_record(rec)
                                                    else parse_record)(rec, i, file))
    transformer = [r for r in runs if "parallel" in r.extra]
    return [r for r in runs if "parallel" not in r.extra], transformer


def published_report(corpus: str | Path, profiles_dir: Path | None = None, runs=None,
                     profile: Path | None = None) -> dict:
    """The full report of one corpus file (see predictor.published.report.summarise), predicted with the
    profiles in `profiles_dir` (default: the shipped ones); runs: the file's CNN runs when already read.
    profile: every row predicted with this profile instead (`with_profile`): the analytical figures only, since
    the datasheet, leave-one-source-out and DeepBench columns are variants of the shipped profiles."""
    runs = load_corpus(corpus) if runs is None else runs
    rules = load_rules()
    predictor = Predictor(profiles_dir)
    if profile is not None:
        rules, interpret_row = with_profile(rules, interpret, profile)
        results, skipped = validate_runs(runs, rules, predictor, interpret_row=interpret_row)
        report = summarise(results, skipped)
        report["corpus"], report["profile"] = str(corpus), str(profile)
        return report
    results, skipped = validate_runs(runs, rules, predictor)
    base = base_cost_models()
    setups = [r.setup for r in results]
    decompositions = Decompositions(setups, predictor, base)
    datasheet, loso, fitted = loso_predictions(setups, predictor, base, decompositions)
    corrected, strengths = loso_corrected(results, loso)
    report = summarise(results, skipped, extra_predictions={
        "datasheet": lambda r: datasheet.get(r.run.id, r.predicted_s),
        "loso": lambda r: loso.get(r.run.id, r.predicted_s),
        "loso_corrected": lambda r: corrected.get(r.run.id, r.predicted_s)})
    deepbench = deepbench_cost_models()
    kernel_rows = [r for r in results if r.run.num_gpus == 1 and r.setup.profile in deepbench]
    kernel_predicted = {r.run.id: predictor.predict(r.setup, deepbench[r.setup.profile]).predicted_s
                        for r in kernel_rows}
    report["deepbench_kernels"] = subset_summary(kernel_rows, {
        "deepbench": lambda r: kernel_predicted[r.run.id], "shipped": lambda r: r.predicted_s,
        "datasheet": lambda r: datasheet.get(r.run.id, r.predicted_s), "loso": lambda r: loso.get(r.run.id, r.predicted_s)})
    report["loso_correction_strength"] = strengths
    report["interval_coverage_loso"] = interval_coverage(setups, loso,
                                                         widen={r.run.id: r.at_scale_range for r in results})
    report["corpus"] = str(corpus)
    report["loso_constants"] = fitted
    return report


def with_profile(rules: dict, interpret_row, profile: Path):
    """(rules, interpret_row) that predict every row with `profile` (a user's calibrated cluster) instead of the
    reference profile of its system: one system rule matching every record names the file; a row that ran on
    another GPU than the profile's is skipped with both names (a GPU neither datasheet names is compared by its
    name as given); a profile of a host without GPUs skips every row."""
    gpus = load_profile(profile).machine.gpus
    profile_gpu = gpus[0].name if gpus else None
    rules = {**rules, "systems": [{"profile": str(profile)}], "transformer_systems": []}

    def interpret_with(run, rules_):
        ran_on = str(run.system.get("gpu", ""))
        if profile_gpu is None:
            return Skipped(run, f"--profile {profile} describes a host without GPUs; the row ran on {ran_on!r}")
        if not same_gpu(ran_on, profile_gpu):
            return Skipped(run, f"ran on {ran_on!r}; --profile {profile} describes {profile_gpu!r}")
        return interpret_row(run, rules_)
    return rules, interpret_with


def same_gpu(a: str, b: str) -> bool:
    """Whether two GPU names are the same part: the same datasheet entry (calibrate/data/gpus.yaml, whose name
    fragments match the names nvidia-smi and published records give), else the same name ignoring case."""
    spec_a, spec_b = find_spec(a), find_spec(b)
    if spec_a is not None or spec_b is not None:
        return spec_a is not None and spec_b is not None and spec_a.name == spec_b.name
    return a.strip().lower() == b.strip().lower()


def run_published(args) -> int:
    """`--published FILE|cnn|transformer|all [--profile P]`: `all` reports the CNN corpus and the transformer runs
    side by side (JSON {"cnn": ..., "transformer": ...}; one scatter plot of every row). --profile: every row
    predicted with P (`with_profile`)."""
    corpus = SHIPPED.get(args.published, args.published)
    profile = resolve_profile(args.profile).resolve() if args.profile else None  # read (and checked) by with_profile
    if args.out:
        check_writable(args.out)
    if args.plot:
        check_writable(args.plot, "--plot")
    cnn_runs = transformer_runs = None
    if args.published not in SHIPPED and args.published not in (TRANSFORMER, ALL, VTRAIN_SINGLE):
        cnn_runs, transformer_runs = read_corpus(corpus)
    if args.published == ALL or (cnn_runs and transformer_runs):  # both kinds: reported side by side
        reports = {"cnn": published_report(corpus if cnn_runs else SHIPPED["cnn"], runs=cnn_runs, profile=profile),
                   TRANSFORMER: transformer_report(runs=transformer_runs, profile=profile,
                                                   sources=[corpus] if transformer_runs else None)}
        text = json.dumps(finite_json(reports), indent=1)
        rendered = "\n\n".join(f"== {name} ==\n{render_text(r)}" for name, r in reports.items())
        rows = [row for r in reports.values() for row in r["rows"]]
        merged = {"rows": rows, "overall_accuracy": sum(r["accuracy"] for r in rows) / len(rows) if rows else 0.0}
    else:
        if args.published == TRANSFORMER:
            report = transformer_report(profile=profile)
        elif args.published == VTRAIN_SINGLE:
            report = vtrain_single_report(profile=profile)
        elif transformer_runs:
            report = transformer_report(runs=transformer_runs, sources=[corpus], profile=profile)
        else:
            report = published_report(corpus, runs=cnn_runs, profile=profile)
        text, rendered, merged = json.dumps(finite_json(report), indent=1), render_text(report), report
    if args.out:
        write_atomic(args.out, text)
    if args.plot:
        plot(merged, args.plot)
    print(text if args.json else rendered)
    return 0
