"""The published systems' figures as data (calibrate.systems): the shipped files load, and a bad file ends in one
line naming the file and the field."""
import shutil

import pytest

from calibrate.systems import DATA_DIR, load_figures, load_gpus, load_nodes
from profiler.errors import UserError


def test_the_shipped_files_load_and_every_gpu_is_used():
    gpus, nodes = load_gpus(), load_nodes()
    assert len(nodes) == len({n.file for n in nodes}) >= 12
    assert {n.gpu.name for n in nodes} == {g.name for g in gpus.values()}
    a100 = gpus["A100-SXM4-40GB"]
    assert a100.achievable_fraction["bfloat16"].value == 271.2 / 312  # written as the quotient [271.2, 312]
    pcie = gpus["A100-PCIe-40GB"]  # like: A100-SXM4-40GB, its own fractions and no GEMM curve
    assert pcie.peak_flops == a100.peak_flops and pcie.gemm_by_size == {} and a100.gemm_by_size
    dgx1 = next(n for n in nodes if n.file == "v100-dgx1-8gpu.published.yaml")
    assert dgx1.base_latency_s == load_figures()["nccl_base"]  # a node names a shared figure


def _copy(tmp_path):
    folder = tmp_path / "published"
    shutil.copytree(DATA_DIR, folder)
    return folder


@pytest.mark.parametrize("file, old, new, message", [
    ("gpus.yaml", "  clock_mhz: 1530\n", "  clock_mhz: -1\n", "gpus.yaml: field 'V100-SXM2-16GB.clock_mhz'"),
    ("gpus.yaml", "value: [97.4, 125]", "value: [97.4, 0]", "field 'V100-SXM2-16GB.achievable_fraction.float16.value'"),
    ("gpus.yaml", "low: 12.0e+9", "low: 13.0e+9", "field 'V100-SXM2-16GB.h2d_bytes_per_s'"),
    ("gpus.yaml", "  like: A100-SXM4-40GB\n", "  like: A200\n", "field 'A100-SXM4-80GB.like': 'A200'"),
    ("nodes.yaml", "  gpu: H100-SXM5-80GB\n", "  gpu: H200\n", "nodes.yaml: field 'h100-dgx-8gpu.gpu': 'H200'"),
    ("nodes.yaml", "  inter_step_latency_s: nccl_net_step\n", "  inter_step_latency_s: nccl_slow\n",
     "field 'v100-abci-4gpu.inter_step_latency_s': 'nccl_slow' is not a figure"),
    ("nodes.yaml", "  cpu_cores: 40\n", "  cpu_cores: 40\n  cpu_cors: 4\n", "field 'v100-abci-4gpu.cpu_cors'"),
    ("figures.yaml", "kernel_launch:", "launch:", "figures.yaml: field 'kernel_launch': missing"),
    ("nodes.yaml", "    4: {value: 85.36e+9,", "    8: {value: 85.36e+9,",
     "field 'v100-dgx1-8gpu': allreduce_bus_bytes_per_s_by_group: group size 8 is not between 2 and the node's 7"),
    ("gpus.yaml", "{table: sm_90, column: tf32,", "{table: sm_91, column: tf32,",
     "field 'H100-SXM5-80GB.gemm_grid.tf32': table 'sm_91' is not one of sm_90"),
    ("gpus.yaml", "{table: sm_90, column: tf32,", "{table: sm_90, column: fp8,",
     "field 'H100-SXM5-80GB.gemm_grid.tf32': column 'fp8' is not one of bfloat16"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_field(tmp_path, file, old, new, message):
    folder = _copy(tmp_path)
    text = (folder / file).read_text()
    assert old in text
    (folder / file).write_text(text.replace(old, new, 1))
    with pytest.raises(UserError) as err:
        load_nodes(folder)
    assert message in str(err.value) and "\n" not in str(err.value) and str(folder) in str(err.value)


@pytest.mark.parametrize("new, message", [("    float64: {value: 1.0,", "missing: bfloat16"),
                                          ("    bf16: {value: 1.0,", "unknown dtype 'bf16'")])
def test_every_peak_needs_a_fraction_of_a_known_dtype(tmp_path, new, message):
    folder = _copy(tmp_path)
    text = (folder / "gpus.yaml").read_text()
    (folder / "gpus.yaml").write_text(text.replace("    bfloat16: {value: 1.0,", new, 1))
    with pytest.raises(UserError, match=f"V100-SXM2-16GB.*{message}"):
        load_gpus(folder)
