"""Numbers in words, one rule for every text traceq writes: counts agree with their nouns and carry
thousands separators (``1 table``, ``2,552 calls``), and a value in ms is rounded once, so that it reads
the same wherever it is printed."""

from __future__ import annotations


def count(n: float, one: str, many: str | None = None) -> str:
    """``n`` things, whole and with thousands separators, in words that agree with it (``1 table``,
    ``6 host synchronisations``, ``2,552 op rows``); ``many`` where adding an ``s`` is wrong."""
    return f"{n:,.0f} {one if round(n) == 1 else (many or one + 's')}"


def rounded(ms: float) -> float:
    """A value as traceq keeps it for printing: rounded once, to a thousandth (of a ms)."""
    return round(ms, 3)


def fixed(v: float, digits: int = 2, sign: bool = False) -> str:
    """``v`` with ``digits`` decimals and thousands separators (``13,334.90``), from its :func:`rounded`
    value, so that a title and a table print one value alike; ``sign``: ``+`` for positive values."""
    return f"{rounded(v):{'+' if sign else ''},.{digits}f}"
