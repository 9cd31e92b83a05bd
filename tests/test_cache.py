"""The findings cache: used when valid, ignored and rebuilt when not, keyed by content+settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tflint import __version__
from tflint.check.cache import Cache, file_key
from tflint.check.engine import lint_bytes
from tflint.rules import resolve

BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"
GOOD = BAD.replace("print(x)", "tf.print(x)")


def check(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--output-format", "concise", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env,
    )


def cache_files(root: Path) -> list[Path]:
    return sorted((root / ".tflint_cache").glob(f"{__version__}/*.json"), key=lambda p: p.stat().st_mtime)


def cache_file(root: Path) -> Path:
    # One file per tflint code fingerprint: the newest is the current one.
    return cache_files(root)[-1]


def messages(proc) -> list[str]:
    return [ln for ln in proc.stdout.splitlines() if ": TFL" in ln]


def test_warm_run_uses_the_cache(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    cold = check(cwd=tmp_path)
    assert cold.returncode == 1
    path = cache_file(tmp_path)
    assert (tmp_path / ".tflint_cache" / ".gitignore").read_text().strip().endswith("*")
    doc = json.loads(path.read_text())
    (entry,) = doc["entries"].values()
    # Tamper with the stored message: a warm run shows it, proving the entry was used.
    entry[0][1] = "message from the cache"
    path.write_text(json.dumps(doc))
    warm = check(cwd=tmp_path)
    assert messages(warm) == ["a.py:5:5: TFL101 message from the cache"]
    # --no-cache neither reads nor writes it.
    fresh = check("--no-cache", cwd=tmp_path)
    assert messages(fresh) == messages(cold)
    assert json.loads(path.read_text()) == doc


def test_changed_content_or_settings_miss(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    assert check(cwd=tmp_path).returncode == 1
    (tmp_path / "a.py").write_text(GOOD)
    assert check(cwd=tmp_path).returncode == 0
    (tmp_path / "a.py").write_text(BAD)
    assert check(cwd=tmp_path).returncode == 1
    assert check("--ignore", "TFL101", cwd=tmp_path).returncode == 0
    keys = set()
    for f in cache_files(tmp_path):
        keys |= set(json.loads(f.read_text())["entries"])
    assert len(keys) == 3  # BAD with all rules, GOOD, BAD without TFL101


def test_corrupt_cache_is_ignored_and_rebuilt(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    expected = messages(check(cwd=tmp_path))
    path = cache_file(tmp_path)
    for garbage in (b"{not json", b"\x00\xff" * 10, b"[]", b'{"format": 1, "version": "0.0.0", "entries": {}}'):
        path.write_bytes(garbage)
        assert messages(check(cwd=tmp_path)) == expected
        doc = json.loads(path.read_text())  # rewritten as a valid cache
        assert doc["version"] == __version__ and len(doc["entries"]) == 1


def test_other_version_entries_are_not_trusted(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    expected = messages(check(cwd=tmp_path))
    path = cache_file(tmp_path)
    doc = json.loads(path.read_text())
    (key,) = doc["entries"]
    doc["version"] = "9.9.9"
    doc["entries"][key] = []  # would hide the finding if trusted
    path.write_text(json.dumps(doc))
    assert messages(check(cwd=tmp_path)) == expected


def test_malformed_entry_is_a_miss(tmp_path):
    raw = BAD.encode()
    enabled = resolve()
    cache = Cache(str(tmp_path / "c"))
    key = file_key("a.py", raw, enabled)
    cache.put(key, lint_bytes("a.py", raw, enabled).findings)
    cache.save()
    again = Cache(str(tmp_path / "c"))
    (f,) = again.get(key, "a.py")
    assert f.code == "TFL101" and f.fix is not None and f.fix.edits
    doc = json.loads(Path(again.file).read_text())
    doc["entries"][key] = [["TFL101", "m", "five", 4, 5, 12, "error", None, None, None]]
    Path(again.file).write_text(json.dumps(doc))
    assert Cache(str(tmp_path / "c")).get(key, "a.py") is None
    doc["entries"][key] = [["TFL101", "m", 5, 4, 5, 12, "critical", None, None, None]]
    Path(again.file).write_text(json.dumps(doc))
    assert Cache(str(tmp_path / "c")).get(key, "a.py") is None


def test_key_depends_on_path_content_and_rules():
    enabled = resolve()
    k = file_key("a.py", b"x", enabled)
    assert k != file_key("b.py", b"x", enabled)
    assert k != file_key("a.py", b"y", enabled)
    assert k != file_key("a.py", b"x", resolve(ignore=["TFL101"]))
    assert k == file_key("a.py", b"x", frozenset(sorted(enabled)))


def test_unwritable_cache_dir_is_not_fatal(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "blocker").write_text("a file where the cache directory should be")
    env = {**os.environ, "TFLINT_CACHE_DIR": str(tmp_path / "blocker" / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--output-format", "concise", "a.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert messages(proc)


def test_fingerprint_follows_code_and_stale_caches_are_removed(tmp_path):
    from tflint.check.cache import code_fingerprint

    assert code_fingerprint() == code_fingerprint()
    stale = tmp_path / "c" / __version__ / "0123456789abcdef01234567.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"format": 1, "version": "%s", "entries": {}}' % __version__)
    cache = Cache(str(tmp_path / "c"))
    assert Path(cache.file).name == code_fingerprint() + ".json"
    cache.put("k", [])
    cache.save()
    assert not stale.exists() and Path(cache.file).exists()
