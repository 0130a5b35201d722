"""`profiler calibrate --model M --batch B --gpus P [--strategy S] [--model-arg K=V ...]`: calibrate with that
model's own per-device calls measured next to the grid, in one step.

It is `predictor shapes --model M ... --out TMP` followed by `profiler calibrate --shapes TMP` (the temporary
shapes file is removed; the profile keeps every measured shape as samples and `settings.shapes_file.model` the
request). Without --model it is profiler.cmd_calibrate unchanged. Either way the samples are fitted
(calibrate.fit.fit_profile) before the profile is written. User errors are one line and exit 2 before anything
is measured; a Python model file named with --model is run, as `predictor shapes` runs it: the user named it.
docs/calibration.md ("In one step: --model").
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import yaml

from predictor.flags import (add_dtype_argument, add_gpus_per_node_argument, add_model_arguments,  # light: no torch
                             add_strategy_argument)
from profiler import cmd_calibrate, store
from profiler.cliutil import OneLineParser, batch_size, device_count
from profiler.comm import section as collectives
from profiler.errors import UserError

#: the flags that describe the model; each needs --model (dest -> flag)
MODEL_FLAGS = {"model_arg": "--model-arg", "input_shape": "--input-shape", "batch": "--batch", "gpus": "--gpus",
               "gpus_per_node": "--gpus-per-node", "strategy": "--strategy", "dtype": "--dtype"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cmd_calibrate.add_arguments(parser)
    g = parser.add_argument_group(
        "a model's own layers", "measure the per-device calls a model's predictions cost, next to the grid "
        "(what `predictor shapes` writes and --shapes reads, in one step; not with --shapes)")
    add_model_arguments(g, required=False, unset=True, model_note=" (needs --batch and --gpus)", note=" (with --model)")
    g.add_argument("--batch", type=batch_size, help="global mini-batch the model will train with (with --model)")
    g.add_argument("--gpus", type=device_count, help="number of devices it will train on (with --model)")
    add_gpus_per_node_argument(g, note=" (with --model)")
    add_strategy_argument(g, default=None, note=" (with --model: measure only this strategy's calls)")
    add_dtype_argument(g, default=None, note=" (with --model; the device's grid must run it)")


def check_flags(args) -> None:
    """The flag combinations, before anything runs (UserError, one line)."""
    if args.model is None:
        orphans = [flag for dest, flag in MODEL_FLAGS.items() if getattr(args, dest) is not None]
        if orphans:
            raise UserError(f"{', '.join(orphans)}: only with --model (the model whose own layers to measure)")
        return
    if args.shapes:
        raise UserError("--model and --shapes: give one (--model writes the model's shapes file itself)")
    if args.batch is None or args.gpus is None:
        raise UserError("--model needs --batch and --gpus")


def precheck(args) -> None:
    """What profiler.cmd_calibrate.run checks before its first benchmark, checked before the model is traced."""
    device = cmd_calibrate.resolve_device(args.device)
    sections = cmd_calibrate.parse_sections(args.only, device)
    cmd_calibrate.check_grid(args, device)
    if "compute" not in sections:
        raise UserError("--model: the model's shapes are measured in the compute section; add compute to --only")
    if "collectives" in sections:
        collectives.preflight(args, device, args.quick)
    store.resolve_out(args.out, "host", args.force)


def shapes_args(args, out: Path) -> argparse.Namespace:
    """`predictor shapes` arguments for this request, parsed by its own parser (so its defaults apply)."""
    from predictor import cmd_shapes  # only with --model: a plain calibration does not load the predictor

    argv = [f"--model={args.model}", "--batch", str(args.batch), "--gpus", str(args.gpus), "--out", str(out)]
    argv += [f"--model-arg={pair}" for pair in args.model_arg or []]
    for dest in ("input_shape", "gpus_per_node", "strategy", "dtype"):
        if getattr(args, dest) is not None:
            argv.append(f"{MODEL_FLAGS[dest]}={getattr(args, dest)}")
    parser = OneLineParser(prog="profiler calibrate --model")
    cmd_shapes.add_arguments(parser)
    return parser.parse_args(argv)


def write_model_shapes(args, out: Path) -> dict:
    """Write the model's shapes file to `out` (predictor.cmd_shapes.run) and return the request as recorded in
    the profile's settings.shapes_file.model."""
    from predictor import cmd_shapes

    with contextlib.redirect_stdout(io.StringIO()) as said:  # its "wrote TMP: ..." names a file about to vanish
        cmd_shapes.run(shapes_args(args, out))
    text = out.read_text(encoding="utf-8")
    header = text.splitlines()[0].lstrip("# ").strip()
    entries = yaml.safe_load(text)["shapes"]
    print(f"profiler calibrate: --model {args.model}: {said.getvalue().strip().partition(': ')[2]}; "
          "measuring them next to the grid", file=sys.stderr)
    request = {"model": args.model, "model_args": list(args.model_arg or []), "input_shape": args.input_shape,
               "batch": args.batch, "gpus": args.gpus, "gpus_per_node": args.gpus_per_node,
               "strategy": args.strategy or "all", "dtype": args.dtype or "fp32", "shapes": len(entries),
               "recorded_by": header}
    return {key: value for key, value in request.items() if value is not None}


def fit(profile):
    """calibrate.fit.fit_profile, imported once the measuring is done (--help and flag errors stay light)."""
    from calibrate.fit import fit_profile

    return fit_profile(profile)


def run(args) -> int:
    check_flags(args)
    if args.model is None or collectives.is_worker_rank():  # a launcher's other ranks only join the collectives
        return cmd_calibrate.run(args, fit=fit)
    precheck(args)
    with tempfile.TemporaryDirectory(prefix="paraoracle-shapes-") as folder:
        path = Path(folder) / "model.shapes.yaml"
        args.shapes_request = write_model_shapes(args, path)
        args.shapes = str(path)
        return cmd_calibrate.run(args, fit=fit)
