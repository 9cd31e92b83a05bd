"""`tflint check` over real corpora: the CPython standard library and the installed packages.

No internal error and no traceback; a file gets ``TFL000`` exactly when Python itself cannot
decode or parse it. The sweeps run the installed CLI with ``--output-format json`` over every
``.py``/``.pyi``/``.ipynb`` file of the tree (the default excludes are replaced by a pattern that
matches nothing, so that ``venv/``, ``build/``... packages are swept too) and print their times.

Measured on two cores: the standard library (about 1,800 files) takes seconds, the whole
``site-packages`` of the test environment (about 6,700 files: TensorFlow, Keras, NumPy...)
under a minute, so both are swept in full; ``TFLINT_SWEEP_SUBSET=1`` restricts the second to
the TensorFlow-heavy ``keras/src``, ``numpy`` and ``tensorflow/python/{eager,data,keras,
distribute,ops}`` for a slow machine.
"""

from __future__ import annotations

import json
import os
import resource
import sysconfig
import time
from pathlib import Path

import pytest

from tests.hardening._oracle import (
    assert_no_crash,
    python_accepts_bytes,
    relative_names,
    run_tflint,
)

pytestmark = pytest.mark.slow

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PURELIB = Path(sysconfig.get_paths()["purelib"])
NO_EXCLUDES = ("--exclude", "tflint-sweep-excludes-nothing")
SITE_SUBSET = (
    "keras/src",
    "numpy",
    "tensorflow/python/eager",
    "tensorflow/python/data",
    "tensorflow/python/keras",
    "tensorflow/python/distribute",
    "tensorflow/python/ops",
)


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def sweep(root: Path, paths: list[str]) -> None:
    listed = run_tflint(["check", "--show-files", *NO_EXCLUDES, *paths], cwd=root)
    assert listed.returncode == 0, listed.stderr.decode(errors="replace")
    files = [ln for ln in listed.stdout.decode("utf-8", "surrogateescape").splitlines() if ln]
    assert len(files) > 100, files[:5]

    t0, c0 = time.perf_counter(), _children_cpu()
    proc = run_tflint(["check", "--no-cache", "--output-format", "json", *NO_EXCLUDES, *paths], cwd=root, timeout=3000)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    print(f"\n[sweep] {root} {' '.join(paths)}: {len(files)} files, {wall:.1f} s wall, {cpu:.1f} s CPU")
    assert_no_crash(proc)
    findings = relative_names(json.loads(proc.stdout), root)

    by_file: dict[str, list[dict]] = {}
    for f in findings:
        by_file.setdefault(f["filename"], []).append(f)
    reported = {name for name, fs in by_file.items() if any(f["code"] == "TFL000" for f in fs)}
    for name in reported:
        codes = [f["code"] for f in by_file[name]]
        assert codes == ["TFL000"], (name, codes)  # one finding, nothing else on that file
    unparsable = set()
    for name in files:
        with open(os.path.join(root, name), "rb") as fh:
            if not python_accepts_bytes(fh.read()):
                unparsable.add(name)
    assert reported - unparsable == set(), "TFL000 on files Python accepts"
    assert unparsable - reported == set(), "unparsable files not reported"
    assert set(by_file) <= set(files)
    print(f"[sweep] TFL000 on {len(reported)} files; {len(findings)} findings in all")


def test_stdlib_sweep():
    sweep(STDLIB, ["."])


def test_site_packages_sweep():
    if not os.environ.get("TFLINT_SWEEP_SUBSET"):
        sweep(PURELIB, ["."])
        return
    present = [p for p in SITE_SUBSET if (PURELIB / p).is_dir()]
    assert "keras/src" in present and any(p.startswith("tensorflow") for p in present), present
    sweep(PURELIB, present)
