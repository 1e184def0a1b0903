"""Analysis: a run's report, a comparison of two runs, cross-rank views, and the findings they name."""
