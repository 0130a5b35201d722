"""Benchmark kernels: CUDA C sources (*.cu, compiled at run time by cupy) and their CPU equivalents.

Imports nothing of paraoracle's own."""
