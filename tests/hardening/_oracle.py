"""Python's own verdict on source files, independent of tflint's decoding and parsing."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import tokenize
import warnings


def python_accepts_text(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def python_accepts_bytes(raw: bytes) -> bool:
    """``ast.parse`` of the bytes accepts them (BOM and PEP 263 cookie handled by Python's
    tokenizer) and the whole file decodes in the encoding Python detects (Python 3.11 lets
    undecodable bytes through inside comments; tflint, like later Pythons, calls such a file
    undecodable)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError, LookupError, UnicodeError):
        return False
    # The parser reads a cookie on a line ended by "\r\n", "\r" or "\n"; the pure-Python
    # detector splits on "\n" only, so hand it the lines the way the parser sees them.
    lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(lines).readline)
    except SyntaxError:
        return False
    try:
        raw.decode(encoding)
    except (LookupError, UnicodeError):
        return False
    return True


def tflint_cmd() -> list[str]:
    """The installed console script (not ``python -m``, which would put the cwd on sys.path)."""
    exe = os.path.join(os.path.dirname(sys.executable), "tflint")
    if os.path.exists(exe):
        return [exe]
    return [sys.executable, "-m", "tflint"]


def run_tflint(args: list[str], cwd, timeout: float = 600, env: dict | None = None, **kw):
    full_env = dict(os.environ)
    full_env.pop("TFLINT_CACHE_DIR", None)
    full_env.update(env or {})
    return subprocess.run(
        [*tflint_cmd(), *args], check=False, cwd=cwd, capture_output=True, timeout=timeout, env=full_env, **kw
    )


def assert_no_crash(proc) -> str:
    err = proc.stderr.decode("utf-8", "replace") if isinstance(proc.stderr, bytes) else proc.stderr
    assert "Traceback" not in err, err[-4000:]
    assert "internal error" not in err, err[-4000:]
    assert proc.returncode in (0, 1), (proc.returncode, err[-4000:])
    return err


def relative_names(findings: list[dict], cwd) -> list[dict]:
    """Make JSON findings' file names relative to ``cwd`` where they are below it."""
    root = os.path.abspath(cwd)
    for f in findings:
        name = f["filename"]
        if os.path.isabs(name) and os.path.abspath(name).startswith(root + os.sep):
            f["filename"] = os.path.relpath(os.path.abspath(name), root).replace(os.sep, "/")
    return findings
