"""A content-addressed cache of each file's findings.

An entry is keyed by a hash of the file's path and bytes, of the rule codes enabled for it and
of the TensorFlow version it targets, and
of the facts the project gives it (:func:`project_key`); each module's project summary is kept
too (``summaries``), keyed by a hash of its bytes alone;
the cache file itself is specific to the tflint version and to the exact code that produces
findings (a hash of the engine's, rules' and analysis's sources), so upgrading or editing
tflint starts afresh (and the caches of other builds are deleted). The cache
is never trusted: a file that cannot be read, does not parse, belongs to another version or
holds a malformed entry is ignored (entry by entry) and rebuilt. Writes are atomic.
"""

from __future__ import annotations

import hashlib
import json
import os

from tflint import __version__
from tflint.atomic import write_atomic
from tflint.finding import Edit, Finding, Fix, Severity

CACHE_DIR_NAME = ".tflint_cache"
FORMAT = 1
MAX_ENTRIES = 50_000


# The parts of tflint whose code decides the findings.
_FINDINGS_CODE = ("__init__.py", "finding.py", "check/engine.py", "check/source.py", "check/parse.py",
                  "check/suppress.py", "check/cache.py", "rules", "analysis")


def code_fingerprint() -> str:
    """A hash of the source of the parts of tflint that produce findings (names and contents)."""
    import tflint

    root = os.path.dirname(os.path.abspath(tflint.__file__))
    h = hashlib.blake2b(digest_size=12)
    h.update(__version__.encode())
    paths = []
    for name in _FINDINGS_CODE:
        top = os.path.join(root, name)
        if os.path.isdir(top):
            for d, dirs, files in os.walk(top):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                paths.extend(os.path.join(d, f) for f in sorted(files) if f.endswith(".py"))
        else:
            paths.append(top)
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        h.update(f"{os.path.relpath(path, root)}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def file_key(path: str, raw: bytes, enabled: frozenset[str], target: object = None) -> str:
    """``target``: the file's TargetVersion (``None``: the default one)."""
    if target is None:
        from tflint.analysis.version import DEFAULT as target
    h = hashlib.blake2b(digest_size=20)
    h.update(path.encode("utf-8", "surrogateescape"))
    h.update(b"\0")
    h.update(",".join(sorted(enabled)).encode())
    h.update(b"\0")
    h.update(target.key().encode())
    h.update(b"\0")
    h.update(raw)
    return h.hexdigest()


def project_key(key: str, facts: dict) -> str:
    """``key`` (a :func:`file_key`) extended by the facts the project gives the file (the
    functions that traced code of other modules reaches, and their entry points)."""
    if not facts:
        return key
    from tflint.analysis.project import facts_digest

    h = hashlib.blake2b(digest_size=20)
    h.update(key.encode())
    h.update(b"\0")
    h.update(facts_digest(facts).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _encode(f: Finding) -> list:
    fix = None
    if f.fix is not None:
        fix = [
            f.fix.message,
            f.fix.applicability,
            [[e.line, e.col, e.end_line, e.end_col, e.content] for e in f.fix.edits],
        ]
    return [f.code, f.message, f.line, f.col, f.end_line, f.end_col, f.severity.value, f.cell, f.url, fix]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _decode(path: str, item: object) -> Finding:
    """Rebuild a finding; raise ``ValueError`` on anything malformed."""
    if not isinstance(item, list) or len(item) != 10:
        raise ValueError("malformed entry")
    code, message, line, col, end_line, end_col, severity, cell, url, fix = item
    if not (isinstance(code, str) and isinstance(message, str)):
        raise ValueError("malformed entry")
    if not all(_is_int(v) for v in (line, col, end_line, end_col)):
        raise ValueError("malformed entry")
    if cell is not None and not _is_int(cell):
        raise ValueError("malformed entry")
    if url is not None and not isinstance(url, str):
        raise ValueError("malformed entry")
    fix_obj = None
    if fix is not None:
        if not (isinstance(fix, list) and len(fix) == 3 and isinstance(fix[0], str) and isinstance(fix[1], str)):
            raise ValueError("malformed fix")
        edits = []
        if not isinstance(fix[2], list):
            raise ValueError("malformed fix")
        for e in fix[2]:
            if not (isinstance(e, list) and len(e) == 5 and all(_is_int(v) for v in e[:4]) and isinstance(e[4], str)):
                raise ValueError("malformed edit")
            edits.append(Edit(*e))
        fix_obj = Fix(fix[0], tuple(edits), fix[1])
    return Finding(
        code=code,
        message=message,
        path=path,
        line=line,
        col=col,
        end_line=end_line,
        end_col=end_col,
        severity=Severity(severity),
        fix=fix_obj,
        cell=cell,
        url=url,
    )


class Cache:
    """Findings by file key, stored in ``<directory>/<version>/<fingerprint>.json``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.file = os.path.join(directory, __version__, code_fingerprint() + ".json")
        self._entries: dict[str, list] = {}
        self._used: set[str] = set()
        self._summaries: dict[str, dict] = {}
        self._used_summaries: set[str] = set()
        self._dirty = False
        self._load()

    def _load(self) -> None:
        try:
            with open(self.file, "rb") as fh:
                doc = json.loads(fh.read())
        except (OSError, ValueError, RecursionError):
            return
        if (
            isinstance(doc, dict)
            and doc.get("format") == FORMAT
            and doc.get("version") == __version__
            and isinstance(doc.get("entries"), dict)
        ):
            self._entries = doc["entries"]
            if isinstance(doc.get("summaries"), dict):
                self._summaries = doc["summaries"]

    def get(self, key: str, path: str) -> list[Finding] | None:
        item = self._entries.get(key)
        if not isinstance(item, list):
            return None
        try:
            findings = [_decode(path, f) for f in item]
        except (ValueError, TypeError):
            del self._entries[key]
            self._dirty = True
            return None
        self._used.add(key)
        return findings

    def get_summary(self, content: str) -> dict | None:
        """The project summary of a module whose content hashes to ``content``."""
        item = self._summaries.get(content)
        if not isinstance(item, dict):
            return None
        self._used_summaries.add(content)
        return item

    def put_summary(self, content: str, summary: dict) -> None:
        self._summaries[content] = summary
        self._used_summaries.add(content)
        self._dirty = True

    def put(self, key: str, findings: list[Finding]) -> None:
        self._entries[key] = [_encode(f) for f in findings]
        self._used.add(key)
        self._dirty = True

    def _remove_stale(self) -> None:
        """Delete the caches of other builds of this version (their code differs)."""
        directory = os.path.dirname(self.file)
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for name in names:
            path = os.path.join(directory, name)
            if name.endswith(".json") and path != self.file:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def save(self) -> None:
        """Write the cache if it changed; problems writing it are not fatal."""
        if not self._dirty:
            return
        entries = self._entries
        if len(entries) > MAX_ENTRIES:
            entries = {k: v for k, v in entries.items() if k in self._used}
        summaries = self._summaries
        if len(summaries) > MAX_ENTRIES:
            summaries = {k: v for k, v in summaries.items() if k in self._used_summaries}
        doc = {"format": FORMAT, "version": __version__, "entries": entries, "summaries": summaries}
        try:
            created = not os.path.isdir(self.directory)
            os.makedirs(os.path.dirname(self.file), exist_ok=True)
            ignore = os.path.join(self.directory, ".gitignore")
            # Only in a directory tflint made: `cache-dir = "."` must not gitignore a project.
            if created and not os.path.exists(ignore):
                write_atomic(ignore, "# Created by tflint: the cache is not for version control.\n*\n")
            write_atomic(self.file, json.dumps(doc, separators=(",", ":")))
            self._dirty = False
            self._remove_stale()
        except OSError:
            pass
