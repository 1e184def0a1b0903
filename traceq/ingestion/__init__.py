"""Ingest: files read by the readers, written into the store as runs, with the metrics stored for reports."""

#: Where ingest reads files (``traceq ingest --executor``): a local process pool, or Ray tasks.
EXECUTORS: tuple[str, ...] = ("local", "ray")
