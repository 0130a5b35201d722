"""`predictor validate --published FILE` on a corpus a user brings (issue 41 item 6): a transformer corpus, a CNN one, a
file holding both, or a vTrain-format CSV, each record read by its own schema; a row the predictor cannot represent is
skipped with its reason and never aborts the report; vocabularies of real models (LLaMA-3 128,256, BLOOM 250,880) are
represented."""
from __future__ import annotations

import copy
import functools
import json

import pytest
import yaml

from predictor.api import check_knobs, load_model
from predictor.cli import main
from predictor.published.command import is_transformer_record, read_corpus, transformer_report
from predictor.published.corpus import CORPUS_DIR
from predictor.published.transformer import TRANSFORMER_FILE, VTRAIN_COLUMNS
from profiler.errors import UserError


@functools.lru_cache(maxsize=1)
def _megatron_row() -> dict:
    rows = yaml.load(TRANSFORMER_FILE.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    return next(r for r in rows if r["id"].startswith("dlperf-megatron-"))


def _tiny_megatron(rid: str, **details) -> dict:
    rec = copy.deepcopy(_megatron_row())
    rec["id"] = rid
    rec["model_details"].update({"layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 512, **details})
    rec["parallelism"].update(data=2, tensor=2, pipeline=1, micro_batch=2)
    rec["num_gpus"], rec["global_batch"] = 4, 8
    rec["system"]["gpus_used_per_node"] = 4
    return rec


@functools.lru_cache(maxsize=1)
def _cnn_corpus() -> tuple[dict, ...]:
    return tuple(yaml.load((CORPUS_DIR / "cnn_runs.yaml").read_text(encoding="utf-8"), Loader=yaml.CSafeLoader))


def _cnn_rows(n: int) -> list[dict]:
    return copy.deepcopy(list(_cnn_corpus()[:n]))


def test_schema_of_each_record():
    assert is_transformer_record(_tiny_megatron("x"))
    assert not any(is_transformer_record(r) for r in _cnn_rows(5))  # CNN rows also state a global batch
    assert not is_transformer_record("text")


def test_a_transformer_corpus_reaches_the_transformer_report(tmp_path, capsys):
    """It stopped at the first transformer row with `field parallelism: must be text` before."""
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump([_tiny_megatron("mine-a"), _tiny_megatron("mine-b")]), encoding="utf-8")
    assert main(["validate", "--published", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows_validated"] == 2 and report["corpus"] == [str(path)]
    assert {row["plan"]["strategy"] for row in report["rows"]} == {"data+tensor+pipeline"}


def test_a_file_with_both_kinds_reports_each(tmp_path, capsys):
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump(_cnn_rows(2) + [_tiny_megatron("mine-a")]), encoding="utf-8")
    cnn, transformer = read_corpus(path)
    assert len(cnn) == 2 and [r.id for r in transformer] == ["mine-a"]
    assert main(["validate", "--published", str(path), "--json"]) == 0
    reports = json.loads(capsys.readouterr().out)
    assert set(reports) == {"cnn", "transformer"}
    assert reports["cnn"]["rows_validated"] == 2 and reports["transformer"]["rows_validated"] == 1


def test_a_vtrain_csv(tmp_path, capsys):
    csv = tmp_path / "v.csv"
    csv.write_text(",".join(VTRAIN_COLUMNS) + "\n0.001,8,16,2,64,4,2,32,2,2,2,100.0\n", encoding="utf-8")
    assert main(["validate", "--published", str(csv), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows_validated"] == 1 and report["rows"][0]["source"] == "vtrain"


def test_large_vocabularies_are_represented():
    """LLaMA-3's 128,256 and BLOOM's 250,880 tokens were above the 65,536 knob limit and stopped the whole report."""
    for vocab in (128256, 250880):
        check_knobs("model gpt", {"vocab": vocab, "seq": 131072})
        graph = load_model("gpt", layers=1, hidden=64, heads=4, seq=32, vocab=vocab)
        assert any(layer.op == "linear" and layer.output_shape[-1] == vocab for layer in graph.layers)  # the head
    with pytest.raises(UserError, match="vocab"):
        check_knobs("model gpt", {"vocab": 3_000_000})
    with pytest.raises(UserError, match="width"):  # other knobs keep their limit
        check_knobs("model resnet", {"width": 100_000})


def test_a_row_the_predictor_cannot_represent_is_skipped_with_its_reason(tmp_path):
    rows = [_tiny_megatron("mine-ok"), _tiny_megatron("mine-llama3", vocab=128256),
            _tiny_megatron("mine-too-big", vocab=3_000_000), _tiny_megatron("mine-heads", heads=3)]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(rows), encoding="utf-8")
    _, runs = read_corpus(path)
    report = transformer_report(runs=runs, sources=[path])
    assert sorted(r["id"] for r in report["rows"]) == ["mine-llama3", "mine-ok"]
    reasons = {s["id"]: s["reason"] for s in report["skipped"]}
    assert set(reasons) == {"mine-too-big", "mine-heads"}
    assert "vocab" in reasons["mine-too-big"] and "cannot represent" in reasons["mine-too-big"]
    assert reasons["mine-heads"]


def test_a_malformed_user_row_is_one_line_exit_2(tmp_path, capsys):
    bad = _tiny_megatron("mine-bad")
    bad["parallelism"]["tensor"] = "two"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump([bad]), encoding="utf-8")
    assert main(["validate", "--published", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallelism.tensor" in err and "mine-bad" in err


def _as_user_states_it(rid: str, measured: dict, **details) -> dict:
    """A tiny Megatron row as a user writes it: a throughput instead of the corpus's derived seconds."""
    rec = _tiny_megatron(rid, **details)
    rec.pop("derived", None)
    rec["measured"] = measured
    return rec


@pytest.mark.parametrize("measured, seconds", [
    ({"seconds_per_iteration": 0.5}, 0.5),
    ({"iteration_time_ms": 250}, 0.25),
    ({"value": 400, "unit": "ms/iteration"}, 0.4),
    ({"value": 16, "unit": "samples/s"}, 8 / 16),  # global batch 8
    ({"value": 4, "unit": "sequences/s/GPU"}, 8 / (4 * 4)),  # 4 GPUs
    ({"value": 512, "unit": "tokens/s"}, 8 * 32 / 512),  # sequence length 32
    ({"tokens_per_sec_per_gpu": 64}, 8 * 32 / (64 * 4)),
    ({"sequences_per_sec": 2, "tokens_per_sec": 1}, 8 * 32 / 1),  # the token rate is read first
])
def test_a_user_states_a_rate_or_a_time_and_the_row_reads_its_seconds(tmp_path, measured, seconds):
    run = read_corpus(_write(tmp_path, [_as_user_states_it("mine", measured)]))[1][0]
    assert run.measured_s == pytest.approx(seconds) and run.measured_note == ""


def test_a_rate_the_row_cannot_convert_is_skipped_with_its_reason(tmp_path):
    runs = read_corpus(_write(tmp_path, [_as_user_states_it("a", {"value": 3, "unit": "minutes"}),
                               _as_user_states_it("b", {"value": 512, "unit": "tokens/s"}, seq_len=None)]))[1]
    assert runs[0].measured_s is None and "not a per-iteration throughput" in runs[0].measured_note
    assert runs[1].measured_s is None and "seq_len" in runs[1].measured_note
    cnn = _cnn_rows(1)[0]
    cnn.pop("derived", None)
    cnn["measured"] = {"value": 2000, "unit": "samples/s"}
    run = read_corpus(_write(tmp_path, [cnn]))[0][0]
    assert run.measured_s == pytest.approx(cnn["batch_per_gpu"] * cnn["num_gpus"] / 2000)


def test_hugging_face_and_megatron_names_of_model_details(tmp_path):
    rec = _tiny_megatron("hf")
    details = rec["model_details"]
    for key in ("layers", "hidden", "heads", "seq_len", "vocab"):
        details.pop(key)
    details.update(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=172, seq_length=32, vocab_size=512)
    run = read_corpus(_write(tmp_path, [rec]))[1][0]
    got = run.extra["model_details"]
    assert (got["layers"], got["hidden"], got["heads"], got["kv_heads"], got["ffn"], got["seq_len"], got["vocab"]) == \
        (2, 64, 4, 2, 172, 32, 512)
    details["hidden"] = 96  # the corpus's own key saying otherwise
    with pytest.raises(UserError, match=r"model_details\.hidden_size.*says 64.*says 96"):
        read_corpus(_write(tmp_path, [rec]))


def _write(folder, records: list):
    path = folder / f"corpus{len(list(folder.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(records), encoding="utf-8")
    return path


def _dell_a100_row(rid: str, system_name: str) -> dict:
    rec = copy.deepcopy(next(r for r in _cnn_corpus() if r["id"] == "mlperf-v2_0-dell-16xXE8545x4A100-SXM-40GB"))
    rec["id"], rec["system"]["name"] = rid, system_name
    return rec


def test_a_users_profile_predicts_every_row_of_its_gpu(tmp_path, capsys):
    """--profile with --published was ignored before: a user who calibrated their own cluster validates against
    their own measured runs. Every row of the profile's GPU takes it (without --profile each takes the reference
    profile its system maps to); a row from another GPU is skipped, naming both."""
    rows = [_dell_a100_row("mine-a100", "Acme research cluster"),
            {**_dell_a100_row("mine-v100", "Acme old cluster"), "system": {**_dell_a100_row("x", "y")["system"],
                                                                           "gpu": "Tesla V100-SXM2-16GB"}}]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(rows), encoding="utf-8")
    assert main(["validate", "--published", str(path), "--json"]) == 0
    without = {r["id"]: r["system"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert without["mine-a100"] == "a100-sxm-4gpu-2hdr"
    assert main(["validate", "--published", str(path), "--profile", "a100-sxm-4gpu-4hdr.published", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in report["rows"]] == ["mine-a100"]
    assert report["rows"][0]["system"] == "a100-sxm-4gpu-4hdr"
    assert report["profile"].endswith("a100-sxm-4gpu-4hdr.published.yaml")
    assert "loso" not in report  # the leave-one-source-out columns are variants of the shipped profiles
    (skip,) = report["skipped"]
    assert skip["id"] == "mine-v100" and "V100" in skip["reason"] and "A100" in skip["reason"]


def test_a_users_profile_on_transformer_rows_and_a_cpu_profile(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump([_tiny_megatron("mine-a")]), encoding="utf-8")  # DLPerf's V100 cluster
    assert main(["validate", "--published", str(path), "--profile", "v100-dgx1-8gpu.published", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows_validated"] == 1 and report["rows"][0]["system"] == "v100-dgx1-8gpu"
    cpu = CORPUS_DIR.parents[2] / "tests" / "data" / "drift_quick_cpu_profile.yaml"  # a host without GPUs
    assert main(["validate", "--published", str(path), "--profile", str(cpu), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows_validated"] == 0 and "host without GPUs" in report["skipped"][0]["reason"]


def test_a_bad_profile_with_published_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump([_tiny_megatron("mine-a")]), encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("machine: [1, 2\n", encoding="utf-8")
    for profile in (str(bad), "no-such-profile"):
        assert main(["validate", "--published", str(path), "--profile", profile]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and ("bad.yaml" in err or "no-such-profile" in err)
