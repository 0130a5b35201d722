"""`profiler import-nccl-tests FILE... (--out PATH | --into PROFILE [--out PATH])`: read nccl-tests text or
JSON (-J) output into a profile's samples (parsing: profiler/comm/nccl_tests.py).

--out alone writes a new profile whose machine is the one the files describe (hosts and GPU names from
their `# Rank` lines); --into merges into an existing profile (written back to it, or to --out), replacing
samples imported earlier from a file with the same content. Writes are atomic; the result is refitted.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from calibrate.profile_arguments import add_profile_argument, check_not_shipped
from profiler.comm.nccl_tests import PROGRAMS, NcclRun, read_nccl_tests
from profiler.errors import UserError
from profiler.profile import (SCHEMA_VERSION, GPUInfo, Machine, Profile, Provenance, check_writable, load_profile,
                              save_profile, utc_now_iso)


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


def _refit(profile: Profile) -> tuple[Profile, str]:
    from calibrate.fit import fit_profile

    try:
        return fit_profile(profile), "fitted"
    except UserError as err:
        return profile.model_copy(update={"coefficients": {}}), f"not fitted: {err}"


def run(args) -> int:
    if args.out is None and args.into is None:
        raise UserError("give --out PATH (a new profile) or --into PROFILE (merge into an existing one)")
    if args.into is not None and args.out is None:
        check_not_shipped(args.into, "--into", " or write the merged profile elsewhere with --out")
    target = Path(args.out or args.into)
    if args.into is None and os.path.exists(target) and not args.force:
        raise UserError(f"--out {target}: file exists; pass --force to overwrite it, or --into {target} to merge")
    check_writable(target, "--out" if args.out else "--into")
    samples, runs = [], []
    for name in args.files:
        file_samples, nccl_run = read_nccl_tests(name, args.op)
        samples.extend(file_samples)
        runs.append(nccl_run)
    digests = {s.extra["source_sha256"] for s in samples}
    if args.into is not None:
        base = load_profile(args.into)
        kept = [s for s in base.samples if s.extra.get("source_sha256") not in digests]
        replaced = len(base.samples) - len(kept)
        profile = base.model_copy(update={"samples": kept + samples})
    else:
        replaced = 0
        sources = ", ".join(Path(f).name for f in args.files)
        profile = Profile(schema_version=SCHEMA_VERSION, machine=_machine(runs), created=utc_now_iso(),
                          provenance=Provenance(kind="calibrated", source=f"nccl-tests output: {sources}"),
                          settings={"imported": "nccl-tests", "files": [str(f) for f in args.files]},
                          samples=samples)
    profile, fitted = _refit(profile)
    save_profile(profile, target)
    again = f", replacing {replaced} imported before from the same files" if replaced else ""
    print(f"wrote {target}: {len(samples)} samples from {len(args.files)} nccl-tests file(s){again} ({fitted})")
    return 0
