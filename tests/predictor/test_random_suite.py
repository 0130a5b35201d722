"""Random-architecture validation (`predictor validate --suite random:N --seed S`): the generator is
deterministic, every net loads and lies inside the step window, the families and ranges are covered, the
strategies it requests are the ones the runner can run, the CLI refuses bad N and seeds with one line, the
specs and manifest are written beside --out, and the report's per-family, per-net and leave-one-family-out
figures. The end-to-end validation and the two-rank build of requested strategies are marked slow."""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from calibrate.shipped import shipped_profile
from predictor import random_report
from predictor.api import load_model
from predictor.cli import main
from predictor.runner.suite import MAX_RANDOM_NETS, load_suite, parse_strategy, random_suite_size
from predictor.suites import random_nets as rn
from profiler.errors import UserError
from profiler.profile import Machine, Profile, Provenance, Sample

PROFILE = str(shipped_profile("v100-abci-4gpu.published"))  # any profile works for the mechanics


@pytest.fixture(scope="module")
def nets():
    """50 nets of one seed (shared: drawing them reads every candidate through the layer-spec loader)."""
    return rn.random_nets(50, 0)


# ---- determinism ------------------------------------------------------------------------------------
def test_same_seed_same_nets_other_seed_other_nets():
    first, again = rn.random_nets(6, 7), rn.random_nets(6, 7)
    assert [n.text for n in first] == [n.text for n in again]
    assert [(n.batch, n.micro_batches, n.strategies) for n in first] == [(n.batch, n.micro_batches, n.strategies) for n in again]
    other = rn.random_nets(6, 8)
    assert [n.text for n in other] != [n.text for n in first]
    assert sum(a.text == b.text for a, b in zip(first, other)) <= 1
    # net i does not depend on N: a longer suite of the same seed starts with the same nets
    assert [n.text for n in rn.random_nets(3, 7)] == [n.text for n in first[:3]]


def test_generator_uses_no_global_random_state():
    import random

    random.seed(1)
    a = rn.random_nets(3, 5)
    random.seed(2)
    state = random.getstate()
    b = rn.random_nets(3, 5)
    assert [n.text for n in a] == [n.text for n in b]
    assert random.getstate() == state


def test_random_suite_returns_suite_and_specs(tmp_path):
    suite, specs = rn.random_suite(4, 2, tmp_path)
    nets = rn.random_nets(4, 2)
    assert specs == [n.spec for n in nets]
    assert suite.path == "random:4/seed=2"
    assert {r.model for r in suite.runs} == {str(tmp_path / n.file_name) for n in nets}


# ---- every net loads and is affordable ----------------------------------------------------------------
def test_every_net_loads_and_lies_inside_the_window(nets, tmp_path):
    paths = rn.write_specs(nets, tmp_path)
    for net, path in zip(nets, paths):
        assert path.name == net.file_name and hashlib.sha256(path.read_bytes()).hexdigest() == net.sha256
        graph = load_model(str(path), allow_code=False)
        step = graph.flops_per_sample * net.batch
        assert step == pytest.approx(net.step_flops)
        assert rn.MIN_STEP_FLOPS <= step <= rn.MAX_STEP_FLOPS, (net.index, step)
        activations = net.batch * rn.FP32_BYTES * sum(math.prod(l.output_shape) for l in graph.layers)
        assert activations == pytest.approx(net.activation_bytes) and activations <= rn.MAX_ACTIVATION_BYTES
        assert graph.params * rn.FP32_BYTES <= rn.MAX_PARAM_BYTES
        assert 2 <= net.batch <= 256 and net.batch % 2 == 0
        assert net.batch % net.micro_batches == 0


def test_window_constants_are_the_documented_rates():
    assert rn.MIN_STEP_FLOPS == pytest.approx(0.005 * 50e9)
    assert rn.MAX_STEP_FLOPS == pytest.approx(2.0 * 10e9)


# ---- coverage of families and ranges -----------------------------------------------------------------
def _ops(net) -> list[str]:
    return [layer["op"] for layer in net.spec["layers"]]


def test_families_and_ranges_are_covered(nets):
    families = Counter(n.family for n in nets)
    assert set(families) == set(rn.FAMILIES) and min(families.values()) >= 5, families
    for net in nets:
        ops = _ops(net)
        if net.family == "sequential-2d":
            assert "conv2d" in ops and "conv3d" not in ops and "add" not in ops
        elif net.family == "3d":
            assert "conv3d" in ops and len(net.spec["input"]) == 4 and "add" not in ops
        elif net.family == "residual-2d":
            assert "add" in ops
            names = [l["name"] for l in net.spec["layers"]]
            for add in (l for l in net.spec["layers"] if l["op"] == "add"):
                position = names.index(add["name"])
                assert len(add["inputs"]) == 2 and all(i in names[:position] for i in add["inputs"])
        else:  # mlp: the input flattened, then 2-5 linear layers
            assert ops[0] == "flatten" and not {"conv2d", "conv3d"} & set(ops)
            assert 2 <= ops.count("linear") <= 5
        assert ops[-1] == "linear"
    # residual blocks project the shortcut with a 1x1 conv when channels or stride change
    projections = [l for n in nets if n.family == "residual-2d" for l in n.spec["layers"]
                   if l["op"] == "conv2d" and "inputs" in l]
    assert projections and all(l["kernel"] == 1 for l in projections)
    kernels = Counter(k for n in nets for k in n.kernels)
    assert set(kernels) == {1, 3, 5, 7}
    strides = {l.get("stride", 1) for n in nets for l in n.spec["layers"] if l["op"] in ("conv2d", "conv3d")}
    assert strides == {1, 2}
    hidden = [w for n in nets for w in n.widths[:-1]]  # the classifier's width is the class count
    assert min(hidden) >= 3 and max(hidden) <= 1024
    assert min(hidden) <= 8 and max(hidden) >= 512, (min(hidden), max(hidden))
    all_ops = Counter(op for n in nets for op in _ops(n))
    for op in ("batchnorm", "maxpool", "avgpool", "relu", "flatten", "dropout"):
        assert all_ops[op], op
    batches = [n.batch for n in nets]
    assert min(batches) <= 8 and max(batches) >= 128
    assert any(net.family in ("sequential-2d", "residual-2d") and len(_ops(net)) > 1 and
               sum(op == "linear" for op in _ops(net)) >= 3 for net in nets), "no linear-heavy head"


def test_ranges_are_json_and_recorded(tmp_path, nets):
    record = rn.generator_record(nets[0], 0, 50, "x.json")
    assert json.loads(json.dumps(record))["ranges"]["width"] == [3, 1024]
    assert record["family"] == nets[0].family and record["spec_sha256"] == nets[0].sha256


# ---- requested strategies are runnable -----------------------------------------------------------------
def _spatial_check_of_the_runner(graph):
    """The runner's own spatial rule (SpatialReplica._check), without process groups."""
    from predictor.runner.spatial import SpatialReplica

    layers = [l for l in graph.layers if l.op not in ("dropout", "softmax_loss")]
    replica = object.__new__(SpatialReplica)
    replica.p_model = 2
    replica.split_count = next((i for i, l in enumerate(layers) if l.op in ("flatten", "linear")), len(layers))
    if replica.split_count in (0, len(layers)):
        raise UserError("no split part")
    replica._check(layers)


def test_requested_strategies_fit_the_runners_rules(nets):
    stricter = []
    for net in nets:
        graph = rn.spec_graph(net.spec)
        where = f"net {net.index} ({net.family})"
        assert set(net.strategies) | set(net.skipped) == set(rn.STRATEGIES), where
        assert not set(net.strategies) & set(net.skipped), where
        assert all(net.skipped.values()), where
        if net.family == "residual-2d":  # the runner runs nets with branches serially or data-parallel only
            assert {"serial", "serial+recompute", "data"} <= set(net.strategies), where
            assert all("branches" in net.skipped[s] for s in ("pipeline", "filter", "channel", "spatial")), where
            continue
        assert {"serial", "serial+recompute", "data", "pipeline"} <= set(net.strategies), where
        bn = rn.min_batchnorm_values(graph)
        if bn:  # batch norm needs 2 values per channel on every replica and micro-batch
            assert net.batch // 2 * bn >= 2 and net.batch // net.micro_batches * bn >= 2, where
        weights = [l for l in graph.layers if l.op in ("conv2d", "conv3d", "linear")]
        if "filter" in net.strategies:
            assert all(l.channels_out % 2 == 0 for l in graph.layers if l.op in ("conv2d", "conv3d", "linear", "batchnorm")), where
        else:
            assert any(l.channels_out % 2 for l in graph.layers if l.op in ("conv2d", "conv3d", "linear", "batchnorm")), where
        if "channel" in net.strategies:
            assert all(l.channels_out % 2 == 0 for l in weights[:-1]), where
        if net.family == "mlp":
            assert "spatial" in net.skipped
        elif net.family != "residual-2d":
            runner_ok = True
            try:
                _spatial_check_of_the_runner(graph)
            except UserError:
                runner_ok = False
            if "spatial" in net.strategies:
                assert runner_ok, where
            elif "'same' padding" in net.skipped["spatial"]:  # the runner's _check refuses the unpadded-conv case too
                assert not runner_ok, where
                stricter.append(net.index)
    assert stricter, "no net with an unpadded conv along the split dim (the case the runner now refuses)"
    assert sum("spatial" in n.strategies for n in nets) >= 3
    assert sum("filter" in n.strategies for n in nets) >= 20


def test_the_runner_refuses_no_generated_net(nets):
    for net in nets:
        assert net.runner_note == "", (net.index, net.family, net.runner_note)


def test_suite_runs_match_the_nets(tmp_path, nets):
    suite = rn.suite_of(nets[:10], 0, tmp_path)
    for net in nets[:10]:
        runs = [r for r in suite.runs if r.line == net.index + 1]
        assert [r.strategy + "".join("+" + a for a in r.addons) for r in runs] == list(net.strategies)
        for r in runs:
            assert parse_strategy(r.strategy + "".join("+" + a for a in r.addons), "x") == (r.strategy, r.addons)
            assert r.ranks == (1 if r.strategy == "serial" else 2) and r.batch == net.batch
            assert r.micro_batches == (net.micro_batches if r.strategy == "pipeline" else 1)
            assert r.model == str(tmp_path / net.file_name)


# ---- CLI --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,needle", [
    (["--suite", "random:0"], "random:N needs a whole number"),
    (["--suite", "random:x"], "random:N needs a whole number"),
    (["--suite", "random:"], "random:N needs a whole number"),
    (["--suite", f"random:{MAX_RANDOM_NETS + 1}"], "random:N needs a whole number"),
    (["--suite", "random:-3"], "random:N needs a whole number"),
    (["--suite", "random:2", "--seed", "-1"], "--seed"),
    (["--suite", "random:2", "--seed", "x"], "--seed"),
    (["--suite", "random:2", "--seed", str(2 ** 32)], "--seed"),
    (["--suite", "smoke", "--seed", "3"], "--seed applies to --suite random:N only"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, argv, needle):
    out = tmp_path / "runs.jsonl"
    code = main(["validate", "--profile", PROFILE, "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and needle in err, err
    assert not out.exists() and not list(tmp_path.iterdir())  # nothing written


def test_suite_size_parsing():
    assert random_suite_size("random:1") == 1 and random_suite_size(f"random:{MAX_RANDOM_NETS}") == MAX_RANDOM_NETS
    assert random_suite_size("smoke") is None and random_suite_size("random.yaml") is None
    with pytest.raises(UserError, match="generated by"):
        load_suite("random:3")


def test_specs_and_manifest_are_written_beside_out(tmp_path):
    from predictor.cmd_validate import random_suite

    out = tmp_path / "runs.jsonl"
    suite, nets, extras = random_suite(3, 4, str(out))
    folder = tmp_path / "runs.jsonl.random-nets" / "seed-4"
    manifest = json.loads((folder / "random-3.json").read_text())
    assert manifest["seed"] == 4 and manifest["n"] == 3 and len(manifest["nets"]) == 3
    assert manifest["ranges"] == json.loads(json.dumps(rn.RANGES))
    assert set(extras) == {r.model for r in suite.runs}
    for net, (model, extra) in zip(nets, sorted(extras.items())):
        generator = extra["generator"]
        assert generator["index"] == net.index and generator["seed"] == 4 and generator["n"] == 3
        spec = tmp_path / generator["spec"]  # relative to the dataset's folder
        assert spec.read_text() == net.text and Path(model).samefile(spec)
        assert hashlib.sha256(spec.read_bytes()).hexdigest() == generator["spec_sha256"]
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporaries left
    random_suite(3, 4, str(out))  # again: the same files, nothing else
    assert len(list(folder.iterdir())) == 4


# ---- report ------------------------------------------------------------------------------------------
def _row(net, family, label, predicted, measured):
    return {"model": f"{net}.json", "label": label, "scenario": f"{net}/p2", "predicted_time_s": predicted,
            "measured_time_s": measured, "generator": {"family": family}}


def test_family_accuracy_and_ranking_per_net():
    rows = [
        _row("a", "mlp", "serial", 1.0, 1.25), _row("a", "mlp", "data", 2.0, 1.0), _row("a", "mlp", "filter", 3.0, 2.0),
        _row("b", "3d", "serial", 1.0, 1.0), _row("b", "3d", "data", 0.5, 0.8), _row("b", "3d", "pipeline", 2.0, 1.5),
        _row("c", "3d", "serial", 1.0, 1.0),  # one strategy: no ranking
        {"model": "zoo", "label": "data", "predicted_time_s": 1.0, "measured_time_s": 1.0},  # not a random net
    ]
    fam = random_report.per_family_accuracy(rows)
    assert fam["mlp"] == (pytest.approx((0.8 + 0.0 + 0.5) / 3), 3)
    assert fam["3d"] == (pytest.approx((1.0 + (1 - 0.3 / 0.8) + (1 - 0.5 / 1.5) + 1.0) / 4), 4)
    ranking = {r["net"]: r for r in random_report.net_ranking(rows)}
    assert set(ranking) == {"a.json", "b.json"}
    assert ranking["a.json"]["predicted_best"] == "serial" and ranking["a.json"]["measured_best"] == "data"
    assert not ranking["a.json"]["agree"] and ranking["a.json"]["pairs_alike"] == 2 and ranking["a.json"]["pairs"] == 3
    assert ranking["b.json"]["agree"] and ranking["b.json"]["pairs_alike"] == 3
    text = random_report.render(rows, {"families": [], "note": "needs runs of >= 2 families"})
    assert "1/2 nets" in text and "5/6" in text and "not computed: needs runs" in text


@pytest.mark.slow  # fits three corrections (about 10 s on 2 cores)
def test_leave_one_family_out_holds_the_family_out_and_helps_when_the_residual_is_shared():
    """Three families with the same missing cost (1 ms per collective call): a correction trained on two
    must improve the third; the held-out family's runs never enter its training set."""
    from calibrate.correction_synthetic import synthetic_runs

    runs = [r for r in synthetic_runs(models=3, overhead_per_call_s=1e-3, seed=3) if r["devices"] in (2, 8)]
    families = {"net0": "sequential-2d", "net1": "3d", "net2": "mlp"}
    for r in runs:
        r["generator"] = {"family": families[r["model"]]}
        r["label"] = r["strategy"]
    lofo = random_report.leave_one_family_out(runs, make_profile())
    assert not lofo["note"] and [e["family"] for e in lofo["families"]] == sorted(families.values())
    for entry in lofo["families"]:
        assert "error" not in entry, entry
        assert entry["runs"] + entry["train_runs"] == len(runs) and entry["runs"] == len(runs) // 3
        assert entry["corrected"] > entry["analytical"] + 0.02, entry
    one = random_report.leave_one_family_out([r for r in runs if r["model"] == "net0"], make_profile())
    assert one["families"] == [] and ">= 2 families" in one["note"]


def make_profile() -> Profile:
    return Profile(schema_version=1, machine=Machine(hostname="node-a", cpu_cores=2), created="2026-12-01T12:00:00+00:00",
                   provenance=Provenance(kind="calibrated", source="test"),
                   samples=[Sample(benchmark="gemm", device="cpu", threads=1, times_s=[1e-3, 1.1e-3], flops=2e6)],
                   coefficients={"compute": {"gemm": {"fp32": 1.5e10}}})


# ---- measured (slow) ------------------------------------------------------------------------------------
def _build_and_step(rank, world, device, emit, cases):
    """Each case: build the replica the runner would, take its batch slice, one forward + backward + sync."""
    from predictor.runner.build import build_replica
    from predictor.runner.nets import synthetic_batch

    for index, (cfg, graph) in enumerate(cases):
        replica = build_replica(cfg, graph, device)
        x, y = replica.local_batch(*synthetic_batch(graph, cfg.batch, seed=index))
        loss = replica.forward(x, y)
        replica.backward(loss)
        replica.sync_grads()
        emit((index, rank))


@pytest.mark.slow
def test_requested_two_rank_strategies_build_and_step():
    """The cheapest chain nets of every family: each requested strategy builds on 2 gloo ranks and takes a
    step (the runner refuses what it cannot run with a UserError, which spawn_ranks re-raises here)."""
    from predictor.runner.build import build_replica
    from predictor.runner.config import RunConfig
    from predictor.runner.launch import spawn_ranks
    from predictor.runner.nets import synthetic_batch

    pool = [n for n in rn.random_nets(40, 1) if not n.runner_note]
    chosen = []
    for family in ("sequential-2d", "3d", "mlp"):
        chosen += sorted((n for n in pool if n.family == family), key=lambda n: n.step_flops)[:2]
    chosen += sorted((n for n in pool if "spatial" in n.strategies and n not in chosen), key=lambda n: n.step_flops)[:2]
    assert len(chosen) == 8
    cases = []
    for net in chosen:
        graph = rn.spec_graph(net.spec)
        for strategy in net.strategies:
            base, _, addon = strategy.partition("+")
            cfg = RunConfig(net.file_name, base, 1 if base == "serial" else 2, net.batch,
                            micro_batches=net.micro_batches if base == "pipeline" else 1,
                            recompute_segments=2 if addon == "recompute" else 0)
            if base == "serial":  # one rank: in this process
                replica = build_replica(cfg, graph)
                loss = replica.forward(*synthetic_batch(graph, cfg.batch, seed=0))
                replica.backward(loss)
            else:
                cases.append((cfg, graph))
    assert {cfg.strategy for cfg, _ in cases} >= {"data", "pipeline", "filter", "channel", "spatial"}
    reported = Counter(index for index, _ in spawn_ranks(2, _build_and_step, (cases,)))
    assert reported == {i: 2 for i in range(len(cases))}


@pytest.mark.slow
def test_validate_random_suite_end_to_end(tmp_path, capsys):
    out = tmp_path / "runs.jsonl"
    code = main(["validate", "--profile", PROFILE, "--suite", "random:1", "--seed", "3", "--out", str(out),
                 "--iterations", "1", "--warmup", "0"])
    assert code == 0
    net = rn.random_nets(1, 3)[0]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    expected = [s for s in net.strategies] if not net.runner_note else []
    assert [r["label"] for r in rows] == expected
    for row in rows:
        generator = row["generator"]
        assert (generator["name"], generator["seed"], generator["n"], generator["index"]) == ("random", 3, 1, 0)
        assert generator["family"] == net.family and generator["ranges"] == json.loads(json.dumps(rn.RANGES))
        spec = tmp_path / generator["spec"]
        assert hashlib.sha256(spec.read_bytes()).hexdigest() == generator["spec_sha256"] == net.sha256
        assert load_model(str(spec)).flops_per_sample == row["model_summary"]["flops_per_sample"]
        assert row["suite"] == "random:1/seed=3" and row["measured_time_s"] > 0 and row["predicted_time_s"] > 0
    text = capsys.readouterr().out
    assert "random nets: mean accuracy per family" in text and "ranking agreement per net" in text
    assert "leave one family out" in text and "not computed" in text  # one net: one family
