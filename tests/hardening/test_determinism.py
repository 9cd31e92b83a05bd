"""Same findings, same order, whatever the parallelism and whatever state the cache is in.

The engine checks files in a process pool when it has more than one CPU and at least
``PARALLEL_MIN_FILES`` files (``tflint.check.engine.lint_many``); the command line is forced serial by
pinning the process to one CPU and parallel by giving it two. The cache lives in
``<project>/.tflint_cache/<version>/<code fingerprint>.json``; a cache that is garbage, from
another version or format, malformed, unwritable or forged for other content is ignored and
rebuilt, never reported from.
"""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from pathlib import Path

import pytest

from tests.hardening._oracle import assert_no_crash, run_tflint
from tflint import __version__
from tflint.check.cache import CACHE_DIR_NAME, Cache, file_key
from tflint.check.engine import PARALLEL_MIN_FILES, lint_many, sort_findings
from tflint.rules import all_rules

ROOT = Path(__file__).resolve().parents[2]
KERAS = Path(sysconfig.get_paths()["purelib"]) / "keras" / "src"
ALL = frozenset(r.code for r in all_rules())


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """Rule examples, the bundled fixtures and a slice of Keras: a few hundred files."""
    d = tmp_path_factory.mktemp("proj")
    for rule in all_rules():
        for i, src in enumerate([*rule.INVALID, *rule.VALID]):
            (d / "examples" / rule.code.lower()).mkdir(parents=True, exist_ok=True)
            (d / "examples" / rule.code.lower() / f"ex{i}.py").write_text(src)
    shutil.copytree(ROOT / "fixtures", d / "fixtures")
    for sub in ("optimizers", "callbacks", "trainers"):
        if (KERAS / sub).is_dir():
            shutil.copytree(KERAS / sub, d / "keras" / sub, ignore=shutil.ignore_patterns("__pycache__"))
    (d / "broken.py").write_text("def f(:\n")
    (d / "nb.ipynb").write_text(
        json.dumps(
            {"cells": [{"cell_type": "code", "source": "import tensorflow as tf\n@tf.function\ndef f(x):\n    print(x)"}]}
        )
    )
    return d


def run(cwd: Path, *args: str, cpus: set[int] | None = None) -> tuple[int, list[dict], str]:
    kw = {}
    if cpus is not None:
        kw["preexec_fn"] = lambda: os.sched_setaffinity(0, cpus)
    proc = run_tflint(["check", "--output-format", "json", *args, "."], cwd=cwd, timeout=900, **kw)
    err = assert_no_crash(proc)
    return proc.returncode, json.loads(proc.stdout), err


def _key(f: dict) -> tuple:
    # notebook findings are ordered by cell, then by their line within the cell
    return (f["filename"], f.get("cell") or 0, f["location"]["row"], f["location"]["column"], f["code"])


def assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    assert a == b  # same findings, same order, same fields


def test_serial_and_parallel_engine_agree(project):
    files = sorted(p for p in project.rglob("*") if p.suffix in (".py", ".ipynb"))
    assert len(files) >= 4 * PARALLEL_MIN_FILES
    tasks = [(str(p.relative_to(project)), p.read_bytes(), ALL) for p in files]
    serial = lint_many(tasks, jobs=1)
    parallel = lint_many(tasks, jobs=3)
    assert [r.path for r in serial] == [t[0] for t in tasks] == [r.path for r in parallel]
    for s, p in zip(serial, parallel):
        assert s.findings == p.findings, s.path
        assert s.errors == p.errors == [], s.path
    flat = sort_findings(f for r in serial for f in r.findings)
    assert len({f.code for f in flat}) > 5  # the corpus really exercises the rules


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity control")
def test_serial_and_parallel_cli_agree(project):
    cpus = sorted(os.sched_getaffinity(0))
    rc1, serial, _ = run(project, "--no-cache", cpus={cpus[0]})
    assert rc1 == 1 and serial
    assert [_key(f) for f in serial] == sorted(_key(f) for f in serial)
    if len(cpus) < 2:
        pytest.skip("one CPU: the command line cannot run its pool here (the engine test covers it)")
    rc2, parallel, _ = run(project, "--no-cache", cpus=set(cpus[:2]))
    assert rc2 == rc1
    assert_same(serial, parallel)


def _fresh_cache(project: Path) -> Path:
    cache = project / CACHE_DIR_NAME
    if cache.is_symlink() or cache.is_file():
        cache.unlink()
    elif cache.exists():
        cache.chmod(0o755)
        shutil.rmtree(cache)
    return cache


def _current_cache_file(project: Path) -> Path:
    return Path(Cache(str(project / CACHE_DIR_NAME)).file)


def test_cold_warm_and_no_cache_agree(project):
    _fresh_cache(project)
    _, baseline, _ = run(project, "--no-cache")
    assert not (project / CACHE_DIR_NAME).exists()
    _, cold, _ = run(project)
    cache_file = _current_cache_file(project)
    assert cache_file.is_file()
    doc = json.loads(cache_file.read_bytes())
    assert doc["version"] == __version__ and len(doc["entries"]) > 50
    mtime = cache_file.stat().st_mtime_ns
    _, warm, _ = run(project)
    assert_same(baseline, cold)
    assert_same(baseline, warm)
    assert cache_file.stat().st_mtime_ns == mtime  # a warm run with all hits writes nothing


def _forge(project: Path, entries_for: list[str]) -> dict:
    """Cache entries, under the right keys, claiming a finding the files do not have."""
    forged = ["TFL101", "FORGED finding", 1, 0, 1, 1, "error", None, None, None]
    out = {}
    for rel in entries_for:
        raw = (project / rel).read_bytes()
        out[file_key(rel, raw, ALL)] = [forged]
    return out


def _victims(project: Path) -> list[str]:
    return ["fixtures/" + str(p.relative_to(project / "fixtures")) for p in sorted((project / "fixtures").rglob("*.py"))][:5] + [
        "broken.py"
    ]


@pytest.mark.parametrize(
    "state",
    [
        "garbage",
        "empty",
        "other_version",
        "other_format",
        "malformed_entries",
        "entries_not_a_dict",
        "deep_json",
        "stale_content",
        "garbage_files_around",
    ],
)
def test_untrustworthy_cache_is_ignored_and_rebuilt(project, state):
    _fresh_cache(project)
    _, baseline, _ = run(project, "--no-cache")
    cache_file = _current_cache_file(project)
    cache_file.parent.mkdir(parents=True)
    victims = _victims(project)
    forged = _forge(project, victims)
    if state == "garbage":
        cache_file.write_bytes(os.urandom(4096))
    elif state == "empty":
        cache_file.write_bytes(b"")
    elif state == "other_version":
        cache_file.write_text(json.dumps({"format": 1, "version": "0.0.0-other", "entries": forged}))
        # and a complete cache for another version next to it
        other = cache_file.parent.parent / "0.0.0-other" / cache_file.name
        other.parent.mkdir(parents=True)
        other.write_text(json.dumps({"format": 1, "version": "0.0.0-other", "entries": forged}))
    elif state == "other_format":
        cache_file.write_text(json.dumps({"format": 999, "version": __version__, "entries": forged}))
    elif state == "malformed_entries":
        bad = {k: [["TFL101", "FORGED", "one", 0, 1, 1, "error", None, None, None]] for k in forged}
        bad.update({k + "x": "nonsense" for k in forged})
        first = next(iter(forged))
        bad[first] = [["TFL101", "FORGED", 1, 0, 1, 1, "no-such-severity", None, None, None]]
        cache_file.write_text(json.dumps({"format": 1, "version": __version__, "entries": bad}))
    elif state == "entries_not_a_dict":
        cache_file.write_text(json.dumps({"format": 1, "version": __version__, "entries": list(forged)}))
    elif state == "deep_json":
        cache_file.write_bytes(b"[" * 200_000 + b"]" * 200_000)
    elif state == "stale_content":
        # Entries for the files as they were before an edit: keyed by other content.
        forged_row = next(iter(forged.values()))
        stale = {file_key(rel, (project / rel).read_bytes() + b"\n# edited\n", ALL): forged_row for rel in victims}
        cache_file.write_text(json.dumps({"format": 1, "version": __version__, "entries": stale}))
    elif state == "garbage_files_around":
        for name in ("junk.json", "0.1.0", ".gitignore"):
            p = cache_file.parent.parent / name
            if not p.exists():
                p.write_bytes(os.urandom(512))
        (cache_file.parent / "other.json").write_text(json.dumps({"format": 1, "version": __version__, "entries": forged}))
        cache_file.write_bytes(b"\x00\xff" * 100)
    rc, got, _ = run(project)
    assert "FORGED" not in json.dumps(got)
    assert_same(baseline, got)
    assert rc == 1
    # Rebuilt: the cache file is valid again, and a warm run still agrees.
    doc = json.loads(cache_file.read_bytes())
    assert doc["version"] == __version__ and isinstance(doc["entries"], dict)
    if state != "stale_content":  # entries for other content are kept (unused) until pruned
        assert "FORGED" not in cache_file.read_text()
    _, warm, _ = run(project)
    assert_same(baseline, warm)


def test_unwritable_cache_location(project):
    _, baseline, _ = run(project, "--no-cache")
    # A regular file where the cache directory should be: no write can succeed, even as root.
    cache = _fresh_cache(project)
    cache.write_bytes(b"not a directory")
    rc, got, _ = run(project)
    assert_same(baseline, got) and rc == 1
    assert cache.read_bytes() == b"not a directory"
    _fresh_cache(project)
    # The version directory blocked by a file.
    cache.mkdir()
    (cache / __version__).write_bytes(b"blocker")
    rc, got, _ = run(project)
    assert_same(baseline, got)
    assert (cache / __version__).read_bytes() == b"blocker"
    _fresh_cache(project)
    if os.geteuid() != 0:
        cache.mkdir(mode=0o555)
        rc, got, _ = run(project)
        assert_same(baseline, got)
        assert list(cache.iterdir()) == []
        cache.chmod(0o755)
        _fresh_cache(project)


def test_editing_a_file_invalidates_only_its_entry(project):
    _fresh_cache(project)
    target = project / "examples" / "tfl101" / "ex0.py"
    original = target.read_text()
    try:
        _, before, _ = run(project)
        n_before = sum(1 for f in before if f["filename"].endswith("tfl101/ex0.py"))
        target.write_text(original + "\n@tf.function\ndef g(x):\n    print(x)\n    return x\n")
        _, after, _ = run(project)
        _, uncached, _ = run(project, "--no-cache")
        assert_same(uncached, after)
        n_after = sum(1 for f in after if f["filename"].endswith("tfl101/ex0.py"))
        assert n_after == n_before + 1
    finally:
        target.write_text(original)


# A helper called from two functions: one passes a prefetching dataset (``tfds.load``), the
# other a constructed and shuffled one. Which caller the analysis reached first used to depend
# on the iteration order of a set of AST nodes (their addresses: whatever the process had
# linted before), and the helper was analysed with that caller's datasets only.
TWO_CALLERS = """
import tensorflow as tf
import tensorflow_datasets as tfds


def _pipeline(ds, batch):
    ds = ds.map(lambda x: x * 2).cache().repeat()
    return ds.batch(batch)


def from_tfds(split, batch):
    ds = tfds.load("mnist", split=split)
    return _pipeline(ds, batch)


def from_arrays(x, batch):
    ds = tf.data.Dataset.from_tensor_slices(x)
    ds = ds.shuffle(1000)
    return _pipeline(ds, batch)
"""


def _cache_chains(src: str) -> list[tuple]:
    import ast

    from tflint.analysis import Analysis

    a = Analysis(ast.parse(src), src)
    return sorted(
        (c.kind, c.line, tuple(c.methods()))
        for t in a.datasets.transformations if t.method == "cache" for c in t.receiver
    )


def test_dataset_facts_do_not_depend_on_what_was_analysed_before():
    from tflint.check.engine import lint_text

    expected = [("constructor", 17, ("shuffle", "map")), ("prefetching", 12, ("map",))]
    seen = []
    for filler in ("", "import tensorflow as tf\n", "x = [1] * 1000\n", TWO_CALLERS.replace("_pipeline", "_p")):
        lint_text("other.py", filler, ALL)  # leaves the heap (AST node addresses) in another state
        seen.append(_cache_chains(TWO_CALLERS))
        findings = lint_text("two_callers.py", TWO_CALLERS, frozenset({"TFL404"})).findings
        assert [(f.code, f.line) for f in findings] == [("TFL404", 7)]
    assert seen == [expected] * 4
