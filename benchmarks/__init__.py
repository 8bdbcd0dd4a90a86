"""Benchmarks of assetflow: run them as ``python -m benchmarks.<name> [--quick]`` from the repository root."""
