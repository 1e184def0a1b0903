"""The README's second-round tally counts the cases of the tests that make it up."""

from __future__ import annotations

from tests.conftest import ROOT
from tests.reliability import (
    test_hostile_values,
    test_output_bounds,
    test_processes_and_platforms,
    test_store_integrity,
)


def test_the_second_round_tally_in_the_readme_matches_the_cases() -> None:
    modules = (test_hostile_values, test_store_integrity, test_processes_and_platforms, test_output_bounds)
    cases = [case for module in modules for case in module.CASES]
    assert len(cases) == len(set(cases))
    readme = (ROOT / "README.md").read_text()
    assert f"A second round of {len(cases)} kinds of attack" in readme
    assert all(f"`{m.__name__.rsplit('.', 1)[1]}.py`" in readme for m in modules)
