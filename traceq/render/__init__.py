"""Render: every result (frames, a run's report, a comparison) in the output formats of the commands."""
