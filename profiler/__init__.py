"""paraoracle: profiler stage."""
