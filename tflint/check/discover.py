"""Which files ``tflint check`` looks at.

Paths given on the command line are always checked (a file of any extension is read as
Python, or as a notebook when it ends in ``.ipynb``). Directories are walked for ``.py``,
``.pyi`` and ``.ipynb`` files, skipping the default excludes (version control, virtual
environments, build output, caches), the configured ``exclude``/``extend-exclude`` patterns,
and whatever ``.gitignore`` files ignore.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")

DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tflint_cache",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


def glob_to_regex(pattern: str) -> str:
    """Translate a glob (``*``, ``?``, ``[...]``, ``**``) into a regex for ``/``-separated paths."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                j = i + 2
                at_start = i == 0 or pattern[i - 1] == "/"
                if at_start and j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")  # "**/": zero or more directories
                    i = j + 1
                    continue
                out.append(".*")
                i = j
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass
class PathPatterns:
    """Exclude-style patterns: a pattern without ``/`` matches a file or directory name at any
    depth; one with ``/`` matches the path relative to ``root`` (or an absolute path)."""

    root: str
    patterns: tuple[str, ...]
    _name_re: re.Pattern | None = field(init=False, default=None)
    _path_re: re.Pattern | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        names, paths = [], []
        for p in self.patterns:
            p = p.strip()
            if not p:
                continue
            p = p.replace(os.sep, "/")
            stripped = p.rstrip("/")
            if "/" not in stripped:
                names.append(glob_to_regex(stripped))
            else:
                if os.path.isabs(p):
                    p = os.path.relpath(p, self.root).replace(os.sep, "/")
                p = p[2:] if p.startswith("./") else p
                p = p.rstrip("/")
                paths.append(glob_to_regex(p))
        if names:
            self._name_re = re.compile("(?:" + "|".join(names) + r")\Z")
        if paths:
            self._path_re = re.compile("(?:" + "|".join(paths) + r")(?:/.*)?\Z")

    def matches(self, abspath: str) -> bool:
        if self._name_re is not None and self._name_re.match(os.path.basename(abspath)):
            return True
        if self._path_re is not None:
            rel = os.path.relpath(abspath, self.root).replace(os.sep, "/")
            if self._path_re.match(rel):
                return True
        return False

    def __bool__(self) -> bool:
        return self._name_re is not None or self._path_re is not None


class IgnoreFile:
    """The rules of one ``.gitignore`` (or ``.git/info/exclude``), relative to ``base``."""

    def __init__(self, base: str, text: str) -> None:
        self.base = base
        self.rules: list[tuple[re.Pattern, bool, bool]] = []  # (regex, negate, dir_only)
        for raw in text.splitlines():
            line = raw
            if not line or line.startswith("#"):
                continue
            # Trailing spaces are ignored unless escaped.
            while line.endswith(" ") and not line.endswith("\\ "):
                line = line[:-1]
            if not line:
                continue
            negate = False
            if line.startswith("!"):
                negate, line = True, line[1:]
            elif line.startswith("\\!") or line.startswith("\\#"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            rx = glob_to_regex(line)
            if not anchored:
                rx = "(?:.*/)?" + rx
            self.rules.append((re.compile(rx + r"\Z"), negate, dir_only))

    @classmethod
    def load(cls, base: str, path: str) -> "IgnoreFile | None":
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            return None
        ig = cls(base, text)
        return ig if ig.rules else None

    def decide(self, abspath: str, is_dir: bool) -> bool | None:
        """True (ignored), False (re-included) or None (no rule matches)."""
        rel = os.path.relpath(abspath, self.base).replace(os.sep, "/")
        if rel.startswith(".."):
            return None
        for rx, negate, dir_only in reversed(self.rules):
            if dir_only and not is_dir:
                continue
            if rx.match(rel):
                return not negate
        return None


def _git_root(start: str) -> str | None:
    d = start
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _initial_ignores(directory: str) -> list[IgnoreFile]:
    """``.gitignore`` files that apply above ``directory`` (within its git repository)."""
    root = _git_root(directory)
    if root is None:
        return []
    chain: list[IgnoreFile] = []
    info = IgnoreFile.load(root, os.path.join(root, ".git", "info", "exclude"))
    if info:
        chain.append(info)
    rel = os.path.relpath(directory, root)
    dirs = [root]
    if rel != ".":
        cur = root
        for part in rel.split(os.sep):
            cur = os.path.join(cur, part)
            dirs.append(cur)
    for d in dirs[:-1]:  # the directory's own .gitignore is read by the walk
        ig = IgnoreFile.load(d, os.path.join(d, ".gitignore"))
        if ig:
            chain.append(ig)
    return chain


def _ignored(chain: list[IgnoreFile], abspath: str, is_dir: bool) -> bool:
    for ig in reversed(chain):
        decision = ig.decide(abspath, is_dir)
        if decision is not None:
            return decision
    return False


# The exclusion test for a path, given the directory it is found in.
Excluder = Callable[[str, str], bool]


def walk(
    directory: str,
    excluded: Excluder,
    respect_gitignore: bool = True,
) -> Iterator[str]:
    """Absolute paths of the checkable files below ``directory``, in sorted order.

    ``excluded(parent_dir, abspath)`` tells whether a discovered path is excluded.
    """
    directory = os.path.abspath(directory)
    chain = _initial_ignores(directory) if respect_gitignore else []
    yield from _walk(directory, excluded, chain, respect_gitignore, top=True)


def _walk(
    directory: str, excluded: Excluder, chain: list[IgnoreFile], gitignore: bool, top: bool
) -> Iterator[str]:
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    names = {e.name for e in entries}
    if not top and "pyvenv.cfg" in names:
        return  # a virtual environment
    if gitignore and ".gitignore" in names:
        ig = IgnoreFile.load(directory, os.path.join(directory, ".gitignore"))
        if ig:
            chain = chain + [ig]
    subdirs: list[str] = []
    for e in entries:
        try:
            is_dir = e.is_dir(follow_symlinks=False)
            is_file = not is_dir and e.is_file()
        except OSError:
            continue
        if is_dir:
            if e.name == ".git" or excluded(directory, e.path):
                continue
            if chain and _ignored(chain, e.path, True):
                continue
            subdirs.append(e.path)
        elif is_file and e.name.endswith(PYTHON_SUFFIXES):
            if excluded(directory, e.path):
                continue
            if chain and _ignored(chain, e.path, False):
                continue
            yield e.path
    for d in subdirs:
        yield from _walk(d, excluded, chain, gitignore, top=False)
