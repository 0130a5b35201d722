"""The CPU peak-memory tracker of the validation runner: live tensor storages, counted once, freed ones dropped."""
import torch

from predictor.runner.measure import LiveTensorBytes


def test_live_tensor_bytes_tracks_the_peak_of_live_storages():
    with LiveTensorBytes() as tracker:
        a = torch.ones(1000)  # 4,000 B
        b = torch.ones(2000)  # 8,000 B: 12,000 B live
        view = b[:10]  # a view shares b's storage: not counted again
        del a, b, view
        c = torch.ones(500)  # a and b are gone before c counts: 2,000 B live
    assert tracker.peak_bytes == 12_000
    assert tracker.current_bytes == 2_000
    assert c.numel() == 500
