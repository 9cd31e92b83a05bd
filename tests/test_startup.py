"""`tflint check` stays light: no TensorFlow, numpy, libcst or rich unless there is something to fix."""

from __future__ import annotations

import os
import subprocess
import sys

BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"
GOOD = BAD.replace("print(x)", "tf.print(x)")
HEAVY = ("tensorflow", "keras", "numpy", "libcst", "rich", "torch", "jax")


def imported_modules(*args, cwd) -> tuple[set[str], subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tflint", "check", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env,
    )
    mods = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            mods.add(name.split(".")[0])
    assert mods, proc.stderr  # importtime worked
    return mods, proc


def test_clean_file_imports_nothing_heavy(tmp_path):
    (tmp_path / "ok.py").write_text(GOOD)
    mods, proc = imported_modules("ok.py", cwd=tmp_path)
    assert proc.returncode == 0
    assert "tflint" in mods
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


def test_findings_in_every_format_import_nothing_heavy(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    for fmt in ("full", "concise", "json", "sarif", "github"):
        mods, proc = imported_modules("--output-format", fmt, "bad.py", cwd=tmp_path)
        assert proc.returncode == 1
        assert not mods & set(HEAVY), (fmt, sorted(mods & set(HEAVY)))


def test_fix_with_nothing_to_fix_does_not_import_libcst(tmp_path):
    (tmp_path / "ok.py").write_text(GOOD)
    mods, _ = imported_modules("--fix", "ok.py", cwd=tmp_path)
    assert "libcst" not in mods


def test_fixing_does_import_libcst(tmp_path):
    # The control for the tests above: when there is a fix, libcst validates the result.
    (tmp_path / "bad.py").write_text(BAD)
    mods, proc = imported_modules("--fix", "bad.py", cwd=tmp_path)
    assert proc.returncode == 0
    assert "libcst" in mods
    assert "tensorflow" not in mods
