"""One transformer layer against its published timings (predictor.published.layer_timings): the difference of the
two- and one-layer models is one layer, the shipped records read, a malformed file is a one-line error."""
from __future__ import annotations

import pytest

from predictor.published import layer_timings as lt
from predictor.synthetic import SyntheticCostModel
from profiler.errors import UserError


def test_the_shipped_records_read():
    records = lt.load_records()
    assert {r.id for r in records} == {"substation-bert-large-layer-b8-s512", "substation-bert-large-layer-b96-s128"}
    assert all(r.dtype == "fp16" and r.measured_s["pytorch"] > r.measured_s["substation"] for r in records)


def test_one_layer_is_the_difference_of_two_models():
    """Each encoder layer costs the same, so (2 layers - 1) equals (3 - 2): embeddings, head and loss cancel."""
    from predictor.api import load_model
    from predictor.layercost import LayerCoster, Split

    shipped = lt.load_records()[0]
    record = lt.LayerRecord(**{**shipped.__dict__, "knobs": dict(shipped.knobs, hidden=256, heads=4, seq=64,
                                                                   vocab=1000), "batch": 2})
    cm = SyntheticCostModel()

    def total(layers):
        graph = load_model(record.model, **dict(record.knobs, layers=layers))
        coster = LayerCoster(graph, cm, record.dtype)
        return sum(sum(coster.times(i, Split(record.batch))) for i in range(len(graph.layers)))

    fwd, bwd = lt.layer_seconds(record, "other", cm)
    assert fwd + bwd == pytest.approx(total(3) - total(2), rel=1e-9) and 0 < fwd < bwd


def test_report_gives_measured_over_predicted():
    rows = lt.report(lt.load_records())
    for row in rows:
        for impl, t in row["measured_s"].items():
            for stack in lt.STACKS:
                assert row["measured_over_predicted"][impl][stack] == pytest.approx(t / row["predicted_s"][stack])


@pytest.mark.parametrize("text, field", [("- {id: x, model: bert, knobs: {}, batch: 0, dtype: fp16, profile: p, "
                                          "measured_s: {a: 1.0}}", "batch"),
                                         ("- {id: x, model: bert, knobs: {}, batch: 1, dtype: fp64, profile: p, "
                                          "measured_s: {a: 1.0}}", "dtype"),
                                         ("- {id: x, model: bert, knobs: {}, batch: 1, dtype: fp16, profile: p, "
                                          "measured_s: {a: -1}}", "measured_s"),
                                         ("{a: 1}", "list")])
def test_a_malformed_file_is_a_one_line_error(tmp_path, capsys, text, field):
    path = tmp_path / "layers.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=field):
        lt.load_records(path)
    assert lt.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err
