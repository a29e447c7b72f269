"""Text for a terminal: what the commands print for people (tables, ``--format text`` lines, the
verify report) shows stored strings — group names, tags, keys, bodies, file names — with every
character that is not printable escaped, so no stored byte can move the cursor, retitle the
window or hide text (ANSI CSI / OSC sequences, C1 controls, bidi overrides). JSON output needs
none of this: ``json.dumps`` escapes what JSON must."""
from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with each character that is not printable (``str.isprintable``: C0 controls
    including ESC, tab and newline, DEL, C1 controls, format characters such as bidi overrides,
    line and paragraph separators) written as its Python escape (``\\x1b``, ``\\n``, ``\\x9b``,
    ``\\u202e``); a byte that was not UTF-8, decoded with ``surrogateescape``, as ``\\xNN``."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    if "\udc80" <= c <= "\udcff":
        return f"\\x{ord(c) - 0xDC00:02x}"
    return c.encode("unicode_escape").decode("ascii")
