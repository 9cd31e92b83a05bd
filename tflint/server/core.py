"""What ``tflint server`` computes, independent of the protocol: findings for a Python text or
for a notebook's cells, the project configuration governing a path (re-read when a
configuration file changes), fixes, ``# noqa`` edits and rule documentation.

Everything goes through the ``tflint check`` pipeline (:mod:`tflint.check.engine`,
:mod:`tflint.check.config`, :mod:`tflint.check.fix`); nothing here imports TensorFlow or runs
the code it is given.
"""

from __future__ import annotations

import io
import json
import os
import re
import tokenize
from dataclasses import dataclass, field

from tflint.check.config import CONFIG_NAMES, ConfigError, ConfigFinder, Overrides, Settings, make_settings
from tflint.finding import Edit, Finding

# A notebook is checked as an in-memory ``.ipynb`` of its code cells: the same decoding (IPython
# lines, cell mapping) as `tflint check nb.ipynb`.
_NOTEBOOK_META = {"language_info": {"name": "python"}}


@dataclass
class Outcome:
    """Findings for one document (for notebooks: ``cell`` is the 1-based code-cell index)."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # internal errors (a rule that raised)
    config_error: str | None = None
    excluded: bool = False


class ConfigCache:
    """The settings for each directory, rebuilt when a configuration file above it changes.

    A change is seen by the files' modification times (checked on every lookup: a few
    ``stat`` calls), and :meth:`invalidate` drops everything (on a watched-files notice).
    """

    def __init__(self, root: str | None = None) -> None:
        self.root = os.path.abspath(root or os.getcwd())
        self._by_dir: dict[str, tuple[tuple, Settings, str | None]] = {}

    def invalidate(self) -> None:
        self._by_dir.clear()

    @staticmethod
    def _signature(directory: str) -> tuple:
        sig = []
        d = directory
        while True:
            for name in CONFIG_NAMES:
                p = os.path.join(d, name)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                sig.append((p, st.st_mtime_ns, st.st_size))
            parent = os.path.dirname(d)
            if parent == d:
                return tuple(sig)
            d = parent

    def settings_for(self, path: str) -> tuple[Settings, str | None]:
        """The settings governing ``path`` and, if its configuration is invalid, why."""
        directory = os.path.dirname(os.path.abspath(path))
        sig = self._signature(directory)
        hit = self._by_dir.get(directory)
        if hit is not None and hit[0] == sig:
            return hit[1], hit[2]
        error = None
        try:
            config = ConfigFinder(self.root).for_dir(directory)
            settings = make_settings(config, Overrides(), self.root)
        except (ConfigError, ValueError) as exc:
            error = str(exc)
            settings = make_settings(ConfigFinder(self.root).default, Overrides(), self.root)
        self._by_dir[directory] = (sig, settings, error)
        return settings, error


def is_excluded(cache: ConfigCache, abspath: str) -> bool:
    """``abspath`` or a directory above it (up to its configuration's root) is excluded, as
    ``tflint check --force-exclude`` decides for a path named explicitly."""
    stop = cache.settings_for(abspath)[0].config.root
    p = abspath
    while True:
        if cache.settings_for(p)[0].is_excluded(p):
            return True
        parent = os.path.dirname(p)
        if parent == p or p == stop or not parent.startswith(stop):
            return False
        p = parent


def _enabled(cache: ConfigCache, path: str, outcome: Outcome) -> frozenset[str] | None:
    settings, error = cache.settings_for(path)
    outcome.config_error = error
    abspath = os.path.abspath(path)
    if is_excluded(cache, abspath):
        outcome.excluded = True
        return None
    return settings.enabled_for(abspath)


def lint_python(cache: ConfigCache, path: str, text: str) -> Outcome:
    from tflint.check.engine import lint_text

    outcome = Outcome()
    enabled = _enabled(cache, path, outcome)
    if enabled is None:
        return outcome
    result = lint_text(path, text, enabled)
    outcome.findings = list(result.findings)
    outcome.errors = list(result.errors)
    return outcome


def notebook_bytes(cells: list[str]) -> bytes:
    """An nbformat 4 document whose code cells are ``cells``."""
    doc = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
            for c in cells
        ],
        "metadata": _NOTEBOOK_META,
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def notebook_path(path: str) -> str:
    return path if path.endswith(".ipynb") else path + ".ipynb"


def lint_notebook(cache: ConfigCache, path: str, cells: list[str]) -> Outcome:
    """Findings for a notebook's Python code ``cells`` (in order); ``Finding.cell`` indexes them."""
    from tflint.check.engine import lint_bytes

    outcome = Outcome()
    enabled = _enabled(cache, path, outcome)
    if enabled is None:
        return outcome
    result = lint_bytes(notebook_path(path), notebook_bytes(cells), enabled)
    outcome.findings = list(result.findings)
    outcome.errors = list(result.errors)
    return outcome


def _encode_like_file(text: str) -> bytes:
    from tflint.check.source import detect_encoding

    raw = text.encode("utf-8")
    try:
        encoding, _bom = detect_encoding(raw)
        return text.encode(encoding)
    except Exception:  # noqa: BLE001 - an odd cookie: the decoder reports it as TFL000
        return raw


def fix_all_python(cache: ConfigCache, path: str, text: str, unsafe: bool = False) -> str | None:
    """``text`` with every (safe) fix applied, or ``None`` when nothing changes."""
    from tflint.check.fix import fix_file

    outcome = Outcome()
    enabled = _enabled(cache, path, outcome)
    if enabled is None:
        return None
    result = fix_file(path, _encode_like_file(text), enabled, unsafe=unsafe)
    if result.new_raw is None or result.problem or result.new_text == text:
        return None
    return result.new_text


def fix_all_notebook(cache: ConfigCache, path: str, cells: list[str], unsafe: bool = False) -> list[str] | None:
    """The code cells with every (safe) fix applied, or ``None`` when nothing changes."""
    from tflint.check.fix import fix_file

    outcome = Outcome()
    enabled = _enabled(cache, path, outcome)
    if enabled is None:
        return None
    result = fix_file(notebook_path(path), notebook_bytes(cells), enabled, unsafe=unsafe)
    if result.new_raw is None or result.problem:
        return None
    doc = json.loads(result.new_raw.decode("utf-8"))
    new_cells = []
    for cell in doc.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        new_cells.append("".join(src) if isinstance(src, list) else src)
    if len(new_cells) != len(cells):
        return None
    out = []
    for old, new in zip(cells, new_cells):
        norm_old = old.replace("\r\n", "\n").replace("\r", "\n")
        if new == norm_old.rstrip("\n") or new == norm_old:
            out.append(old)  # unchanged (the notebook writer drops a final newline)
        else:
            out.append(new + ("\n" if norm_old.endswith("\n") and not new.endswith("\n") else ""))
    return out if out != cells else None


# -- # noqa -----------------------------------------------------------------------------------

_NOQA_RE = re.compile(r"#\s*noqa(?P<colon>:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)


def _lines_inside_strings(text: str) -> set[int]:
    """1-based lines whose end lies inside a string spanning several lines (no comment fits)."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                if tok.end[0] > tok.start[0]:
                    inside.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return inside


def noqa_edit(text: str, finding: Finding) -> Edit | None:
    """An edit adding ``# noqa: CODE`` to the finding's line (or its last line), or ``None``.

    Codes already listed are kept (``# noqa: TFL101`` becomes ``# noqa: TFL101, TFL201``); a
    bare ``# noqa`` already suppresses everything.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocked = _lines_inside_strings(text)
    for line in dict.fromkeys((finding.line, finding.end_line)):
        if not 1 <= line <= len(lines) or line in blocked:
            continue
        content = lines[line - 1]
        m = _NOQA_RE.search(content)
        if m and "#" in content[: m.start() + 1]:
            if not m.group("colon"):
                return None  # bare noqa: already everything
            codes = re.split(r"[\s,]+", m.group("codes"))
            if finding.code.upper() in (c.upper() for c in codes):
                return None
            end = m.end("codes")
            return Edit(line, end, line, end, f", {finding.code}")
        stripped = len(content.rstrip())
        return Edit(line, stripped, line, len(content), f"  # noqa: {finding.code}")
    return None


# -- documentation ----------------------------------------------------------------------------

_CODE_AT_RE = re.compile(r"TFL\d{3}", re.IGNORECASE)


def code_in_comment(line_text: str, col: int) -> str | None:
    """The rule code under ``col`` when it is in a comment of ``line_text`` (``# noqa: TFL101``)."""
    hash_at = line_text.find("#")
    if hash_at < 0 or col < hash_at:
        return None
    for m in _CODE_AT_RE.finditer(line_text, hash_at):
        if m.start() <= col <= m.end():
            return m.group(0).upper()
    return None


def rule_markdown(code: str, finding: Finding | None = None) -> str | None:
    """A rule's documentation as Markdown, for hovers."""
    from tflint.check.render.ruledoc import clean, rule_body, severity_of
    from tflint.rules import get_rule

    rule = get_rule(code)
    if rule is None:
        if finding is not None:
            return f"**{finding.code}**: {finding.message}"
        return None
    parts = []
    if finding is not None:
        parts.append(f"**{finding.code}**: {finding.message}")
        parts.append("---")
    parts.append(f"### {rule.code} {rule.name} ({severity_of(rule)})")
    summary = clean(getattr(rule, "summary", ""))
    if summary:
        parts.append(summary)
    parts.append(rule_body(rule, "####"))
    try:
        url = rule.url()
    except Exception:  # noqa: BLE001
        url = None
    if url:
        parts.append(f"[Documentation]({url})")
    return "\n\n".join(parts)


def rule_url(finding: Finding) -> str | None:
    if finding.url:
        return finding.url
    from tflint.rules import get_rule

    rule = get_rule(finding.code)
    try:
        return rule.url() if rule is not None else None
    except Exception:  # noqa: BLE001
        return None
