"""Calibrated extrapolation: collectives measured at <= 8 nodes of a known fabric are fitted, and the fit
predicts 64-node allreduce times (simulated measurements; no cluster needed)."""
import numpy as np
import pytest

from calibrate.collective_model import bus_factor, latency_steps, tree_latency_steps
from calibrate.cost_model import ProfileCostModel
from calibrate.fabric import contention
from calibrate.fit import fit_coefficients
from profiler.profile import GPUInfo, Machine, Profile, Provenance, SCHEMA_VERSION, Sample

PER_NODE = 8
TRUE = dict(base=5.6e-6, step=2.0e-6, inter_step=14e-6, intra_bw=130e9, inter_bw=12.5e9, leaf=4, ratio=3.0)


def true_time(size: float, nodes: int) -> float:
    """The simulated fabric: NCCL's ring/tree latency terms and the contention of calibrate.fabric."""
    p = PER_NODE * nodes
    algorithms = [latency_steps("allreduce", p, nodes), tree_latency_steps("allreduce", p, nodes)]
    alpha = TRUE["base"] + min(a * TRUE["step"] + b * TRUE["inter_step"] for a, b in algorithms)
    if nodes == 1:
        return alpha + size * bus_factor("allreduce", p) / TRUE["intra_bw"]
    c = contention(nodes, TRUE["leaf"], TRUE["ratio"])
    return alpha + size * bus_factor("allreduce", p) * c / TRUE["inter_bw"]


def simulated_profile(node_counts, seed=0) -> Profile:
    rng = np.random.default_rng(seed)
    samples = []
    for nodes in node_counts:
        for size in 2.0 ** np.arange(12, 31, 2):
            t = true_time(size, nodes)
            samples.append(Sample(benchmark="allreduce", variant="throughput", device="cuda:0", dtype="float32",
                                  threads=1, params={"size_bytes": size, "group": {"size": PER_NODE * nodes, "nodes": nodes}},
                                  times_s=list(t * (1 + 0.01 * rng.standard_normal(5)))))
    gpus = [GPUInfo(name="simulated")] * PER_NODE
    machine = Machine(hostname="sim", cpu_model="sim", cpu_cores=64, memory_bytes=1e12, gpus=gpus,
                      gpus_per_node=PER_NODE, nodes=max(node_counts), device_memory_bytes=80e9)
    return Profile(schema_version=SCHEMA_VERSION, machine=machine, provenance=Provenance(kind="calibrated", source="sim"),
                   created="2026-12-01T00:00:00+00:00", samples=samples)


@pytest.fixture(scope="module")
def fitted():
    coefficients = fit_coefficients(simulated_profile(range(1, 9)))
    return coefficients, ProfileCostModel(coefficients, name="sim", device_memory_bytes=80e9,
                                          devices_per_node=PER_NODE, provenance="calibrated")


def test_fit_recovers_the_fabric(fitted):
    coefficients, _ = fitted
    fabric = coefficients.fabric
    assert fabric is not None and fabric.nodes_per_leaf == TRUE["leaf"]
    assert fabric.oversubscription == pytest.approx(TRUE["ratio"], rel=0.05)
    inter = coefficients.links["allreduce"]["inter"]
    bw = inter.bus_bandwidth_bytes_per_s
    assert bw.low <= TRUE["inter_bw"] * 1.02 and bw.high >= TRUE["inter_bw"] * 0.98
    assert bw.value == pytest.approx(TRUE["inter_bw"], rel=0.03)


@pytest.mark.parametrize("size", [2.0 ** 20, 2.0 ** 26, 2.0 ** 30])
def test_64_node_allreduce_within_10_percent(fitted, size):
    _, cm = fitted
    predicted = cm.collective_time_s("allreduce", size, PER_NODE * 64, 64)
    assert predicted == pytest.approx(true_time(size, 64), rel=0.10)


@pytest.mark.slow  # a fabric fit over simulated node counts
def test_without_contention_the_fit_says_one_switch():
    saved = dict(TRUE)
    TRUE["ratio"] = 1.0
    try:
        coefficients = fit_coefficients(simulated_profile(range(1, 9), seed=1))
    finally:
        TRUE.update(saved)
    assert coefficients.fabric.nodes_per_leaf is None and coefficients.fabric.oversubscription == 1.0


def test_two_node_counts_are_not_enough():
    coefficients = fit_coefficients(simulated_profile([1, 2, 4]))
    assert coefficients.fabric is None
