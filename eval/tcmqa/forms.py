"""Form checks of typed text (a model id, a licence number, a flag's comment): one home for what a field may hold.

They run before any file-system or database call: a NUL byte is stored by SQLite and refused by PostgreSQL
(so the same answer is recorded on one store and lost on the other), a 20,000-character "model id" must not
reach ``Path.is_dir`` (the OS refuses the name) nor a log line whole. A refusal is a :class:`FormError` (a
``ValueError``) that names the field and what to fix, never the value in full (:func:`shown`).
"""

from __future__ import annotations

import unicodedata

SHOWN_CHARS = 80  # the most of a refused value a message or a log line repeats
MAX_REASON = 500  # characters of an admin's reason (a job cancelled or withdrawn, a practitioner excluded)


class FormError(ValueError):
    """Typed text that is not of its field's form; ``field`` names it (a tab shows the message beside it)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a message or a log repeats it: at most ``limit`` characters, control characters escaped.

    >>> shown("a" * 100, 10), shown("x\\x00y")
    ("'aaaaaaaaa…' (100 characters)", "'x\\\\x00y'")
    """
    text = value if len(value) <= limit else value[: limit - 1] + "…"
    return repr(text) + (f" ({len(value)} characters)" if len(value) > limit else "")


def checked(field: str, value: str | None, *, max_chars: int, lines: bool = False) -> str:
    """``value`` stripped, or :class:`FormError` when it holds a control character (NUL, escape, DEL...; with
    ``lines``, newlines and tabs are text) or an unpaired surrogate, or is longer than ``max_chars``."""
    text = (value or "").strip()
    if len(text) > max_chars:
        raise FormError(field, f"at most {max_chars} characters, not {len(text)}; shorten it")
    bad = next((c for c in text if _control(c) and not (lines and c in "\n\r\t")), None)
    if bad is not None:
        raise FormError(
            field,
            f"holds the control character U+{ord(bad):04X} at position {text.index(bad) + 1}, which no field may "
            "hold; retype it as plain text",
        )
    return text


def _control(char: str) -> bool:
    """A control character (C0, DEL, C1) or a lone surrogate (no UTF-8 spelling, so no database takes it)."""
    return unicodedata.category(char) in ("Cc", "Cs")
