"""Collective and point-to-point calibration over torch.distributed: launch (spawn, torchrun, srun),
the per-point timing harness, fault handling, and the `profiler calibrate` section (`section.py`)."""
