"""Host cost of the MLPerf HPC DeepCAM reference loader per batch, measured on this machine (an experiment behind
docs/decisions/2026-12-07-deepcam-reference-loader.md; not part of the product).

    python scripts/deepcam_loader_cost.py [DIR]      # needs h5py (pip install h5py); DIR default: a temporary folder

It writes six DeepCAM-shaped HDF5 files (climate/data 768 x 1152 x 16 float32, climate/labels_0 768 x 1152) and
times what the reference's CamDataset.__getitem__ does (mlcommons/hpc_results_v1.0 @2ba081f4, ANL/benchmarks/deepcam/
implementations/pytorch-deepcam-benchmark/src/deepCam/data/cam_hdf5_dataset.py: h5py read with the channel list,
scale * (data - shift), a transpose to CHW) for a batch of two, DataLoader's default_collate (which copies the
transposed views) and the pin-memory thread's copy, on one core, files in the page cache (no parallel file system).
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

SHAPE, CHANNELS, FILES, BATCH = (768, 1152), 16, 6, 2


def main(argv: list[str]) -> int:
    try:
        import h5py
    except ImportError:
        print("error: scripts/deepcam_loader_cost.py needs h5py (pip install h5py)", file=sys.stderr)
        return 2
    import numpy as np
    import torch
    from torch.utils.data._utils.collate import default_collate

    folder = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="deepcam-loader-"))
    if not folder.is_dir():
        print(f"error: {folder}: not a folder", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    try:
        for i in range(FILES):
            with h5py.File(folder / f"s{i}.h5", "w") as f:
                f.create_dataset("climate/data", data=rng.random((*SHAPE, CHANNELS), dtype=np.float32))
                f.create_dataset("climate/labels_0", data=rng.integers(0, 3, SHAPE).astype(np.float32))
    except OSError as err:
        print(f"error: {folder}: cannot write the sample files ({err.strerror or err})", file=sys.stderr)
        return 2
    channels = list(range(CHANNELS))
    shift, scale = np.zeros((1, 1, CHANNELS), np.float32), np.ones((1, 1, CHANNELS), np.float32)
    torch.set_num_threads(1)
    reads, norms, collates, pins = [], [], [], []
    for step in range(FILES):
        batch = []
        for k in range(BATCH):
            t0 = time.perf_counter()
            with h5py.File(folder / f"s{(BATCH * step + k) % FILES}.h5", "r") as f:
                data = f["climate/data"][..., channels]
                label = f["climate/labels_0"][...].astype(np.int64)
            t1 = time.perf_counter()
            data = np.transpose(scale * (data - shift), (2, 0, 1))
            reads.append(t1 - t0)
            norms.append(time.perf_counter() - t1)
            batch.append((data, label, "x"))
        t0 = time.perf_counter()
        tensors = default_collate(batch)
        t1 = time.perf_counter()
        _ = [x.clone() for x in tensors[:2]]  # pin_memory's copy into page-locked memory, as a plain copy
        collates.append(t1 - t0)
        pins.append(time.perf_counter() - t1)
    m = statistics.median
    worker = BATCH * (m(reads) + m(norms)) + m(collates)
    print(f"per sample: h5py read {1e3 * m(reads):.0f} ms, normalise and transpose {1e3 * m(norms):.0f} ms; per batch "
          f"of {BATCH}: collate {1e3 * m(collates):.0f} ms, pin copy {1e3 * m(pins):.0f} ms")
    print(f"one worker's batch: {1e3 * worker:.0f} ms of a core (the pin copy on the rank's own thread beside it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
