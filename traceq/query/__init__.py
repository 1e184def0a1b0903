"""Query: the SQL engine over a store (DuckDB), the metric query files and the metrics stored with runs."""
