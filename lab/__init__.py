"""The lab beside the package (not installed by ``pip install``): report generators, plots, analysis, stage
tables, peer baselines, benches and the out-of-domain experiments. Run its modules from the repository root,
e.g. ``python -m lab.report --check``."""
