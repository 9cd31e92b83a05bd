"""Suppression comments.

On the offending line (the first or the last line of the finding):

- ``# noqa`` suppresses every finding; ``# noqa: TFL101, TFL102`` only those codes
  (codes of other tools in the list are ignored);
- ``# tflint: disable=TFL101,TFL102`` the same codes (bare ``# tflint: disable``: all).

Anywhere in the file, ``# tflint: disable-file`` suppresses every finding of the file, and
``# tflint: disable-file=TFL101`` only the listed codes.

Only real comments count: text inside string literals is found with the tokenizer and ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tflint.finding import Finding

_CODES = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
_NOQA_RE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
_DIRECTIVE_RE = re.compile(
    rf"#\s*tflint\s*:\s*disable(?P<file>-file)?\b(?:\s*[=:]\s*(?P<codes>{_CODES}))?",
    re.IGNORECASE,
)
# Quick test for lines that may hold a suppression comment.
_CANDIDATE_RE = re.compile(r"#.*?(?:noqa|tflint\s*:)", re.IGNORECASE)

ALL = None  # a suppression of every code


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


@dataclass
class Suppressions:
    # line -> codes suppressed on it (ALL for every code)
    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    file_all: bool = False
    file_codes: frozenset[str] = frozenset()

    def _add_line(self, line: int, codes: frozenset[str] | None) -> None:
        if line in self.lines:
            old = self.lines[line]
            self.lines[line] = ALL if old is ALL or codes is ALL else old | codes
        else:
            self.lines[line] = codes

    def add_comment(self, line: int, comment: str) -> None:
        for m in _DIRECTIVE_RE.finditer(comment):
            codes = _codes(m.group("codes"))
            if m.group("file"):
                if codes is ALL:
                    self.file_all = True
                else:
                    self.file_codes |= codes
            else:
                self._add_line(line, codes)
        m = _NOQA_RE.search(comment)
        if m:
            self._add_line(line, _codes(m.group("codes")))

    def _on_line(self, line: int, code: str) -> bool:
        if line not in self.lines:
            return False
        codes = self.lines[line]
        return codes is ALL or code in codes

    def suppresses(self, finding: Finding) -> bool:
        if self.file_all or finding.code in self.file_codes:
            return True
        return self._on_line(finding.line, finding.code) or (
            finding.end_line != finding.line and self._on_line(finding.end_line, finding.code)
        )

    def __bool__(self) -> bool:
        return bool(self.lines) or self.file_all or bool(self.file_codes)


def _comments(text: str) -> Iterable[tuple[int, str]]:
    """(line, comment text) for every real comment of ``text`` that may suppress something."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and _CANDIDATE_RE.match(tok.string):
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError, ValueError):
        # The tokenizer disagrees with the parser on some rare inputs: fall back to lines.
        for lineno, line in enumerate(text.split("\n"), 1):
            m = _CANDIDATE_RE.search(line)
            if m:
                yield lineno, line[m.start():]


def scan(text: str) -> Suppressions:
    """The suppressions written in ``text`` (cheap when it has none)."""
    sup = Suppressions()
    if not _CANDIDATE_RE.search(text):
        return sup
    if "\r" in text:  # line numbers as the parser counts them
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    for line, comment in _comments(text):
        sup.add_comment(line, comment)
    return sup


def apply(findings: list[Finding], text: str) -> list[Finding]:
    """``findings`` without those suppressed by comments in ``text``."""
    if not findings:
        return findings
    sup = scan(text)
    if not sup:
        return findings
    return [f for f in findings if not sup.suppresses(f)]
