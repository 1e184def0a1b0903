"""Query: the SQL engine over a store (DuckDB), the metric query files and the metrics stored with runs."""

#: Seconds a users' query may run (``traceq sql --timeout``) before it is stopped.
DEFAULT_TIMEOUT_S = 60.0
