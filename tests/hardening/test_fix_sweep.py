"""`--fix --unsafe-fixes` over real code in a temporary copy: fixed files still parse, a second
run changes nothing, files without fixes are byte-identical and keep their mode; a run killed
mid-way leaves every file fully old or fully new."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest

from tests.hardening._oracle import (
    assert_no_crash,
    python_accepts_bytes,
    relative_names,
    run_tflint,
    tflint_cmd,
)
from tflint.check.fix import fix_file
from tflint.rules import all_rules

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
KERAS = Path(sysconfig.get_paths()["purelib"]) / "keras" / "src"
ALL = frozenset(r.code for r in all_rules())
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def fixable_templates() -> list[tuple[bytes, bytes]]:
    """(before, after) for every rule example that an unsafe fix changes."""
    out = []
    for rule in all_rules():
        for src in rule.INVALID:
            raw = src.encode()
            outcome = fix_file("t.py", raw, ALL, unsafe=True)
            if outcome.new_raw is not None and outcome.problem is None:
                out.append((raw, outcome.new_raw))
    return out


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    snap = {}
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            snap[p.relative_to(root).as_posix()] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
    return snap


def test_fix_sweep_over_corpora(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "fixtures", tree / "fixtures", ignore=IGNORE)
    shutil.copytree(KERAS, tree / "keras_src", ignore=IGNORE)
    for sub in ("json", "asyncio", "email", "concurrent", "importlib"):
        shutil.copytree(STDLIB / sub, tree / "stdlib" / sub, ignore=IGNORE)
    templates = fixable_templates()
    assert len(templates) >= 3, "the rules' examples should include fixable ones"
    for i, (before, _after) in enumerate(templates):
        for variant, data in enumerate(
            (before, before.replace(b"\n", b"\r\n"), b"\xef\xbb\xbf" + before, b"# -*- coding: latin-1 -*-\n" + before)
        ):
            p = tree / "generated" / f"t{i}_{variant}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    modes = [0o644, 0o600, 0o755, 0o640]
    for j, p in enumerate(sorted(tree.rglob("*.py"))):
        p.chmod(modes[j % len(modes)])

    before = snapshot(tree)
    t0 = time.perf_counter()
    proc = run_tflint(["check", "--no-cache", "--output-format", "json", "."], cwd=tree, timeout=3000)
    assert_no_crash(proc)
    findings = relative_names(json.loads(proc.stdout), tree)
    with_fixes = {f["filename"] for f in findings if f.get("fix")}
    proc = run_tflint(["check", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "json", "."], cwd=tree, timeout=3000)
    print(f"\n[fix sweep] {len(before)} files, check + fix {time.perf_counter() - t0:.1f} s wall")
    assert_no_crash(proc)
    after = snapshot(tree)
    assert set(after) == set(before), set(after) ^ set(before)  # no files left behind or lost
    changed = {rel for rel in before if after[rel][0] != before[rel][0]}
    assert {p for p in changed if p.startswith("generated/")}, "nothing was fixed"
    for rel in before:
        assert after[rel][1] == before[rel][1], (rel, oct(before[rel][1]), oct(after[rel][1]))
        if rel in changed:
            assert rel in with_fixes, f"{rel} changed without a fix to apply"
            if rel.endswith(".ipynb"):
                json.loads(after[rel][0])
            else:
                assert python_accepts_bytes(after[rel][0]), f"{rel} no longer parses"
    print(f"[fix sweep] {len(changed)} files fixed, {len(with_fixes)} had fixes")
    # A second run finds nothing more to change.
    proc = run_tflint(["check", "--no-cache", "--fix", "--unsafe-fixes", "."], cwd=tree, timeout=3000)
    assert_no_crash(proc)
    again = snapshot(tree)
    assert [rel for rel in after if again[rel] != after[rel]] == []


def _build_tree(root: Path, n: int) -> dict[str, tuple[bytes, bytes]]:
    templates = fixable_templates()
    expect = {}
    for i in range(n):
        old, new = templates[i % len(templates)]
        rel = f"d{i % 10}/m{i:05d}.py"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(old)
        expect[rel] = (old, new)
    return expect


def test_killed_fix_run_leaves_every_file_old_or_new(tmp_path):
    rng = random.Random(1234)
    partial_seen = False
    for attempt in range(3):
        root = tmp_path / f"run{attempt}"
        expect = _build_tree(root, 1500)
        first = min(expect)
        proc = subprocess.Popen(
            [*tflint_cmd(), "check", "--no-cache", "--fix", "--unsafe-fixes", "--quiet", "."],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 600
            # Wait until fixes start being written, then kill at a random moment.
            while time.monotonic() < deadline and proc.poll() is None:
                if any((root / rel).read_bytes() != expect[rel][0] for rel in sorted(expect)[:50]):
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.5))
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=60)
            proc.stderr.close()
        states = {}
        for rel, (old, new) in expect.items():
            data = (root / rel).read_bytes()
            assert data in (old, new), f"{rel} is neither the old nor the fixed file"
            states[rel] = data == new
        n_new = sum(states.values())
        print(f"\n[killed fix] attempt {attempt}: {n_new}/{len(states)} files fixed at the kill")
        # Leftover temporary files of the interrupted write are the only debris, never .py files.
        assert {p.suffix for p in root.rglob("*") if p.is_file() and p.name.startswith(".tflint-")} <= {".tmp"}
        assert states[first] or n_new == 0
        if 0 < n_new < len(states):
            partial_seen = True
            # Rerunning completes the job.
            done = run_tflint(["check", "--no-cache", "--fix", "--unsafe-fixes", "."], cwd=root, timeout=900)
            assert_no_crash(done)
            assert all((root / rel).read_bytes() == new for rel, (_old, new) in expect.items())
            break
    assert partial_seen, "the run was never caught mid-way"
    assert os.path.isdir(tmp_path)
