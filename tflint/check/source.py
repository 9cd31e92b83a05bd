"""Turn a file's bytes into the Python text tflint analyzes.

Python files honour a UTF-8 BOM and a PEP 263 coding cookie. Notebooks (``.ipynb``) become
the concatenation of their code cells, with IPython-only lines (magics, shell escapes, help
queries) replaced by ``pass`` at the same indentation so that line numbers and block
structure are preserved; :class:`NotebookMap` maps a line of that text back to
``(cell, line within cell)``.

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

# An IPython line: a line magic, a shell escape, a help query, or an assignment from one.
_MAGIC_LINE_RE = re.compile(
    r"""^(?P<indent>[ \t]*)(?:
        [%!]                              # %magic, !shell
        | \?                              # ?name
        | [^#'"\n]*[^\s#'"]\?{1,2}[ \t]*$ # name? / name??
        | [A-Za-z_][\w.,\s\[\]()*]*=[ \t]*[%!][^=]  # x = !ls / x = %sx ls
    )""",
    re.VERBOSE,
)


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
    # 1-based lines of the concatenated text that were replaced (never edited by fixes)
    replaced: set[int] = field(default_factory=set)
    # per code cell: (index in the notebook's "cells" list, number of lines)
    cells: list[tuple[int, int]] = field(default_factory=list)

    def locate(self, line: int) -> tuple[int, int]:
        """``(cell, line)`` for a 1-based line of the concatenated text."""
        if not self.lines:
            return (1, 1)
        i = min(max(line, 1), len(self.lines)) - 1
        return self.lines[i]


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


def _strip_ipython(code: str) -> tuple[list[str], set[int]]:
    """Lines of a cell with IPython-only lines replaced; and the 0-based replaced indices."""
    lines = code.split("\n")
    first = next((ln for ln in lines if ln.strip()), "")
    if first.lstrip().startswith("%%"):
        # A cell magic: the whole cell is for another interpreter.
        return ["" for _ in lines], {i for i, ln in enumerate(lines) if ln.strip()}
    if not any(_MAGIC_LINE_RE.match(ln) for ln in lines):
        return lines, set()
    try:
        compile(code, "<cell>", "exec", 0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
        return lines, set()  # valid Python already (e.g. a `%` continuation line)
    except (SyntaxError, ValueError):
        pass
    out: list[str] = []
    replaced: set[int] = set()
    for i, ln in enumerate(lines):
        m = _MAGIC_LINE_RE.match(ln)
        if m:
            out.append(m.group("indent") + "pass")
            replaced.add(i)
        else:
            out.append(ln)
    return out, replaced


def decode_notebook(raw: bytes) -> Source:
    """The code cells of a Jupyter notebook as one Python text, or raise :class:`SourceError`."""
    import json

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
        lines, replaced = _strip_ipython(code)
        base = len(nbmap.lines)
        for i, ln in enumerate(lines):
            nbmap.lines.append((ncode, i + 1))
            parts.append(ln)
            if i in replaced:
                nbmap.replaced.add(base + i + 1)
        nbmap.cells.append((index, len(lines)))
    text = "\n".join(parts) + ("\n" if parts else "")
    return Source(text=text, notebook=nbmap, document=doc)


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
