"""Helpers that know nothing of traces: threads in order, lazy frames, malloc tuning, the C loader, job counts."""
