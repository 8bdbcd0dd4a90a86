"""Tests of the benchmarks: the harness and cost model, and a smoke test per script in quick mode."""
