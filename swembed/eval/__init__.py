"""Evaluation: dataset loaders, metrics as MTEB computes them, model loading for comparison."""
