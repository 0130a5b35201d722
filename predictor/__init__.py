"""paraoracle: predictor stage."""
