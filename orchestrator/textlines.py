"""The lines of a program's output, as the program and OpenSSH count them.

``str.splitlines()`` breaks a line at U+0085 (NEL), U+2028 and U+2029 too. Those characters may stand unescaped
inside a JSON string (``json.dumps(..., ensure_ascii=False)`` writes them so), in a GPU's or a host's name, or in an
ssh_config value: split there, a tool's last JSON line became pieces that are not JSON, the line before it was read
in its place, and a figure the tool never reported as its result was stored (``{"t": 2.0, "note": "a<U+2028>b"}``
after ``{"t": 1.0}`` gave t = 1.0). :func:`output_lines` breaks only where a terminal or a file reader would: at
``\\n``, ``\\r\\n``, a lone ``\\r`` and the ASCII separators ``\\x0b \\x0c \\x1c \\x1d \\x1e`` that ``splitlines``
also takes — control characters that a JSON string never holds unescaped (RFC 8259, section 7), so no JSON line is
ever cut by them.
"""

from __future__ import annotations

import re

LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e]")  # where a line ends


def output_lines(text: str) -> list[str]:
    """``text`` cut into lines without their line ends, as ``text.splitlines()`` would cut it except at U+0085,
    U+2028 and U+2029 (kept inside their line). ``""`` gives ``[]``; a last line without a line end is a line."""
    parts = LINE_BREAK.split(text)
    if parts and parts[-1] == "":
        parts.pop()
    return parts
