"""Validation runner: real training iterations under each parallel strategy, measured.

Modules: `nets` (ModelGraph -> torch layers), `comm` (autograd-aware collectives and halo exchange),
one module per strategy (`data`, `spatial`, `filter`, `channel`, `pipeline`, `serial` for serial,
recompute and offload), `groups` (process subgroups for hybrids), `measure` (timed iterations, phase
breakdown, peak memory), `launch` (self-spawned local ranks or torchrun/srun) and `suite` (suite files).
"""
