"""Applying fixes: ``--fix``, ``--diff`` and ``--unsafe-fixes``.

A fix is a set of text edits at ``ast`` positions (1-based lines, 0-based character columns).
Each pass applies every applicable fix whose edits do not overlap an edit already taken (an
edit identical to one already taken is shared, e.g. two fixes adding the same import), then
the file is checked again; passes repeat until nothing changes (at most :data:`MAX_PASSES`).
If the fixed text does not parse (with ``ast`` and with libcst, imported only here), or cannot
be written in the file's encoding, the file is left untouched and the problem reported.
Newline style, encoding, BOM and file mode are preserved; writes are atomic.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tflint.finding import Edit, Finding, Fix
from tflint.check.source import SourceError, decode, newline_of

MAX_PASSES = 5


def _line_starts(text: str) -> list[int]:
    """Offsets where each line starts, counting ``\\r\\n``, ``\\r`` and ``\\n`` as the parser does."""
    starts = [0]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            starts.append(i + 1)
        elif c == "\r":
            if i + 1 < n and text[i + 1] == "\n":
                i += 1
            starts.append(i + 1)
        i += 1
    return starts


def _line_starts_fast(text: str) -> list[int]:
    if "\r" in text:
        return _line_starts(text)
    starts = [0]
    find = text.find
    i = find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = find("\n", i + 1)
    return starts


def _offset(text: str, starts: list[int], line: int, col: int) -> int | None:
    if not 1 <= line <= len(starts):
        return None
    start = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    # the line's own text, without its line break
    content_end = end
    while content_end > start and text[content_end - 1] in "\r\n":
        content_end -= 1
    if col < 0:
        return None
    if col > content_end - start:
        # Column just past the end of the line (e.g. an insertion at end of line) is fine;
        # beyond that the edit does not belong to this text.
        return None
    return start + col


def apply_fixes(text: str, fixes: list[Fix]) -> tuple[str, int]:
    """Apply the non-overlapping ``fixes`` to ``text``; return the new text and how many applied."""
    starts = _line_starts_fast(text)
    newline = newline_of(text)
    taken: list[tuple[int, int, str]] = []  # accepted (start, end, content)
    taken_set: set[tuple[int, int, str]] = set()
    planned: list[tuple[int, list[tuple[int, int, str]]]] = []
    for fix in fixes:
        spans = []
        ok = True
        for e in fix.edits:
            s = _offset(text, starts, e.line, e.col)
            t = _offset(text, starts, e.end_line, e.end_col)
            if s is None or t is None or t < s:
                ok = False
                break
            content = e.content.replace("\r\n", "\n").replace("\n", newline) if newline != "\n" else e.content
            spans.append((s, t, content))
        if ok and spans:
            planned.append((min(s for s, _, _ in spans), spans))
    planned.sort(key=lambda p: p[0])
    applied = 0
    for _, spans in planned:
        new = [sp for sp in spans if sp not in taken_set]
        conflict = False
        for s, t, _ in new:
            for a, b, _ in taken:
                if s < b and a < t:  # overlapping ranges
                    conflict = True
                elif s == t == a == b or (s == t and a < s < b) or (a == b and s < a < t):
                    conflict = True  # insertions at one point / inside a replaced range
                if conflict:
                    break
            if conflict:
                break
        # two edits of one fix must not overlap each other either
        if not conflict:
            ordered = sorted(new)
            for (s1, t1, _), (s2, t2, _) in zip(ordered, ordered[1:]):
                if s2 < t1 or (s1 == s2 == t1 == t2):
                    conflict = True
                    break
        if conflict:
            continue
        for sp in new:
            taken.append(sp)
            taken_set.add(sp)
        applied += 1
    if not applied:
        return text, 0
    out = text
    for s, t, content in sorted(taken, key=lambda sp: (sp[0], sp[1]), reverse=True):
        out = out[:s] + content + out[t:]
    return out, applied


def _applicable(findings: list[Finding], unsafe: bool) -> list[Fix]:
    return [
        f.fix
        for f in findings
        if f.fix is not None and f.fix.edits and (f.fix.applicability == "safe" or unsafe)
    ]


def parses(text: str) -> str | None:
    """``None`` when ``text`` parses with ``ast`` and libcst; otherwise why not."""
    from tflint.check.parse import ParseError, parse

    try:
        parse(text)
    except ParseError as exc:
        return f"{exc.reason} at line {exc.line}"
    try:
        import libcst
    except ImportError:  # pragma: no cover - libcst is a dependency; ast agreed already
        return None
    try:
        libcst.parse_module(text)
    except Exception as exc:  # libcst raises its own ParserSyntaxError (and others on odd input)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"libcst cannot parse the result: {first}"
    return None


@dataclass
class FixOutcome:
    path: str
    original: bytes
    new_raw: bytes | None = None  # None: nothing to change
    fixed: int = 0
    findings: list[Finding] = field(default_factory=list)  # what remains after fixing
    problem: str | None = None  # why the file was left unchanged
    errors: list[str] = field(default_factory=list)  # internal errors from rules
    old_text: str = ""
    new_text: str = ""

    def diff(self) -> str:
        import difflib

        if self.new_raw is None:
            return ""
        a = self.old_text.splitlines(keepends=True)
        b = self.new_text.splitlines(keepends=True)
        lines = list(difflib.unified_diff(a, b, f"a/{self.path}", f"b/{self.path}"))
        out = []
        for ln in lines:
            out.append(ln if ln.endswith(("\n", "\r")) else ln + "\n\\ No newline at end of file\n")
        return "".join(out)

    def write(self, path: str) -> None:
        if self.new_raw is None:
            return
        write_preserving_mode(path, self.new_raw)


def write_preserving_mode(path: str, data: bytes) -> None:
    """Atomically replace ``path``'s content, keeping its permission bits (through symlinks)."""
    from tflint.atomic import write_atomic

    target = os.path.realpath(path)
    write_atomic(target, data, mode=os.stat(target).st_mode & 0o7777)


def fix_file(
    path: str, raw: bytes, enabled: frozenset[str], unsafe: bool = False, rules: list | None = None,
    target=None,
) -> FixOutcome:
    """Fix ``raw`` (the content of ``path``) as far as the fixes go; nothing is written here.

    ``rules``: the rule instances to run (default: the registered rules in ``enabled``);
    ``target``: the TensorFlow version the code targets (see ``engine.lint_text``).
    """
    from tflint.check.engine import lint_text
    from tflint.check.source import is_notebook_path

    outcome = FixOutcome(path, raw)
    if is_notebook_path(path):
        return _fix_notebook(outcome, raw, enabled, unsafe, rules, target)
    try:
        src = decode(path, raw)
    except SourceError:
        return outcome
    text = original = src.text
    result = lint_text(path, text, enabled, rules=rules, target=target)
    outcome.errors.extend(result.errors)
    fixed = 0
    for _ in range(MAX_PASSES):
        fixes = _applicable(result.findings, unsafe)
        if not fixes:
            break
        new_text, n = apply_fixes(text, fixes)
        if n == 0 or new_text == text:
            break
        from tflint.check.parse import ParseError, parse

        try:
            parse(new_text)
        except ParseError as exc:
            outcome.problem = f"the fixed code would not parse ({exc.reason} at line {exc.line})"
            outcome.findings = []
            return outcome
        text = new_text
        fixed += n
        result = lint_text(path, text, enabled, rules=rules, target=target)
        outcome.errors.extend(e for e in result.errors if e not in outcome.errors)
    outcome.findings = result.findings
    if text == original:
        return outcome
    problem = parses(text)
    if problem:
        outcome.problem = f"the fixed code would not parse ({problem})"
        return outcome
    try:
        data = text.encode(src.encoding)
    except UnicodeEncodeError:
        outcome.problem = f"the fixed code cannot be written as {src.encoding}"
        return outcome
    if src.bom:
        data = b"\xef\xbb\xbf" + data
    outcome.new_raw = data
    outcome.fixed = fixed
    outcome.old_text = original
    outcome.new_text = text
    return outcome


class _JsonStyle:
    """How the notebook's JSON was written, so that a fixed notebook differs from it only in the
    fixed cells: the indentation (Jupyter writes 1), ``\\uXXXX`` escapes for non-ASCII text (some
    editors write them), ``<``, ``>`` and ``&`` escaped as ``\\u003c``... (Colab writes them) and
    whether the file starts with a byte-order mark and ends with a newline."""

    def __init__(self, raw: bytes) -> None:
        import re

        self.bom = raw.startswith(b"\xef\xbb\xbf")
        m = re.search(rb"\n( +)\S", raw[:4096])
        self.indent = len(m.group(1)) if m else 1
        self.ascii = raw.isascii()
        self.html_escapes = b"\\u003c" in raw or b"\\u003e" in raw or b"\\u0026" in raw
        self.newline = raw.endswith(b"\n")

    def dump(self, doc: dict) -> bytes:
        import json

        text = json.dumps(doc, indent=self.indent, ensure_ascii=self.ascii)
        if self.html_escapes:  # these characters only occur inside JSON strings
            text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        data = (text + ("\n" if self.newline else "")).encode("utf-8")
        return b"\xef\xbb\xbf" + data if self.bom else data


def _cell_source(original: object, lines: list[str]) -> object:
    """A fixed cell's source in the form the notebook stored it: a list of lines or one string,
    its line ends, with or without a final newline."""
    was = "".join(original) if isinstance(original, list) else (original or "")
    end = "\r\n" if "\r\n" in was else "\n"
    text = end.join(lines) + (end if was.endswith("\n") else "")
    if isinstance(original, str):
        return text
    return text.splitlines(keepends=True)


def _fix_notebook(
    outcome: FixOutcome, raw: bytes, enabled: frozenset[str], unsafe: bool, rules: list | None,
    target=None,
) -> FixOutcome:
    """Fix the code cells of a notebook: edits must stay within one cell and off IPython lines."""

    from tflint.check.engine import lint_text
    from tflint.check.source import decode_notebook

    try:
        src = decode_notebook(raw)
    except SourceError:
        return outcome
    doc = src.document
    if doc is None or src.notebook is None or not src.text:
        return outcome
    nb = src.notebook
    # The cells' texts, edited in place (lines without their "\n").
    cell_texts: list[list[str]] = []
    for index, _n in nb.cells:
        s = doc["cells"][index].get("source", "")
        s = "".join(s) if isinstance(s, list) else s
        s = s.replace("\r\n", "\n").replace("\r", "\n")
        if s.endswith("\n"):
            s = s[:-1]
        cell_texts.append(s.split("\n"))
    original_cells = [list(c) for c in cell_texts]
    original_sources = [doc["cells"][index].get("source", "") for index, _n in nb.cells]
    style = _JsonStyle(raw)
    text = src.text
    fixed = 0
    result = lint_text(outcome.path, text, enabled, rules=rules, target=target)
    for _ in range(MAX_PASSES):
        fixes = []
        for fx in _applicable(result.findings, unsafe):
            cells = {nb.locate(e.line)[0] for e in fx.edits} | {nb.locate(e.end_line)[0] for e in fx.edits}
            touches_magic = any(
                ln in nb.replaced for e in fx.edits for ln in range(e.line, e.end_line + 1)
            )
            if len(cells) == 1 and not touches_magic and all(e.line <= len(nb.lines) for e in fx.edits):
                fixes.append(fx)
        if not fixes:
            break
        # Apply per cell, in cell coordinates.
        by_cell: dict[int, list[Fix]] = {}
        for fx in fixes:
            cell = nb.locate(fx.edits[0].line)[0]
            local = tuple(
                Edit(nb.locate(e.line)[1], e.col, nb.locate(e.end_line)[1], e.end_col, e.content) for e in fx.edits
            )
            by_cell.setdefault(cell, []).append(Fix(fx.message, local, fx.applicability))
        n_total = 0
        for cell, cell_fixes in by_cell.items():
            cell_src = "\n".join(cell_texts[cell - 1])
            new_src, n = apply_fixes(cell_src, cell_fixes)
            if n:
                cell_texts[cell - 1] = new_src.split("\n")
                n_total += n
        if not n_total:
            break
        fixed += n_total
        for (index, _n), lines, before, source in zip(nb.cells, cell_texts, original_cells, original_sources):
            # cells no fix touched keep their source as it was stored (a string, CRLF line ends)
            doc["cells"][index]["source"] = source if lines == before else _cell_source(source, lines)
        new_raw = style.dump(doc)
        try:
            new_src = decode_notebook(new_raw)
        except SourceError as exc:  # pragma: no cover - we just wrote valid JSON
            outcome.problem = f"the fixed notebook is invalid ({exc.reason})"
            return outcome
        from tflint.check.parse import ParseError, parse

        try:
            parse(new_src.text)
        except ParseError as exc:
            outcome.problem = f"the fixed code would not parse ({exc.reason})"
            return outcome
        nb = new_src.notebook
        doc = new_src.document
        text = new_src.text
        result = lint_text(outcome.path, text, enabled, rules=rules, target=target)
    if not fixed or cell_texts == original_cells:
        from tflint.check.engine import lint_bytes

        outcome.findings = lint_bytes(outcome.path, raw, enabled, rules, target=target).findings
        return outcome
    problem = parses(text)
    if problem:
        outcome.problem = f"the fixed code would not parse ({problem})"
        return outcome
    from tflint.check.engine import lint_bytes

    new_raw = style.dump(doc)
    outcome.new_raw = new_raw
    outcome.fixed = fixed
    outcome.findings = lint_bytes(outcome.path, new_raw, enabled, rules, target=target).findings
    outcome.old_text = raw.decode("utf-8-sig", "replace")
    outcome.new_text = new_raw.decode("utf-8-sig")
    return outcome
