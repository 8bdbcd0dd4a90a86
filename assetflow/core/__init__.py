"""The pure core: declarations, catalog and the scheduling state machine; no I/O, no clock, no AWS."""
