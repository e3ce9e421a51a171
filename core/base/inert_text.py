"""Strings from a run, made safe to show: every character a terminal could act on is visible and inert.

Contract: :func:`inert` returns its text with each character a terminal (or
tmux, or a bidi-aware renderer) could interpret replaced by a visible escape
written in plain ASCII: C0 controls and DEL (``ESC`` becomes ``\\x1b``), C1
controls (``\\x9b``), the bidi embeddings, overrides, isolates and marks
(``\\u202e``), the line and paragraph separators, and lone surrogates (which
cannot even be encoded to UTF-8). Everything else, every script, emoji,
combining mark and backslash, is kept as is. The result never contains a
character from that set, and ``inert(inert(s)) == inert(s)``.

``multiline=True`` keeps ``\\n`` and ``\\t`` (for views that wrap text such as a
conversation) and reads ``\\r\\n`` as ``\\n``; single-line text shows them as
``\\n`` and ``\\t``. Run strings reach a terminal only through this function
(the app, ``report``, CSV, error lines); JSON output is already escaped by
``json.dumps`` (``ensure_ascii``). Pure: no I/O.
"""

from __future__ import annotations

import re

_BIDI_AND_SEPARATORS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}\ud800-\udfff]")
_UNSAFE_MULTILINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}\ud800-\udfff]")

UNSAFE_CHARACTERS = _UNSAFE
"""A pattern matching one character that :func:`inert` replaces (for checks and tests)."""


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control, bidi and separator character shown as a visible escape."""
    if multiline:
        if "\r\n" in text:
            text = text.replace("\r\n", "\n")
        pattern = _UNSAFE_MULTILINE
    else:
        pattern = _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)
