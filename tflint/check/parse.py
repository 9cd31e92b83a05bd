"""Parse Python text with the standard library's parser; failures become :class:`ParseError`."""

from __future__ import annotations

import ast
import warnings


class ParseError(Exception):
    """Why a text does not parse, and where (line 1-based, col 0-based)."""

    def __init__(self, reason: str, line: int = 1, col: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.col = col


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` without warnings (invalid escapes and the like are not tflint's concern)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename)
    except SyntaxError as exc:
        reason = exc.msg or "invalid syntax"
        if isinstance(exc, IndentationError) and "indent" not in reason:
            reason = f"indentation error: {reason}"
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        raise ParseError(f"syntax error: {reason}", line, col) from None
    except (ValueError, TypeError) as exc:  # e.g. NUL characters
        raise ParseError(f"cannot parse: {exc}") from None
    except (RecursionError, MemoryError):
        raise ParseError("cannot parse: expression nested too deeply") from None
