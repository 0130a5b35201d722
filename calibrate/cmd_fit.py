"""`profiler fit PROFILE [--out PATH]`: recompute a profile's coefficients from the samples it holds.

By default PROFILE itself is rewritten (atomically: readers never see half a file); --out writes elsewhere
and leaves PROFILE untouched (an existing --out file only with --force)."""
from __future__ import annotations


from calibrate.fit import fit_profile
from calibrate.profile_arguments import add_profile_argument, check_not_shipped, profile_of
from calibrate.report import fit_warnings
from profiler.cliutil import seed
from profiler.errors import UserError
from profiler.outputs import check_output, check_writable, same_file
from profiler.profile import load_profile, save_profile


def add_arguments(parser) -> None:
    add_profile_argument(parser, "profile with samples, rewritten in place unless --out", positional="PROFILE")
    parser.add_argument("--out", metavar="PATH", help="where to write the refitted profile (default: PROFILE, atomically)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the bootstrap and cross-validation draws (0..2^32-1)")


def run(args) -> int:
    source = profile_of(args)
    in_place = args.out is None or same_file(args.out, source)
    if in_place:
        check_not_shipped(source, "PROFILE", " or write the refitted profile elsewhere with --out")
    out = check_writable(source, "PROFILE") if in_place else check_output(args.out, "--out", args.force)
    profile = load_profile(source)
    try:
        fitted = fit_profile(profile, seed=args.seed)
    except UserError as err:
        raise UserError(f"{source}: {err}") from None
    save_profile(fitted, out)
    n = fitted.coefficients
    print(f"fitted {len(n.get('compute', {}))} compute, {len(n.get('memory', {}))} memory, "
          f"{len(n.get('host_device', {}))} host<->device and {len(n.get('collectives', []))} collective fits "
          f"from {len(profile.samples)} samples -> {out}")
    for warning in fit_warnings(fitted):
        print(f"warning: {warning}")
    return 0
