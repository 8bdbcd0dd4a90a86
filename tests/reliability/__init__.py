"""Reliability suites: bad input at scale, and other soak tests, on the local emulators (slow, run in CI)."""
