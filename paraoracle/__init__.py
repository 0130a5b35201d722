"""The commands that compose stages: the top of the pipeline kernels -> profiler -> calibrate -> predictor ->
paraoracle. Modules here may import any stage; no stage imports them (tests/test_layers.py)."""
