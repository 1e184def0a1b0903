"""Ingest: files read by the readers, written into the store as runs, with the metrics stored for reports."""
