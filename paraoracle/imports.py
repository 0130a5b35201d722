"""What the importing commands share (profiler import-nccl-tests, import-deepbench): where the result goes, merging
into an existing profile, and refitting. An import --out writes a new profile (never over a file without --force);
--into merges into a profile, replacing the samples imported earlier from a file with the same content, and writes
it back (a shipped profile only to another --out). Writes are atomic; the result is refitted."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Optional

from calibrate.profile_arguments import check_not_shipped
from profiler.errors import UserError
from profiler.profile import Profile, Sample, check_writable, load_profile


def import_target(args) -> Path:
    """The file an import writes (--out, else --into), checked before anything is read."""
    if args.out is None and args.into is None:
        raise UserError("give --out PATH (a new profile) or --into PROFILE (merge into an existing one)")
    if args.into is not None and args.out is None:
        check_not_shipped(args.into, "--into", " or write the merged profile elsewhere with --out")
    target = Path(args.out or args.into)
    if args.into is None and os.path.exists(target) and not args.force:  # os.path: a too long name is not there
        raise UserError(f"--out {target}: file exists; pass --force to overwrite it, or --into {target} to merge")
    check_writable(target, "--out" if args.out else "--into")
    return target


def merged(base: Optional[Profile], samples: list[Sample], digests: Iterable[str],
           new_profile: Callable[[], Profile]) -> tuple[Profile, int]:
    """(profile, samples replaced): `base` with `samples` in place of those imported from files of the same
    content (extra["source_sha256"] in `digests`), or new_profile() when there is no base."""
    if base is None:
        return new_profile(), 0
    digests = set(digests)
    kept = [s for s in base.samples if s.extra.get("source_sha256") not in digests]
    return base.model_copy(update={"samples": kept + samples}), len(base.samples) - len(kept)


def refit(profile: Profile) -> tuple[Profile, str]:
    """The profile fitted from its samples, or with no coefficients and why (an import keeps what it read)."""
    from calibrate.fit import fit_profile

    try:
        return fit_profile(profile), "fitted"
    except UserError as err:
        return profile.model_copy(update={"coefficients": {}}), f"not fitted: {err}"


def base_profile(args) -> Optional[Profile]:
    return load_profile(args.into) if args.into is not None else None
