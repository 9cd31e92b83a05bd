"""A notebook cell as the Python that Jupyter runs, one output line per line of the cell.

IPython rewrites a cell before Python sees it: it drops the indentation of the first line from
every line, strips ``>>>`` and ``In [1]:`` prompts, and turns ``%magic`` lines, ``!shell``
escapes (with their backslash continuation lines), ``x = !cmd`` / ``x = %magic`` assignments and
``name?`` help queries into calls on ``get_ipython()``. :func:`transform_cell` gives that
Python text with IPython's own ``TransformerManager`` when IPython is importable (imported on the
first cell that needs it, never for a cell that is plain Python), and with an equivalent
built-in transformation otherwise.

The result keeps one line per line of the cell so that positions map back: a rewritten logical
line becomes one line followed by blank lines, and each line records how many columns were
removed at its start. Cell magics whose body is Python (``%%time``, ``%%timeit``,
``%%capture``, ``%%prun``) keep that body as code (IPython would hide it in a string); any
other cell magic (``%%bash``, ``%%writefile``...) makes the cell blank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Cell magics that run their body as IPython code.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})

# Lines that IPython might rewrite; a cell without one (whose first line is not indented or a
# prompt) is left alone without asking IPython. Autocall escapes (``/f x``, ``,f x``) are not
# looked for: lines starting with ``/`` or ``,`` are mostly continuation lines of Python.
_ESCAPE_RE = re.compile(r"^[ \t]*[%!?]", re.MULTILINE)
_HELP_END_LINE_RE = re.compile(r"\?[ \t]*$", re.MULTILINE)
_ASSIGN_LINE_RE = re.compile(r"^[ \t]*[^\s#'\"(][^#=\n]*=[ \t]*[%!]", re.MULTILINE)
_PROMPT_RE = re.compile(r"(>>>|\.\.\.)( |$)|In \[\d*\]:")
_CLASSIC_PROMPT_RE = re.compile(r"^(>>>|\.\.\.)( |$)")
_IPYTHON_PROMPT_RE = re.compile(r"^(In \[\d+\]: |\s*\.\.\.+: )")


@dataclass
class CellText:
    lines: list[str]  # as many as the cell has
    cols: list[int]  # columns removed at the start of each line
    replaced: set[int] = field(default_factory=set)  # 0-based lines rewritten by the transformation
    via: str = "none"  # "ipython", "builtin" or "none" (left alone)


_manager = None  # IPython's TransformerManager, once imported; False when IPython is missing


def _ipython_manager():
    global _manager
    if _manager is None:
        try:
            _manager = _load_transformer_manager()()
        except Exception:  # noqa: BLE001 - not installed, or broken: the built-in path is used
            _manager = False
    return _manager or None


def _load_transformer_manager():
    """IPython's ``TransformerManager`` class.

    Importing ``IPython.core.inputtransformer2`` runs ``IPython/__init__.py``, which loads the
    whole interactive shell (about 0.1 s). The transformer itself needs only the standard
    library and ``IPython.utils.tokenutil``, so outside an IPython process those two files of
    the installed IPython are loaded on their own, under private names; any surprise (another
    layout, another import) falls back to the regular import.
    """
    import sys

    if "IPython" not in sys.modules:
        try:
            return _load_light()
        except Exception:  # noqa: BLE001
            pass
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager


def _load_light():
    import importlib.util
    import os
    import sys
    import types

    spec = importlib.util.find_spec("IPython")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("IPython is not installed")
    root = list(spec.submodule_search_locations)[0]

    def load(name: str, rel: str) -> types.ModuleType:
        mspec = importlib.util.spec_from_file_location(name, os.path.join(root, *rel.split("/")))
        if mspec is None or mspec.loader is None:
            raise ImportError(rel)
        module = importlib.util.module_from_spec(mspec)
        mspec.loader.exec_module(module)
        return module

    tokenutil = load("_tflint_ipython_tokenutil", "utils/tokenutil.py")
    # `from IPython.utils import tokenutil` inside the transformer: satisfied by placeholders
    # that exist only while it is executed.
    placeholders = {"IPython": types.ModuleType("IPython"), "IPython.utils": types.ModuleType("IPython.utils"),
                    "IPython.utils.tokenutil": tokenutil}
    placeholders["IPython"].utils = placeholders["IPython.utils"]  # type: ignore[attr-defined]
    placeholders["IPython.utils"].tokenutil = tokenutil  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in placeholders}
    sys.modules.update(placeholders)
    try:
        it2 = load("_tflint_ipython_inputtransformer2", "core/inputtransformer2.py")
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return it2.TransformerManager


def transform_cell(code: str, use_ipython: bool = True) -> CellText:
    """The Python text of a cell's source ``code`` (lines split on ``\\n``)."""
    lines = code.split("\n")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return CellText(lines, [0] * len(lines))
    head = lines[first].lstrip()
    if head.startswith("%%"):
        return _cell_magic(lines, first, head, use_ipython)
    if not _may_need_ipython(code, lines[first]):
        return CellText(lines, [0] * len(lines))
    manager = _ipython_manager() if use_ipython else None
    if manager is not None:
        try:
            out = manager.transform_cell(code)
        except Exception:  # noqa: BLE001 - IPython gave up: fall back
            out = None
        if out is not None:
            aligned = _align(lines, out)
            if aligned is not None:
                return aligned
    return _builtin(lines)


def _may_need_ipython(code: str, first: str) -> bool:
    if first[:1] in (" ", "\t") or _PROMPT_RE.match(first):
        return True
    if ("%" in code or "!" in code) and (_ESCAPE_RE.search(code) or _ASSIGN_LINE_RE.search(code)):
        return True
    if "?" in code:
        for m in _HELP_END_LINE_RE.finditer(code):
            start = code.rfind("\n", 0, m.start()) + 1
            if "#" not in code[start:m.start()]:
                return True
        return _ESCAPE_RE.search(code) is not None
    return False


def _cell_magic(lines: list[str], first: int, head: str, use_ipython: bool) -> CellText:
    name = re.match(r"%%(\S*)", head).group(1)  # type: ignore[union-attr]
    n = len(lines)
    if name in PYTHON_BODY_CELL_MAGICS and first + 1 < n:
        body = transform_cell("\n".join(lines[first + 1:]), use_ipython)
        blank = [""] * (first + 1)
        return CellText(
            blank + body.lines,
            [0] * (first + 1) + body.cols,
            {first} | {first + 1 + i for i in body.replaced},
            via=body.via if body.via != "none" else "builtin",
        )
    return CellText([""] * n, [0] * n, {i for i, ln in enumerate(lines) if ln.strip()}, via="builtin")


# --- mapping IPython's output back to the cell's lines ----------------------------------------


def _align(orig: list[str], text: str) -> CellText | None:
    """Line up IPython's output with the cell; ``None`` when the two cannot be lined up.

    IPython's output is the cell's lines, some with a prefix removed (indentation, a prompt),
    some logical lines collapsed into one ``get_ipython()`` line, leading blank lines dropped.
    """
    new = text.split("\n")
    if new and new[-1] == "":
        new.pop()
    n = len(orig)
    out = [""] * n
    cols = [0] * n
    replaced: set[int] = set()
    i = 0
    for j, nl in enumerate(new):
        if nl.strip():
            while i < n and not orig[i].strip():  # blank lines IPython dropped
                i += 1
        if i >= n:
            return None
        ol = orig[i]
        if ol.endswith(nl) and (nl.strip() or not ol.strip()):
            out[i], cols[i] = nl, len(ol) - len(nl)
            i += 1
            continue
        if not nl.strip():
            return None
        end = _backslash_end(orig, i)
        nxt = new[j + 1] if j + 1 < len(new) else None
        # the collapsed line may run further (a bracket IPython's tokenizer saw): up to the
        # line the next output line comes from
        if nxt is not None and nxt.strip() and end + 1 < n and not orig[end + 1].endswith(nxt):
            k = end + 1
            while k < n and not orig[k].endswith(nxt):
                k += 1
            if k < n:
                end = k - 1
        indent_o = len(ol) - len(ol.lstrip())
        indent_n = len(nl) - len(nl.lstrip())
        out[i], cols[i] = nl, max(indent_o - indent_n, 0)
        replaced.update(range(i, end + 1))
        i = end + 1
    if any(orig[k].strip() for k in range(i, n)):
        return None
    return CellText(out, cols, replaced, via="ipython")


# --- the built-in transformation --------------------------------------------------------------


class _Scanner:
    """Python's line continuation rules, enough to find where a logical line ends."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # the open string's quote: ', ", ''' or """

    def feed(self, line: str) -> bool:
        """Scan one line; True when the logical line continues on the next."""
        i, n = 0, len(line)
        comment = False
        while i < n:
            c = line[i]
            if self.quote is not None:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
                i += 1
                continue
            if c == "#":
                comment = True
                break
            if c in "'\"":
                triple = line[i:i + 3]
                self.quote = triple if triple in ("'''", '"""') else c
                i += len(self.quote)
                continue
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(self.depth - 1, 0)
            i += 1
        if self.quote in ("'", '"'):
            if line.endswith("\\"):
                return True
            self.quote = None  # an unterminated one-line string ends with its line
        if self.quote is not None or self.depth > 0:
            return True
        return not comment and line.rstrip().endswith("\\")


def _logical_end(lines: list[str], i: int) -> int:
    """The last line of the logical line that starts at ``lines[i]``."""
    sc = _Scanner()
    k = i
    while k < len(lines) and sc.feed(lines[k]):
        k += 1
    return min(k, len(lines) - 1)


def _strip_prefixes(lines: list[str]) -> tuple[list[str], list[int]]:
    """IPython's clean-up transforms: leading indentation, then ``>>>`` / ``In [1]:`` prompts."""
    cols = [0] * len(lines)
    out = list(lines)
    first = next((ln for ln in out if ln.strip()), "")
    indent = first[: len(first) - len(first.lstrip())]
    if indent:
        for i, ln in enumerate(out):
            if ln.startswith(indent):
                out[i] = ln[len(indent):]
                cols[i] += len(indent)
    for rx, marker in ((_CLASSIC_PROMPT_RE, ">>>"), (_IPYTHON_PROMPT_RE, "In [")):
        first = next((ln for ln in out if ln.strip()), "")
        if not first.startswith(marker) or not rx.match(first):
            continue
        for i, ln in enumerate(out):
            m = rx.match(ln)
            if m:
                out[i] = ln[m.end():]
                cols[i] += m.end()
    return out, cols


_HELP_END_RE = re.compile(r"(%{0,2}(?!\d)[\w*]+(\.(?!\d)[\w*]+|\[-?[0-9]+\])*)(\?\??)$")


def _call(indent: str, lhs: str, esc: str, body: str) -> str:
    """The ``get_ipython()`` call IPython writes for an escaped line."""
    if esc == "!!" or (esc == "!" and lhs):
        call = f"get_ipython().getoutput({body!r})"
    elif esc == "!":
        call = f"get_ipython().system({body!r})"
    else:  # a magic, or help as the magic that shows it
        name, _, args = body.partition(" ")
        call = f"get_ipython().run_line_magic({name!r}, {args!r})"
    return f"{indent}{lhs + ' = ' if lhs else ''}{call}"


def _help_call(indent: str, target: str, double: bool) -> str:
    method = "pinfo2" if double else "psearch" if "*" in target else "pinfo"
    if not target:
        return f"{indent}get_ipython().show_usage()"
    return _call(indent, "", "%", f"{method} {target}")


def _rewrite_escape(logical: str) -> str | None:
    """The Python for a line that starts with an IPython escape (continuations joined)."""
    stripped = logical.lstrip()
    indent = logical[: len(logical) - len(stripped)]
    split = _assign_split(stripped)
    if split is not None:
        lhs, esc, rest = split
        return _call(indent, lhs, esc, rest.strip() if esc == "%" else rest)
    if stripped.startswith("??"):
        return _help_call(indent, stripped[2:].strip(), True)
    if stripped.startswith("?"):
        return _help_call(indent, stripped[1:].strip(), False)
    if stripped.startswith("%%"):  # not on the first line: IPython runs it as a line magic
        return _call(indent, "", "%", stripped[1:])
    for esc in ("!!", "!", "%"):
        if stripped.startswith(esc):
            return _call(indent, "", esc, stripped[len(esc):])
    if stripped[:1] in (",", ";", "/"):
        return f"{indent}get_ipython()"
    return None


def _rewrite_help(line: str) -> str | None:
    """``obj?`` / ``obj??`` at the end of a one-line logical line."""
    if not line.rstrip().endswith("?") or not _help_target(line):
        return None
    stripped = line.lstrip()
    m = _HELP_END_RE.search(stripped.rstrip())
    if m is None:
        return None  # IPython leaves it, and Python rejects it
    return _help_call(line[: len(line) - len(stripped)], m.group(1), m.group(3) == "??")


def _backslash_end(lines: list[str], i: int) -> int:
    k = i
    while k + 1 < len(lines) and lines[k].rstrip().endswith("\\"):
        k += 1
    return k


def _code(line: str):
    """The characters of ``line`` outside string literals, with their index, up to a
    comment; a string literal shows as one ``"s"`` at its opening quote. The generator's
    return value (``StopIteration.value``) says whether a string is left open."""
    quote: str | None = None
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote is not None:
            if c == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 1
            continue
        if c == "#":
            break
        if c in "'\"":
            triple = line[i:i + 3]
            quote = triple if triple in ("'''", '"""') else c
            yield i, "s"
            i += len(quote)
            continue
        yield i, c
        i += 1
    return quote is not None


def _assign_split(line: str) -> tuple[str, str, str] | None:
    """``lhs = !cmd`` / ``lhs = %magic args``: (lhs, escape, rest), with the ``=`` found
    outside strings and brackets."""
    depth = 0
    for i, c in _code(line):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "=" and depth == 0:
            if line[i + 1:i + 2] == "=" or (i and line[i - 1] in "=!<>+-*/%&|^@:~"):
                return None
            rest = line[i + 1:].lstrip()
            if rest[:1] in ("!", "%") and rest[:2] != "!=" and line[:i].strip():
                return line[:i].rstrip(), rest[0], rest[1:]
            return None
    return None


def _help_target(line: str) -> bool:
    """``line`` ends with ``?`` outside strings and comments (a help query)."""
    scan = _code(line)
    code: list[str] = []
    while True:
        try:
            code.append(next(scan)[1])
        except StopIteration as done:
            open_string = done.value
            break
    return not open_string and "".join(code).rstrip().endswith("?")


def _builtin(orig: list[str]) -> CellText:
    lines, cols = _strip_prefixes(orig)
    n = len(lines)
    out = list(lines)
    replaced: set[int] = set()
    i = 0
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        # an escape takes its backslash continuation lines, as IPython's
        bend = _backslash_end(lines, i)
        group = lines[i:bend + 1]
        joined = " ".join([p.rstrip()[:-1] for p in group[:-1]] + [group[-1].rstrip()])
        new = _rewrite_escape(joined)
        end = bend
        if new is None:
            end = _logical_end(lines, i)
            new = _rewrite_help(lines[i]) if end == i else None
        if new is not None:
            out[i] = new
            for k in range(i + 1, end + 1):
                out[k] = ""
            replaced.update(range(i, end + 1))
        i = end + 1
    return CellText(out, cols, replaced, via="builtin")
