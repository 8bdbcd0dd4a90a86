"""Integration tests: real AWS APIs and Kafka on the local emulators."""
