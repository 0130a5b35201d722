"""The profile arguments of every command, declared once: wherever a profile is given (`--profile`, or the
positional PROFILE, OLD, NEW, DIR|FILE a command has always taken) it is a path or a shipped profile's name
(calibrate.shipped), resolved while the flags are parsed, and the help lists the shipped names.

Here and not in the predictor because `profiler fit` (calibrate.cmd_fit) takes a profile too, and the shipped
profiles are calibrate's."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from calibrate.shipped import resolve_profile, shipped_profile_names, shipped_profiles_dir
from profiler.errors import UserError


def profile_type(text: str) -> str:
    """argparse type of a profile argument: the path as given when it exists (a file, or a folder for `profiler
    history`), else the shipped profile's path of that name; the error lists the shipped names."""
    try:
        return str(resolve_profile(text, flag=""))
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def profile_help(what: str) -> str:
    """`what`, then how a profile is named, with every shipped profile's name."""
    return f"{what}: a profile YAML, or a shipped profile's name ({', '.join(shipped_profile_names())})"


def add_profile_argument(parser, what: str, *, required: bool = False, positional: str | None = None,
                         flag: str = "--profile") -> None:
    """--profile (dest `profile`; or `flag`, e.g. --into); with `positional` (a metavar such as PROFILE) also the
    positional form the command always took, given instead of --profile (profile_of(args) picks the one given)."""
    if positional is not None:
        parser.add_argument("profile_positional", nargs="?", metavar=positional, type=profile_type,
                            help=profile_help(f"{what} (or --profile)"))
        parser.add_argument("--profile", type=profile_type, metavar=positional, help=f"the same as {positional}")
        return
    parser.add_argument(flag, type=profile_type, required=required, metavar="PROFILE", help=profile_help(what))


def profile_of(args: argparse.Namespace, positional: str = "PROFILE") -> str:
    """The profile of a command that takes it positionally or as --profile: exactly one of them."""
    given = [p for p in (getattr(args, "profile_positional", None), getattr(args, "profile", None)) if p is not None]
    if len(given) != 1:
        raise UserError(f"{positional} or --profile: give the profile once" if given
                        else f"{positional}: give a profile (a path or a shipped profile's name)")
    return given[0]


def check_not_shipped(path: Path | str, flag: str, otherwise: str = "") -> Path:
    """`path`, unless it is one of the shipped profiles, which the commands never rewrite (a UserError naming
    `flag`: copy the profile first; `otherwise` says what else the command offers, e.g. ' or ... --out')."""
    try:
        shipped = Path(path).resolve().parent == shipped_profiles_dir().resolve()
    except OSError:
        shipped = False
    if shipped and os.path.isfile(path):
        raise UserError(f"{flag} {Path(path).name}: a shipped profile is read-only; copy it first "
                        f"(cp {path} my.yaml){otherwise}")
    return Path(path)
