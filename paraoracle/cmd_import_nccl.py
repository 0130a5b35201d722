"""`profiler import-nccl-tests FILE... (--out PATH | --into PROFILE [--out PATH])`: read nccl-tests text or
JSON (-J) output into a profile's samples (parsing: profiler/comm/nccl_tests.py).

--out alone writes a new profile whose machine is the one the files describe (hosts and GPU names from
their `# Rank` lines); --into merges into an existing profile (written back to it, or to --out), replacing
samples imported earlier from a file with the same content. Writes are atomic; the result is refitted.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from calibrate.profile_arguments import add_profile_argument
from paraoracle.imports import base_profile, import_target, merged, refit
from profiler.comm.nccl_tests import PROGRAMS, NcclRun, read_nccl_tests
from profiler.profile import SCHEMA_VERSION, GPUInfo, Machine, Profile, Provenance, save_profile, utc_now_iso


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="nccl-tests output: text (stdout) or JSON (-J)")
    parser.add_argument("--out", default=None, help="profile to write (new, or the merged result with --into)")
    add_profile_argument(parser, "existing profile to merge the samples into (written back unless --out)", flag="--into")
    parser.add_argument("--op", choices=sorted(set(PROGRAMS.values())), default=None,
                        help="which collective the files hold, when neither the output nor the file name says")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists (without --into)")


def _machine(runs: list[NcclRun]) -> Machine:
    first = max(runs, key=lambda run: len(run.hosts_by_rank))  # the widest job describes the node best
    hosts = [first.hosts_by_rank[r] for r in sorted(first.hosts_by_rank)]
    per_node = hosts.count(hosts[0])
    names = first.device_names[:per_node] or ["unknown"]
    nodes = max(len(set(run.hosts_by_rank.values())) for run in runs)
    return Machine(hostname=hosts[0], gpus=[GPUInfo(name=name or "unknown") for name in names], gpus_per_node=per_node,
                   nodes=nodes, imported_from="nccl-tests")


def run(args) -> int:
    target = import_target(args)
    samples, runs = [], []
    for name in args.files:
        file_samples, nccl_run = read_nccl_tests(name, args.op)
        samples.extend(file_samples)
        runs.append(nccl_run)
    sources = ", ".join(Path(f).name for f in args.files)
    profile, replaced = merged(base_profile(args), samples, {s.extra["source_sha256"] for s in samples}, lambda: Profile(
        schema_version=SCHEMA_VERSION, machine=_machine(runs), created=utc_now_iso(),
        provenance=Provenance(kind="calibrated", source=f"nccl-tests output: {sources}"),
        settings={"imported": "nccl-tests", "files": [str(f) for f in args.files]}, samples=samples))
    profile, fitted = refit(profile)
    save_profile(profile, target)
    again = f", replacing {replaced} imported before from the same files" if replaced else ""
    print(f"wrote {target}: {len(samples)} samples from {len(args.files)} nccl-tests file(s){again} ({fitted})")
    return 0
