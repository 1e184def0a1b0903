"""Text that can be stored and printed: a file name's bytes that are not UTF-8 made replacement characters."""

from __future__ import annotations

import re

#: Lone surrogates: how Python holds the bytes of a file name or argument that are not UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def as_text(text: object) -> str:
    """``text`` as valid Unicode: each byte of a name that is not UTF-8 (``\\udcff``) as U+FFFD, as
    Parquet, Arrow and every output can hold it."""
    return _SURROGATE.sub("\ufffd", str(text))


def not_utf8(text: str) -> int | None:
    """The first byte of ``text`` that was not UTF-8 where it came from (an argument, a file name), or
    None if ``text`` is valid Unicode."""
    m = _SURROGATE.search(text)
    if m is None:
        return None
    code = ord(m.group())
    return code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else code
