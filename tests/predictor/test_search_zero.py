"""`predictor search` tries sharded data parallelism (ZeRO 1, 2 and 3 = FSDP's full sharding) beside DDP, with and
without activation checkpointing: a model whose replicas do not fit whole is trained as FSDP, which the search
did not consider before (it offered only pipelines and 3-D layouts for such a model)."""
from predictor.api import _trace_zoo, load_cost_model, predict
from predictor.plan import Plan, ZERO_STAGES
from predictor.search import search
from predictor.search_space import candidates

H100 = "h100-dgx-8gpu.published"
KNOBS = {"layers": 4, "hidden": 1024, "heads": 16, "seq": 512}


def test_candidates_shard_the_data_replicas():
    """DDP and each ZeRO stage at every device count above one; HSDP (ZeRO 3 sharded inside each node) where the
    devices span whole nodes."""
    graph = _trace_zoo("gpt", None, KNOBS)
    seen = {(p.strategy, p.devices, p.zero_stage, p.shard_group)
            for p in candidates(graph, 16, range(1, 17), 8, "bf16", "adam")}
    for strategy in ("data", "data+recompute"):
        assert {(strategy, 8, z, 0) for z in (0,) + ZERO_STAGES} <= seen
        assert (strategy, 16, 3, 8) in seen and not {g for s, d, z, g in seen if s == strategy and d <= 8 and g}
    assert not {z for s, d, z, g in seen if d == 1 and s in ("serial", "serial+recompute") and z}


def test_a_cap_only_fsdp_meets_makes_it_the_answer():
    """Under a memory cap between the ZeRO-3 replica's memory and everything else's, the search's best is
    d8/zero3 (or its checkpointed variant), priced as `predictor run --zero 3` prices it."""
    graph = _trace_zoo("gpt", None, KNOBS)
    cm, _ = load_cost_model(H100)
    plan = Plan("data", devices=8, p_data=8, batch=16, devices_per_node=8, dtype="bf16", optimizer="adam")
    ddp, fsdp = predict(graph, plan, cm), predict(graph, Plan(**{**plan.__dict__, "zero_stage": 3}), cm)
    assert fsdp.memory_bytes < ddp.memory_bytes
    cap = (fsdp.memory_bytes + min(ddp.memory_bytes, fsdp.memory_bytes * 1.05)) / 2
    result = search(graph, cm, batch=16, max_devices=8, min_devices=8, dtype="bf16", optimizer="adam",
                    memory_cap_bytes=cap, top=3, strategies=("data", "recompute"))
    best = result.best[0]
    assert best.plan.zero_stage >= 1 and best.memory_bytes <= cap
    assert all(p.plan.zero_stage for p in result.best if p.plan.strategy == "data")


def test_search_family_flag_keeps_the_search_to_those_families(capsys):
    """`predictor search --family data --family recompute`: the plans a user who trains with FSDP can run."""
    import json

    from predictor.cli import main

    knobs = [x for k, v in KNOBS.items() for x in ("--model-arg", f"{k}={v}")]
    argv = ["search", "--profile", H100, "--model", "gpt", *knobs,
            "--dtype", "bf16", "--optimizer", "adam", "--batch", "16", "--max-gpus", "16", "--min-gpus", "8",
            "--top", "20", "--json"]
    assert main(argv + ["--family", "data", "--family", "recompute"]) == 0
    kinds = {p["plan"]["strategy"] for p in json.loads(capsys.readouterr().out)["predictions"]}
    assert kinds and kinds <= {"data", "data+recompute"}
    assert main(argv) == 0
    assert {p["plan"]["strategy"] for p in json.loads(capsys.readouterr().out)["predictions"]} - kinds
