"""The input-pipeline coefficient: core-seconds to decode and augment one training sample on the host
(profiler.bench_input), with a bootstrap interval over the measured calls."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from calibrate.alphabeta import BOOTSTRAP_REPLICATES, bootstrap_estimate
from calibrate.coefficients import InputPipelineFit
from profiler.errors import UserError
from profiler.profile import Sample


def fit_input(samples: Sequence[Sample], rng: np.random.Generator) -> InputPipelineFit:
    per_sample = []
    for s in samples:
        images = s.params.get("images")
        if not isinstance(images, int) or images < 1:
            raise UserError("input sample has no params.images (images per timed call)")
        per_sample += [t / images for t in s.times_s]
    values = np.asarray(per_sample, float)
    median = float(np.median(values))
    replicates = [float(np.median(rng.choice(values, len(values)))) for _ in range(BOOTSTRAP_REPLICATES)]
    crops = sorted({int(s.params.get("crop", 0)) for s in samples})
    return InputPipelineFit(per_sample_core_s=bootstrap_estimate(median, replicates),
                            sources=[f"measured: {len(values)} calls of JPEG decode + random-resized crop to "
                                     f"{crops} + flip + normalise, one thread (profiler.bench_input)"])
