"""Turn a file's bytes into the Python text tflint analyzes.

Python files honour a UTF-8 BOM and a PEP 263 coding cookie. Notebooks (``.ipynb``) become
the concatenation of their code cells, each cell read as Jupyter runs it: through IPython's
own input transformation (leading indentation, prompts, ``%``/``%%`` magics, ``!cmd`` shell
escapes with their continuation lines, ``?`` help) when IPython is installed, through an
equivalent built-in transformation when it is not (:mod:`tflint.check.ipython`). The text keeps
one line per line of each cell, so :class:`NotebookMap` maps a line and column of that text
back to ``(cell, line within cell, column)``. A cell that still does not parse is blanked and
reported on its own (:func:`isolate_unparsable_cells`); the other cells are checked.

Failures raise :class:`SourceError` carrying a reason and a position, which the engine
reports as ``TFL000``.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

_BOM = b"\xef\xbb\xbf"
# PEP 263: the cookie must be on line 1 or 2, in a comment.
_COOKIE_RE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT_RE = re.compile(rb"^[ \t\f]*(?:[#\r\n]|$)")

class SourceError(Exception):
    """A file that cannot be turned into Python text; ``line``/``col`` as in ``ast``."""

    def __init__(self, reason: str, line: int = 1, col: int = 0, cell: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.col = col
        self.cell = cell


@dataclass
class NotebookMap:
    """Where each line of the concatenated notebook text comes from."""

    # index i (0-based line of the concatenated text) -> (cell, 1-based line in the cell)
    lines: list[tuple[int, int]] = field(default_factory=list)
    # 1-based lines of the concatenated text that IPython's transformation rewrote or that
    # were moved left (a dedented cell, a stripped prompt): never edited by fixes
    replaced: set[int] = field(default_factory=set)
    # per code cell: (index in the notebook's "cells" list, number of lines)
    cells: list[tuple[int, int]] = field(default_factory=list)
    # index i -> columns removed at the start of that line (dedent, prompt); 0 when absent
    cols: list[int] = field(default_factory=list)

    def locate(self, line: int) -> tuple[int, int]:
        """``(cell, line)`` for a 1-based line of the concatenated text."""
        if not self.lines:
            return (1, 1)
        i = min(max(line, 1), len(self.lines)) - 1
        return self.lines[i]

    def position(self, line: int, col: int) -> tuple[int, int, int]:
        """``(cell, line, col)`` in the cell's own text for a position of the concatenated text."""
        cell, cline = self.locate(line)
        i = line - 1
        shift = self.cols[i] if 0 <= i < len(self.cols) else 0
        return cell, cline, col + shift


@dataclass
class Source:
    """A decoded file: ``text`` is what is parsed; ``encoding`` how to write it back."""

    text: str
    encoding: str = "utf-8"
    bom: bool = False
    notebook: NotebookMap | None = None
    # For notebooks: the parsed JSON document, and the cells' original sources.
    document: dict | None = None


def is_notebook_path(path: str) -> bool:
    return path.endswith(".ipynb")


def _line_col_of_byte(raw: bytes, offset: int) -> tuple[int, int]:
    head = raw[:offset]
    line = head.count(b"\n") + 1
    start = head.rfind(b"\n") + 1
    return line, offset - start


def detect_encoding(raw: bytes) -> tuple[str, bool]:
    """The encoding of Python source ``raw`` and whether it starts with a UTF-8 BOM."""
    bom = raw.startswith(_BOM)
    body = raw[3:] if bom else raw
    first, _, rest = body.partition(b"\n")
    candidates = [(1, first)]
    if _BLANK_OR_COMMENT_RE.match(first):
        candidates.append((2, rest.partition(b"\n")[0]))
    for lineno, line in candidates:
        m = _COOKIE_RE.match(line)
        if not m:
            continue
        name = m.group(1).decode("ascii", "replace")
        try:
            info = codecs.lookup(name)
        except LookupError:
            raise SourceError(f"unknown encoding {name!r} in coding cookie", lineno, 0) from None
        if bom:
            # As Python's tokenizer: with a BOM the cookie must spell UTF-8 (`utf-8`, `utf_8`,
            # `utf-8-sig`...; `utf8` is refused by Python itself).
            spelled = name[:12].lower().replace("_", "-")
            if not (spelled == "utf-8" or spelled.startswith("utf-8-")) or info.name not in ("utf-8", "utf-8-sig"):
                raise SourceError(f"encoding problem: {name} with a UTF-8 BOM", lineno, 0)
            return "utf-8", bom
        return info.name, bom
    return "utf-8", bom


def decode_python(raw: bytes) -> Source:
    """Decode Python source bytes, or raise :class:`SourceError`."""
    nul = raw.find(b"\0", 0, 8192)
    if nul >= 0:
        line, col = _line_col_of_byte(raw, nul)
        raise SourceError("binary file (contains NUL bytes)", line, col)
    encoding, bom = detect_encoding(raw)
    body = raw[3:] if bom else raw
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        line, col = _line_col_of_byte(body, exc.start)
        raise SourceError(
            f"cannot decode as {encoding}: invalid byte 0x{body[exc.start]:02x}", line, col
        ) from None
    except (UnicodeError, LookupError) as exc:  # e.g. a cookie naming `undefined` or `rot13`
        raise SourceError(f"cannot decode as {encoding}: {exc}", 1, 0) from None
    if "\0" in text:
        # NUL after the first 8 KiB, or produced by the codec.
        idx = text.index("\0")
        line = text.count("\n", 0, idx) + 1
        raise SourceError("source contains NUL characters", line, idx - (text.rfind("\n", 0, idx) + 1))
    return Source(text=text, encoding=encoding, bom=bom)


def _cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        if not all(isinstance(s, str) for s in src):
            raise TypeError("source must be a string or a list of strings")
        return "".join(src)
    if isinstance(src, str):
        return src
    raise TypeError("source must be a string or a list of strings")


def decode_notebook(raw: bytes) -> Source:
    """The code cells of a Jupyter notebook as one Python text, or raise :class:`SourceError`."""
    import json

    from tflint.check.ipython import transform_cell

    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, col = _line_col_of_byte(raw, exc.start)
        raise SourceError(f"notebook is not UTF-8: invalid byte 0x{raw[exc.start]:02x}", line, col) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"invalid notebook JSON: {exc.msg}", exc.lineno, max(exc.colno - 1, 0)) from None
    except RecursionError:
        raise SourceError("invalid notebook JSON: nested too deeply") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise SourceError("invalid notebook: no 'cells' list (nbformat 4 expected)")
    meta = doc.get("metadata")
    language = None
    if isinstance(meta, dict):
        info = meta.get("language_info")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            language = info["name"].lower()
        kernel = meta.get("kernelspec")
        if language is None and isinstance(kernel, dict) and isinstance(kernel.get("language"), str):
            language = kernel["language"].lower()
    nbmap = NotebookMap()
    parts: list[str] = []
    if language not in (None, "python", "python3"):
        return Source(text="", notebook=nbmap, document=doc)
    ncode = 0
    for index, cell in enumerate(doc["cells"]):
        if not isinstance(cell, dict):
            raise SourceError(f"invalid notebook: cell {index + 1} is not an object")
        if cell.get("cell_type") != "code":
            continue
        ncode += 1
        try:
            code = _cell_source(cell)
        except TypeError as exc:
            raise SourceError(f"invalid notebook: code cell {ncode}: {exc}", cell=ncode) from None
        code = code.replace("\r\n", "\n").replace("\r", "\n")
        if code.endswith("\n"):
            code = code[:-1]
        cell_text = transform_cell(code)
        base = len(nbmap.lines)
        for i, ln in enumerate(cell_text.lines):
            nbmap.lines.append((ncode, i + 1))
            nbmap.cols.append(cell_text.cols[i])
            parts.append(ln)
            if i in cell_text.replaced or cell_text.cols[i]:
                nbmap.replaced.add(base + i + 1)
        nbmap.cells.append((index, len(cell_text.lines)))
    text = "\n".join(parts) + ("\n" if parts else "")
    return Source(text=text, notebook=nbmap, document=doc)


_FUTURE_RE = re.compile(r"from[ \t]+__future__[ \t]+import\b")


def isolate_unparsable_cells(text: str, nb: NotebookMap) -> tuple[str, list[tuple[int, int, int, str]]]:
    """Blank every cell of the concatenated ``text`` that does not parse on its own.

    Returns the new text (same number of lines) and, for each such cell, ``(cell, line, col,
    reason)`` located in the cell's own text. The blanked lines join ``nb.replaced``.
    """
    from tflint.check.parse import ParseError, parse

    lines = text.split("\n")
    bad: list[tuple[int, int, int, str]] = []
    start = 0
    for _index, count in nb.cells:
        chunk = lines[start:start + count]
        try:
            parse("\n".join(chunk) + "\n")
        except ParseError as exc:
            line = start + min(max(exc.line, 1), max(count, 1))
            cell, cline, ccol = nb.position(line, exc.col)
            bad.append((cell, cline, ccol, exc.reason))
            for i in range(start, start + count):
                lines[i] = ""
                nb.replaced.add(i + 1)
        start += count
    if not bad:
        # Every cell parses alone: what fails is the concatenation, a `from __future__` import
        # of a later cell (Jupyter compiles each cell on its own). It becomes `pass`.
        for i, ln in enumerate(lines):
            if i and _FUTURE_RE.match(ln):
                lines[i] = "pass"
                nb.replaced.add(i + 1)
    return "\n".join(lines), bad


def decode(path: str, raw: bytes) -> Source:
    """Decode ``raw`` read from ``path`` (a notebook when it ends in ``.ipynb``)."""
    if is_notebook_path(path):
        return decode_notebook(raw)
    return decode_python(raw)


def newline_of(text: str) -> str:
    """The newline style of ``text``: that of its first line break (``\\n`` if none)."""
    i = text.find("\n")
    j = text.find("\r")
    if j >= 0 and (i < 0 or j < i):
        return "\r\n" if text.startswith("\r\n", j) else "\r"
    return "\n"
