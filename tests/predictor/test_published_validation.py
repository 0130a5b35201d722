"""Validation against published measured runs: the corpus reader, the mapping rules, the scores and the CLI."""
import copy
import json
import statistics

import pytest
import yaml

from predictor.cli import main
from predictor.published.corpus import CORPUS_DIR, load_corpus, parse_record
from predictor.published.report import scaling_errors, summarise
from predictor.published.rowmap import Setup, Skipped, interpret, load_rules
from predictor.published.validate import RowResult, accuracy, gpu_bucket
from profiler.errors import UserError

CNN = CORPUS_DIR / "cnn_runs.yaml"


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(CNN)


@pytest.fixture(scope="module")
def records():
    return yaml.load(CNN.read_text(), Loader=yaml.CSafeLoader)


def test_shipped_corpus_loads_with_sources(corpus):
    assert len(corpus) == 384
    timed = [r for r in corpus if r.measured_s is not None]
    assert len(timed) == 359 and all(r.measured_s > 0 for r in timed)
    assert {r.source for r in corpus} == {"dle", "dlperf", "mlperf", "mlperfhpc", "tfbench", "horovod", "akiba2017",
                                          "jia2018"}
    assert all(r.url for r in corpus if r.source in ("dle", "dlperf", "mlperf", "mlperfhpc", "tfbench"))
    assert (CORPUS_DIR / "SOURCES.md").is_file()


def test_seconds_per_iteration_from_images_per_second(records):
    rec = copy.deepcopy(next(r for r in records if r["id"] == "dle-pyt-resnet50_v1.5-dgx1-16-fp32-8gpu"))
    rec["derived"] = {}
    run = parse_record(rec, 0, "c.yaml")
    assert run.measured_s == pytest.approx(rec["global_batch"] / rec["measured"]["value"])


@pytest.mark.parametrize("edit, field", [
    (lambda r: r.pop("num_gpus"), "num_gpus"),
    (lambda r: r.update(num_gpus=-8), "num_gpus"),
    (lambda r: r.update(batch_per_gpu="lots"), "batch_per_gpu"),
    (lambda r: r.update(system=[1, 2]), "system"),
    (lambda r: r["system"].update(nodes=0), "system.nodes"),
    (lambda r: r.update(derived={"seconds_per_iteration": float("nan")}), "derived.seconds_per_iteration"),
    (lambda r: r.update(derived={}, measured={"unit": "img/s", "value": -3}), "measured.value"),
    (lambda r: r.update(model={"name": "x"}), "model"),
    (lambda r: r.update(memory_format="NHCW"), "memory_format"),
    (lambda r: r.update(bn_group=0), "bn_group"),
    (lambda r: r.update(bn_group="pairs"), "bn_group"),
])
def test_malformed_record_names_file_record_and_field(records, edit, field):
    rec = copy.deepcopy(records[0])
    edit(rec)
    with pytest.raises(UserError, match=rf"c\.yaml: record 7 \({rec.get('id')}\): field {field}"):
        parse_record(rec, 7, "c.yaml")


def test_bad_corpus_files_are_one_line_errors(tmp_path, records):
    for name, text, match in [("a.yaml", "[1, 2", "not valid YAML"), ("b.yaml", "{}", "non-empty list"),
                              ("c.yaml", yaml.safe_dump([records[0], copy.deepcopy(records[0])]), "duplicate of record 0")]:
        (tmp_path / name).write_text(text)
        with pytest.raises(UserError, match=match):
            load_corpus(tmp_path / name)
    with pytest.raises(UserError, match="does not exist"):
        load_corpus(tmp_path / "none.yaml")
    with pytest.raises(UserError, match="not a regular file"):
        load_corpus(tmp_path)


def test_cli_bad_corpus_exit_2_one_line(tmp_path, capsys, records):
    rec = copy.deepcopy(records[3])
    rec["num_gpus"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump([records[0], rec]))
    assert main(["validate", "--published", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml: record 1" in err and "num_gpus" in err


def test_every_representable_record_maps_to_a_shipped_profile(corpus):
    from calibrate.shipped import shipped_profiles_dir
    from predictor.zoo import ZOO

    rules = load_rules()
    setups = [interpret(r, rules) for r in corpus]
    kept = [s for s in setups if isinstance(s, Setup)]
    assert len(kept) >= 250
    assert all((shipped_profiles_dir() / s.profile).is_file() and s.model in ZOO for s in kept)
    reasons = {s.reason for s in setups if isinstance(s, Skipped)}
    assert any("parameter-server" in r for r in reasons) and any("K80" in r for r in reasons)
    by_id = {s.run.id: s for s in kept}
    # one GPU of TensorFlow's parameter-server mode with host-held variables is not serial training on the GPU
    skipped = {s.run.id: s.reason for s in setups if isinstance(s, Skipped)}
    assert "local_parameter_device=cpu" in skipped["tfbench-dgx1-p100-resnet50-synthetic-b64-1gpu"]
    assert "parameter-server" in skipped["tfbench-dgx1-p100-resnet50-synthetic-b64-8gpu"]
    # precision rules are ordered: "fp32 (... no fp16 option ...)" is fp32; TF32 and AMP rows keep theirs
    assert by_id["tfbench-dgx1-p100-vgg16-synthetic-b64-1gpu"].dtype == "fp32"
    assert by_id["dle-pyt-resnet50_v1.5-dgxa100-80-tf32-1gpu"].dtype == "tf32"
    assert by_id["dle-pyt-resnet50_v1.5-dgxa100-80-amp-8gpu"].dtype == "fp16"
    assert by_id["dlperf-resnet50_v1.5-oneflow-fp32-32gpu"].profile == "v100-dgx1-1edr-8gpu.published.yaml"
    # MLPerf's MXNet ResNet reduces every gradient in one group after backward (MXNET_HOROVOD_NUM_GROUPS=1)
    assert by_id["mlperf-v0_6-nvidia-dgx1_n130_ngc19_05_mxnet"].framework == "no-overlap"
    assert by_id["dle-pyt-resnet50_v1.5-dgx1-16-fp32-8gpu"].framework == "ddp"


def test_rows_above_64_gpus_carry_their_evidence_and_map_as_stated(corpus, records):
    """Issue 38 item 4: every MLPerf row added above 64 GPUs names its logs and commit and keeps, per run, the
    epochs and the rate it was computed from; the mapping gives each a profile or a stated reason."""
    added = [r for r in records if "evidence" in r]
    assert len(added) == 44 and all(r["num_gpus"] > 64 for r in added)
    for r in added:
        runs = [p for p in r["evidence"]["per_run"] if p.get("used", True)]
        assert r["source"]["commit"] in r["source"]["url"] and r["evidence"]["example"]["file"].endswith(".txt")
        assert len(runs) == r["measured"]["n_runs"]
        assert r["measured"]["value"] == pytest.approx(statistics.median(p["throughput"] for p in runs), rel=1e-4)
        assert r["derived"]["seconds_per_iteration"] == pytest.approx(r["global_batch"] / r["measured"]["value"],
                                                                      rel=1e-3)
    rules = load_rules()
    by_id = {r.id: interpret(r, rules) for r in corpus}
    kept = [s for rid, s in by_id.items() if isinstance(s, Setup) and s.run.num_gpus > 64]
    assert len(kept) >= 47
    cosmo = by_id["mlperfhpc-v1_0-nvidia-dgxa100_n128_ngc21_09_mxnet"]
    assert (cosmo.model, dict(cosmo.knobs), cosmo.framework, cosmo.dtype) == ("cosmoflow", {"image": 128}, "no-overlap",
                                                                              "fp16")
    abci = by_id["mlperfhpc-v0_7-fujitsu-abci_512xv100_tensorflow_closed"]
    assert abci.profile == "v100-abci-4gpu.published.yaml"
    assert dict(abci.knobs) == {"image": 128, "kernel": 2}  # v0.7's reference CosmoFlow: 2 x 2 x 2 convolutions
    assert by_id["mlperf-v0_5-nvidia-dgx1_multi_ngc18_11_mxnet"].profile == "v100-dgx1-8gpu.published.yaml"
    eos = by_id["mlperf-v4_0-nvidia-eos_n316_ngc24_04_mxnet"]
    assert (eos.profile, eos.framework, eos.dtype) == ("h100-dgx-8gpu.published.yaml", "no-overlap", "fp16")
    hpe = by_id["mlperf-v2_1-hpe-xl675d_a100_sxm_80gb_16n_mxnet"]  # 4 HDR rails per 8-GPU A100-80GB node
    assert (hpe.profile, hpe.framework, hpe.dtype) == ("a100-80gb-4hdr-8gpu.published.yaml", "no-overlap", "fp16")
    juwels = by_id["mlperfhpc-v1_0-helmholtzai-juwelsbooster_n1024_mxnet1_9"]  # JSC: NVLink3 all-to-all, 4 HDR
    assert juwels.profile == "a100-sxm-4gpu-4hdr.published.yaml"
    # Perlmutter (NERSC): two Slingshot 10 NICs a node in 2021 (LBNL's v1.0 runs), four Slingshot 11 since (v3.0)
    assert by_id["mlperfhpc-v1_0-lbnl-perlmutter_256x4_ngc21_09_mxnet"].profile == "a100-sxm-4gpu-2ss10.published.yaml"
    assert by_id["mlperfhpc-v3_0-hpe_lbnl-perlmutter_128x4"].profile == "a100-sxm-4gpu-4ss11.published.yaml"
    for rid, words in [
                       ("mlperfhpc-v2_0-helmholtzai-horeka_n512_pytorch1_13", "4 x HDR200 per 4-GPU"),
                       ("mlperfhpc-v0_7-cscs-daint_gpu_n128_tf2_2_0", "P100-PCIE per node")]:
        assert isinstance(by_id[rid], Skipped) and words in by_id[rid].reason


def test_transcribed_mlperf_logs_give_their_rows_figures(records):
    """A row read from a transcription of its logs (no git mirror of the repository) is what the script computes from
    that transcription: the same medians, range and per-run figures."""
    import importlib.util
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    spec = importlib.util.spec_from_file_location("mlperf_scale_rows", scripts / "mlperf_scale_rows.py")
    rows = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rows)
    rec = next(r for r in records if r["id"] == "mlperf-v4_0-nvidia-eos_n316_ngc24_04_mxnet")
    ex = rows.extract_submission(str(scripts / "mlperf_extracts" / "v4_0_nvidia_eos_n316_ngc24_04_mxnet_resnet.tsv"))
    assert rec["measured"]["value"] == round(ex["median"], 1)
    assert rec["measured"]["range_over_runs"] == [round(x) for x in ex["range"]]
    assert [p["throughput"] for p in rec["evidence"]["per_run"]] == [round(r["throughput_logged"], 1)
                                                                      for r in ex["runs"].values()]
    assert all(r["global_batch"] == rec["global_batch"] for r in ex["runs"].values())


def test_unknown_model_is_skipped_with_its_reason(corpus):
    run = corpus[0]
    odd = type(run)(**{**run.__dict__, "model": "mobilenet_v9"})
    result = interpret(odd, load_rules())
    assert isinstance(result, Skipped) and "mobilenet_v9" in result.reason


def test_mlperf_hpc_rows_read_their_own_datasets(corpus):
    """CosmoFlow rows read MLPerf HPC's 16 MiB samples, staged to the nodes; DeepCAM rows its 64.5 MB ones, staged by
    NVIDIA's implementation and read from the shared file system by the reference one (ThetaGPU, Longhorn); ImageNet
    rows keep ImageNet."""
    from predictor.at_scale import DATASETS

    rules = load_rules()
    setups = [s for s in (interpret(r, rules) for r in corpus) if isinstance(s, Setup)]
    cosmo = [s for s in setups if s.model == "cosmoflow"]
    assert cosmo and all(s.dataset == "cosmoflow" and s.staged for s in cosmo)
    deepcam = {s.run.id: s for s in setups if s.model == "deepcam"}
    assert len(deepcam) == 18 and all(s.dataset == "deepcam" and dict(s.knobs) == {"image": 768} for s in deepcam.values())
    assert [rid for rid, s in deepcam.items() if not s.staged] == [
        "mlperfhpc-v1_0-anl-thetagpu_n128_pt1_9_0_deepcam", "mlperfhpc-v1_0-tacc-longhorn_pytorch_deepcam",
        "mlperfhpc-v2_0-tacc-longhorn_pytorch_deepcam"]
    assert all(s.dataset == "imagenet" for s in setups if s.model not in ("cosmoflow", "deepcam"))
    assert DATASETS["cosmoflow"].sample_bytes == 16 * 2 ** 20 and DATASETS["cosmoflow"].files_per_sample == 2
    assert DATASETS["deepcam"].sample_bytes == pytest.approx(64.5e6, rel=1e-3)
    # --disable_comm_overlap: the all-reduce after backward; the reference code's DDP overlaps it
    assert deepcam["mlperfhpc-v1_0-nvidia-dgxa100_n64_ngc21_09_pytorch_deepcam"].framework == "no-overlap"
    assert deepcam["mlperfhpc-v1_0-anl-thetagpu_n128_pt1_9_0_deepcam"].framework == "ddp"
    assert deepcam["mlperfhpc-v1_0-anl-thetagpu_n128_pt1_9_0_deepcam"].profile == "a100-dgx-8gpu.published.yaml"
    abci = deepcam["mlperfhpc-v0_7-fujitsu-abci_1024xv100_pytorch_closed_deepcam"]  # staged to node-local NVMe
    assert (abci.profile, abci.framework, abci.staged) == ("v100-abci-4gpu.published.yaml", "ddp", True)


def test_buckets_and_accuracy():
    assert [gpu_bucket(p) for p in (1, 2, 8, 9, 64, 65, 512, 513, 4096)] == [
        "1", "2-8", "2-8", "9-64", "9-64", "65-512", "65-512", ">512", ">512"]
    assert accuracy(1.1, 1.0) == pytest.approx(0.9) and accuracy(3.0, 1.0) == pytest.approx(-1.0)


def _result(corpus, rid, measured, predicted):
    setup = interpret(next(r for r in corpus if r.id == rid), load_rules())
    run = type(setup.run)(**{**setup.run.__dict__, "measured_s": measured})
    setup = Setup(**{**setup.__dict__, "run": run})
    return RowResult(setup=setup, predicted_s=predicted, interval_s=(predicted * 0.9, predicted * 1.1))


def test_scaling_efficiency_error_by_hand(corpus):
    """One series (same source, model, precision, framework, system, batch per GPU) at 1, 8 and 16 GPUs:
    eff(p) = t(1) / t(p) at a fixed batch per GPU."""
    rows = [_result(corpus, "dlperf-resnet50_v1.5-ngc_pytorch-fp32-1gpu", 1.0, 1.0),
            _result(corpus, "dlperf-resnet50_v1.5-ngc_pytorch-fp32-8gpu", 1.25, 1.0),   # eff 0.8 vs 1.0
            _result(corpus, "dlperf-resnet50_v1.5-ngc_pytorch-fp32-16gpu", 2.0, 1.6)]   # eff 0.5 vs 0.625
    errors = scaling_errors(rows)
    assert errors == pytest.approx({"dlperf-resnet50_v1.5-ngc_pytorch-fp32-8gpu": 20.0,
                                    "dlperf-resnet50_v1.5-ngc_pytorch-fp32-16gpu": 12.5})
    report = summarise(rows, [], extra_predictions={"other": lambda r: r.measured_s})
    assert report["overall_accuracy"] == pytest.approx((1.0 + 0.8 + 0.8) / 3)
    assert report["by_gpu_bucket"]["9-64"] == {"rows": 1, "accuracy": pytest.approx(0.8)}
    assert report["other"]["overall_accuracy"] == pytest.approx(1.0)
    assert report["interval_coverage"] == {"rows": 3, "share_inside": pytest.approx(1 / 3)}
    # another model's predictions get their own scaling error: the measured times themselves score 0 points
    assert report["other"]["scaling_efficiency_error_points"] == {"rows": 2, "median": 0.0, "mean": 0.0}
    assert scaling_errors(rows, lambda r: {1: 1.0, 8: 1.0, 16: 4.0}[r.run.num_gpus]) == pytest.approx(
        {"dlperf-resnet50_v1.5-ngc_pytorch-fp32-8gpu": 20.0, "dlperf-resnet50_v1.5-ngc_pytorch-fp32-16gpu": 25.0})


def test_cli_published_json_on_a_small_corpus(tmp_path, capsys, records):
    ids = ("dle-pyt-resnet50_v1.5-dgx1-16-fp32-1gpu", "dle-pyt-resnet50_v1.5-dgx1-16-fp32-8gpu",
           "dlperf-resnet50_v1.5-ngc_pytorch-fp32-32gpu", "horovod-readme-vgg16-512gpu")
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump([r for r in records if r["id"] in ids]))
    out = tmp_path / "report.json"
    assert main(["validate", "--published", str(small), "--json", "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(out.read_text())
    assert doc["rows_validated"] == 3 and doc["rows_skipped"] == 1
    assert doc["skipped"][0]["id"] == "horovod-readme-vgg16-512gpu" and "scaling efficiency" in doc["skipped"][0]["reason"]
    assert set(doc["by_gpu_bucket"]) == {"1", "2-8", "9-64"} and set(doc["by_source"]) == {"dle", "dlperf"}
    assert 0.5 < doc["overall_accuracy"] <= 1.0
    for row in doc["rows"]:
        assert row["predicted_s"] > 0 and row["datasheet_predicted_s"] > 0 and row["loso_predicted_s"] > 0
    assert doc["scaling_efficiency_error_points"]["rows"] == 1


def _fake_rows(corpus, n_per_source=12, effect=0.0, seed=0):
    """Rows of four sources whose measured time is the analytical one times exp(effect * log2(gpus)) (+ noise)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rules = load_rules()
    base = [s for s in (interpret(r, rules) for r in corpus) if isinstance(s, Setup)]
    rows, analytical = [], {}
    for k, source in enumerate(("a", "b", "c", "d")):
        for i in range(n_per_source):
            setup = base[(k * n_per_source + i) * 3 % len(base)]
            t = 0.1 * (1 + i % 5)
            measured = t * float(np.exp(effect * np.log2(setup.run.num_gpus) + 0.01 * rng.standard_normal()))
            run = type(setup.run)(**{**setup.run.__dict__, "id": f"{source}{i}", "source": source, "measured_s": measured})
            rows.append(RowResult(setup=Setup(**{**setup.__dict__, "run": run}), predicted_s=t, interval_s=(t, t),
                                  terms={"comm_exposed_s": 0.0, "comm_hidden_s": 0.0, "update_s": 0.0}))
            analytical[run.id] = t
    return rows, analytical


def test_correction_is_learned_when_it_transfers_and_off_when_it_does_not(corpus):
    from predictor.published.correction import loso_corrected

    rows, analytical = _fake_rows(corpus, effect=0.1)
    corrected, used = loso_corrected(rows, analytical)
    assert all(v is not None for v in used.values())
    err = lambda pred: sum(abs(pred[r.run.id] - r.measured_s) / r.measured_s for r in rows)
    assert err(corrected) < 0.5 * err(analytical)
    rows, analytical = _fake_rows(corpus, effect=0.0, seed=3)  # nothing to learn: the gate keeps it off
    corrected, used = loso_corrected(rows, analytical)
    assert all(v is None for v in used.values()) and corrected == analytical


def test_framework_blind_ceiling_by_hand():
    """Twins 1 s and 2 s: the best shared prediction is 1 s (mean accuracy 0.75; 1.5 s gives 0.625, 2 s 0.5); a row
    without a twin counts 1; another system or batch is no twin."""
    from types import SimpleNamespace as NS

    from predictor.published.report import framework_blind_ceiling

    def row(source, measured, profile="v100.yaml", batch=32, framework="ddp"):
        setup = NS(profile=profile, model="bert", knobs=(("layers", 2),), dtype="fp32", plan=(), framework=framework)
        return NS(run=NS(source=source, num_gpus=8, batch_per_gpu=batch), setup=setup, measured_s=measured)

    rows = [row("a", 1.0), row("a", 2.0, framework="horovod"), row("a", 5.0, profile="a100.yaml"),
            row("a", 9.0, batch=64), row("b", 3.0)]
    got = framework_blind_ceiling(rows)
    assert got["a"]["rows"] == 4 and got["a"]["rows_with_twins"] == 2
    assert got["a"]["ceiling"] == pytest.approx((1.0 + 0.5 + 1.0 + 1.0) / 4)
    assert got["b"] == {"rows": 1, "rows_with_twins": 0, "ceiling": 1.0}
    by_system = framework_blind_ceiling(rows, lambda r: r.setup.profile)
    assert by_system["v100.yaml"]["ceiling"] == pytest.approx((1.0 + 0.5 + 1.0 + 1.0) / 4)
    assert by_system["a100.yaml"] == {"rows": 1, "rows_with_twins": 0, "ceiling": 1.0}


def test_the_rows_stating_batch_norm_groups_run_them():
    """The two MLPerf ResNet rows whose configs set BN_GROUP=2, and the nine DeepCAM rows of one sample per GPU
    (MLLOG batchnorm_group_size 2), state bn_group: 2, and their plans carry it (Plan.bn_group)."""
    corpus = load_corpus(CORPUS_DIR / "cnn_runs.yaml")
    grouped = {r.id: r.extra["bn_group"] for r in corpus if r.extra.get("bn_group")}
    resnet = {rid: g for rid, g in grouped.items() if not rid.endswith("_deepcam")}
    assert resnet == {"mlperf-v1_1-nvidia-dgxa100_n540_ngc21_09_mxnet": 2, "mlperf-v4_0-nvidia-eos_n316_ngc24_04_mxnet": 2}
    deepcam = {r.id: r.extra.get("bn_group") or 1 for r in corpus if r.id.endswith("_deepcam")}
    assert all(g == (2 if r.batch_per_gpu == 1 else 1) for r in corpus if r.id in deepcam for g in [deepcam[r.id]])
    assert sum(g == 2 for g in deepcam.values()) == 9
    rules = load_rules()
    setups = [s for s in (interpret(r, rules) for r in corpus if r.id in grouped) if isinstance(s, Setup)]
    assert len(setups) == 2 + 9 and {s.bn_group for s in setups} == {2}
