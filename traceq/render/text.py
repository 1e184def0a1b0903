"""Text for a terminal: names and values from traces shown as written, never acted on or read as markup."""

from __future__ import annotations

import re

from traceq.errors import as_text

#: Control characters a terminal acts on: C0 but tab and newline, DEL, C1.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: object) -> str:
    """``text`` for a terminal: each control character (C0 but tab and newline, DEL, C1) written as its
    ``\\x1b``-style escape, so a file or event name cannot colour, move the cursor or clear the screen; a
    byte of a file name that is not UTF-8 as U+FFFD."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", as_text(text))


def literal(text: object) -> str:
    """``text`` placed inside rich markup, shown as written (``[/bold]``, ``[red]x[/red]``) and
    :func:`visible`."""
    from rich.markup import escape

    return escape(visible(text))
