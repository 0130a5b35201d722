"""`profiler import-nccl-tests`: text (plain and -I 1) and JSON (-J) nccl-tests output into Samples.
The files in tests/data/nccl_tests/ are laid out exactly as nccl-tests v2.17 prints them (src/util.cu);
their figures are synthetic."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from paraoracle.cli import profiler_main as main
from profiler.comm.factors import busbw_factor
from profiler.comm.nccl_tests import read_nccl_tests
from profiler.errors import UserError
from profiler.profile import load_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
ALLREDUCE = DATA / "all_reduce_perf_8gpu.txt"
ALLGATHER = DATA / "all_gather_perf_2node_I1.txt"
ALLTOALL = DATA / "alltoall_perf_4gpu.json"


def result_rows(path):
    return [line.split() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_plain_text_rows_become_two_samples_each():
    samples, run = read_nccl_tests(ALLREDUCE)
    rows = result_rows(ALLREDUCE)
    assert len(samples) == 2 * len(rows) and run.program == "all_reduce_perf"
    first_out, first_in = samples[0], samples[1]
    assert first_out.benchmark == "allreduce" and first_out.variant == "throughput"
    assert (first_out.params["placement"], first_in.params["placement"]) == ("out_of_place", "in_place")
    assert first_out.params["size_bytes"] == int(rows[0][0]) and first_out.params["count"] == int(rows[0][1])
    assert first_out.times_s == [pytest.approx(float(rows[0][5]) * 1e-6)]
    assert first_in.times_s == [pytest.approx(float(rows[0][9]) * 1e-6)]
    group = first_out.params["group"]
    assert group == {"size": 8, "ranks": list(range(8)), "hosts": ["node017"], "nodes": 1, "kind": "intra"}
    assert first_out.dtype == "float32" and first_out.device == "cuda"
    assert first_out.extra["source"] == str(ALLREDUCE) and first_out.extra["source_line"] == 18


def test_busbw_in_the_file_matches_our_factors():
    """Every row's busbw is our factor x its algbw, to the rounding of the printed figures (2 decimals in GB/s:
    half a unit on busbw, and the factor x half a unit on algbw)."""
    checked = {}
    for path in (ALLREDUCE, ALLGATHER, ALLTOALL):
        samples, _ = read_nccl_tests(path)
        for s in samples:
            factor = busbw_factor(s.benchmark, s.params["group"]["size"])
            rounding_bytes_per_s = 0.005e9 * (1 + factor)
            assert s.extra["busbw_bytes_per_s"] == pytest.approx(factor * s.extra["algbw_bytes_per_s"],
                                                                 abs=rounding_bytes_per_s), (path.name, s.params)
            checked[path.name] = checked.get(path.name, 0) + 1
    assert checked == {ALLREDUCE.name: 48, ALLGATHER.name: 12, ALLTOALL.name: 10}  # every sample of every file


def test_per_iteration_columns_and_program_from_file_name():
    samples, run = read_nccl_tests(ALLGATHER)
    assert run.program == "all_gather_perf" and {s.benchmark for s in samples} == {"allgather"}
    group = samples[0].params["group"]
    assert group["size"] == 2 and group["nodes"] == 2 and group["kind"] == "inter"
    row = result_rows(ALLGATHER)[0]
    assert samples[0].extra["per_iteration_min_s"] == pytest.approx(float(row[9]) * 1e-6)
    assert samples[0].extra["per_iteration_cv"] == pytest.approx(float(row[12]) / 100)
    assert samples[1].times_s == [pytest.approx(float(row[13]) * 1e-6)]


def test_json_keeps_every_per_iteration_time():
    samples, run = read_nccl_tests(ALLTOALL)
    doc = json.loads(ALLTOALL.read_text())
    assert len(samples) == 2 * len(doc["results"]) and run.program == "alltoall_perf"
    first = doc["results"][0]["out_of_place_per_iter"]["times_us"]
    assert samples[0].times_s == pytest.approx([t * 1e-6 for t in first])
    assert samples[0].params["group"]["size"] == 4 and samples[0].benchmark == "alltoall"


def test_cli_writes_a_new_profile_and_merges_into_one(tmp_path, capsys):
    out = tmp_path / "nccl.yaml"
    assert main(["import-nccl-tests", str(ALLREDUCE), str(ALLTOALL), "--out", str(out)]) == 0
    profile = load_profile(out)
    assert len(profile.samples) == 2 * len(result_rows(ALLREDUCE)) + 10
    assert profile.machine.hostname == "node017" and profile.machine.gpus_per_node == 8
    assert profile.machine.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert main(["import-nccl-tests", str(ALLGATHER), "--into", str(out)]) == 0
    assert main(["import-nccl-tests", str(ALLGATHER), "--into", str(out)]) == 0  # same file again: replaced
    merged = load_profile(out)
    assert len(merged.samples) == len(profile.samples) + 12
    assert "replacing 12" in capsys.readouterr().out
    assert main(["import-nccl-tests", str(ALLREDUCE), "--out", str(out)]) == 2  # exists, no --force


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("    15.79", "     oops", 1), r":18: column 'time' is 'oops'"),
    # a negative size had been taken for chatter (the row starts with '-') and skipped
    (lambda t: t.replace("           8             2", "          -8             2", 1), r":18: column 'size' is -8"),
    (lambda t: t.replace("       0    16.13    0.00    0.00       0", "", 1), r":18: expected at least 13 columns, found 8"),
    (lambda t: "\n".join(l for l in t.splitlines() if "Rank" not in l), "no '# Rank N"),
    (lambda t: "\n".join(l for l in t.splitlines() if not l.startswith("  ") and not l[:1].isdigit()), "no result rows"),
])
def test_bad_text_files_name_file_and_line(tmp_path, edit, expected):
    bad = tmp_path / "all_reduce_perf_bad.txt"
    bad.write_text(edit(ALLREDUCE.read_text()))
    with pytest.raises(UserError, match=expected) as err:
        read_nccl_tests(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("dress", [
    lambda t: "\n".join(f"[1,0]<stdout>:{line}" for line in t.splitlines())
    + "\n[1,1]<stderr>:Authorization required, but no authorization protocol specified\n",  # mpirun --tag-output
    lambda t: "\n".join(f"  0: {line}" for line in t.splitlines()),  # srun --label
    lambda t: t.replace("# Using devices", "node0:21:21 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                        "NCCL version 2.18.3+cuda12.2\n# Using devices", 1),  # NCCL_DEBUG=INFO chatter
])
def test_launcher_prefixes_and_library_chatter_are_read_through(tmp_path, dress):
    plain, _ = read_nccl_tests(ALLREDUCE)
    dressed = tmp_path / "results.txt"
    dressed.write_text(dress(ALLREDUCE.read_text()))
    samples, run = read_nccl_tests(dressed)
    assert run.program.startswith("all_reduce_perf") and len(samples) == len(plain)
    assert [(s.params, s.times_s) for s in samples] == [(s.params, s.times_s) for s in plain]


def test_unknown_collective_needs_op(tmp_path):
    anonymous = tmp_path / "results.txt"
    anonymous.write_text(ALLREDUCE.read_text().replace("# Collective test starting: all_reduce_perf\n", ""))
    with pytest.raises(UserError, match="pass --op"):
        read_nccl_tests(anonymous)
    samples, _ = read_nccl_tests(anonymous, op_override="allreduce")
    assert samples[0].benchmark == "allreduce"


def test_truncated_json_names_the_line(tmp_path):
    cut = tmp_path / "alltoall_perf.json"
    text = ALLTOALL.read_text()
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(UserError, match=rf"{cut}:\d+: not valid JSON"):
        read_nccl_tests(cut)


def test_cli_error_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "all_reduce_perf.txt"
    bad.write_text("# Using devices\nnot a row\n")
    done = subprocess.run([sys.executable, "-m", "paraoracle.cli", "import-nccl-tests", str(bad),
                           "--out", str(tmp_path / "o.yaml")], capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and str(bad) in done.stderr
    assert not (tmp_path / "o.yaml").exists()

