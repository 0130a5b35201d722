"""paraoracle: calibrate stage."""
