"""Per-sample and per-step lines of published rows that differ only in batch (predictor.published.batch_series)."""
import pytest

from predictor.cli import main
from predictor.batch_series import line, suite_series
from predictor.published.batch_series import batch_series, render_text
from predictor.published.corpus import CORPUS_DIR, load_corpus
from predictor.published.report import summarise
from predictor.published.rowmap import Setup, interpret, load_rules
from predictor.published.validate import RowResult

BATCHES = CORPUS_DIR / "dlperf_bert_batches.yaml"


@pytest.fixture(scope="module")
def setups():
    rules = load_rules()
    return {r.id: interpret(r, rules) for r in load_corpus(CORPUS_DIR / "cnn_runs.yaml")}


def _row(setup: Setup, batch: int, measured: float, predicted: float, dtype: str = "") -> RowResult:
    run = type(setup.run)(**{**setup.run.__dict__, "id": f"{setup.run.id}-b{batch}-{dtype}", "batch_per_gpu": batch,
                             "measured_s": measured})
    setup = Setup(**{**setup.__dict__, "run": run, **({"dtype": dtype} if dtype else {})})
    return RowResult(setup=setup, predicted_s=predicted, interval_s=(predicted, predicted))


def test_line_by_hand():
    assert line([(32, 0.1 + 32 * 0.004), (64, 0.1 + 64 * 0.004)]) == pytest.approx((0.1, 0.004))
    # three points off a line: the least-squares fit (x mean 2, y mean 7/3; slope 1.5, intercept 7/3 - 3)
    assert line([(1, 1.0), (2, 2.0), (3, 4.0)]) == pytest.approx((7 / 3 - 3.0, 1.5))
    with pytest.raises(ValueError):
        line([(8, 1.0), (8, 2.0)])


def test_series_separate_per_sample_from_per_step(setups):
    """Measured t = 36 ms + 4 ms n; predicted t = 2 ms + 4 ms n: the same per-sample cost, 34 ms short per step.
    A row of another dtype is its own series, and a series needs two batch sizes."""
    base = setups["tfbench-dgx1-p100-vgg16-synthetic-b64-1gpu"]
    rows = [_row(base, n, 0.036 + 0.004 * n, 0.002 + 0.004 * n) for n in (32, 64, 128)]
    rows.append(_row(base, 64, 0.5, 0.4, dtype="fp16"))
    (series,) = batch_series(rows)
    assert series["samples_per_gpu"] == [32, 64, 128] and len(series["rows"]) == 3
    assert series["measured_per_sample_s"] == pytest.approx(0.004)
    assert series["predicted_per_sample_s"] == pytest.approx(0.004)
    assert series["per_sample_ratio"] == pytest.approx(1.0)
    assert series["measured_per_step_s"] == pytest.approx(0.036)
    assert series["predicted_per_step_s"] == pytest.approx(0.002)
    report = summarise(rows, [])
    assert report["batch_series"] == [series]
    text = "\n".join(render_text(report))
    assert "per sample 4 / 4 ms (1.00x), per step 2 / 36 ms" in text


def test_a_falling_measured_line_has_no_ratio(setups):
    base = setups["tfbench-dgx1-p100-vgg16-synthetic-b64-1gpu"]
    (series,) = batch_series([_row(base, 32, 0.2, 0.1), _row(base, 64, 0.19, 0.2)])
    assert series["measured_per_sample_s"] < 0 and series["per_sample_ratio"] is None
    assert "x)" not in render_text({"batch_series": [series]})[1]


def test_shipped_batch_corpus_reports_its_series(capsys):
    """DLPerf's BERT-base batch series: every row predicted, one series per framework and precision."""
    assert main(["validate", "--published", str(BATCHES)]) == 0
    out = capsys.readouterr().out
    assert "10 rows predicted, 0 skipped" in out
    assert out.count("dlperf bert fp16") == 2 and out.count("dlperf bert fp32") == 2


def test_suite_series_from_validate_records():
    """`predictor validate` records of one model at two batches: a series; another strategy is another."""
    def rec(batch, measured, predicted, label="serial"):
        return {"model": "bert", "knobs": {"layers": 2}, "label": label, "devices": 1, "dtype": "fp32", "amp": "bf16",
                "cudnn_benchmark": False, "batch_per_device": batch, "measured_time_s": measured,
                "predicted_time_s": predicted, "scenario": f"bert b{batch} {label}"}
    rows = [rec(32, 0.010 + 32e-3, 0.002 + 32e-3), rec(64, 0.010 + 64e-3, 0.002 + 64e-3), rec(32, 1.0, 1.0, "data")]
    (series,) = suite_series(rows)
    assert series["per_sample_ratio"] == pytest.approx(1.0)
    assert series["measured_per_step_s"] == pytest.approx(0.010)
    assert series["predicted_per_step_s"] == pytest.approx(0.002)
    assert series["name"] == "bert serial fp32 amp bf16 x1" and series["rows"] == ["bert b32 serial", "bert b64 serial"]


def test_markdown_section_lists_every_series(setups):
    from predictor.batch_series import markdown

    base = setups["tfbench-dgx1-p100-vgg16-synthetic-b64-1gpu"]
    series = batch_series([_row(base, n, 0.036 + 0.004 * n, 0.002 + 0.004 * n) for n in (32, 64)])
    lines = markdown(series)
    assert lines[0] == "## Per sample and per step"
    assert any(line.startswith("| tfbench vgg16 fp32 p100-dgx1-8gpu x1") and "| 4 / 4 | 1.00 | 2 / 36 |" in line
               for line in lines)
    assert markdown([]) == []
