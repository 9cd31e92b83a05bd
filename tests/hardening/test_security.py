"""`tflint check` reads; it never runs what it reads, and it writes only where it should.

Policy (tested here):
- Analyzed code, notebooks and configuration values are parsed, never imported, executed or
  evaluated; TensorFlow is never imported by `tflint check`; modules in the checked directory
  (``json.py``, ``typer.py``...) never shadow tflint's own imports.
- The cache directory is ``$TFLINT_CACHE_DIR`` when set (the user's own choice, anywhere);
  otherwise the configured ``cache-dir`` or ``.tflint_cache`` in the project. A project cache
  directory that resolves outside the project (``cache-dir = "../outside"``, an absolute path
  elsewhere, or a ``.tflint_cache`` symlink pointing out) is not used: a warning, no cache, no
  write there. The cache's ``.gitignore`` is written only in a directory tflint created.
- ``--fix`` writes only files that are, after resolving symlinks, inside the paths it was asked
  to check; a symlink to a file elsewhere is reported but not fixed.
- Written files (cache, ``.gitignore``) get ``0o666 & ~umask``; directories ``0o777 & ~umask``;
  fixed files keep their own mode.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hardening._oracle import (
    assert_no_crash,
    relative_names,
    run_tflint,
    tflint_cmd,
)

TRACED_PRINT = "import tensorflow as tf\n\n@tf.function\ndef f(x):\n    print(x)\n    return x\n"


def _payload(marker: Path) -> str:
    """Code with a visible side effect at import, execution or evaluation."""
    return (
        "import os, pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        f"os.system('touch {marker}.sh')\n"
    )


def _plant(tmp_path: Path) -> tuple[Path, list[Path]]:
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    out = tmp_path / "markers"
    out.mkdir()
    markers = []

    def marker(name: str) -> Path:
        m = out / name
        markers.append(m)
        markers.append(Path(str(m) + ".sh"))
        return m

    for rel in ("evil.py", "conftest.py", "setup.py", "pkg/__init__.py", "pkg/__main__.py", "sitecustomize.py"):
        (proj / rel).write_text(_payload(marker(rel.replace("/", "_"))) + TRACED_PRINT)
    # Modules that would shadow what tflint imports if the checked directory were on sys.path.
    for mod in ("json", "typer", "rich", "libcst", "tomllib", "ast", "tensorflow", "keras", "numpy", "tflint_plugins"):
        (proj / f"{mod}.py").write_text(_payload(marker(f"shadow_{mod}")))
    (proj / "tensorflow").mkdir()
    (proj / "tensorflow" / "__init__.py").write_text(_payload(marker("pkg_tensorflow")))
    nb = {
        "cells": [
            {"cell_type": "code", "source": _payload(marker("nb_cell")) + TRACED_PRINT},
            {"cell_type": "code", "source": f"!touch {marker('nb_shell')}\n%run evil.py\n"},
        ],
        "metadata": {"kernelspec": {"language": "python"}},
    }
    (proj / "notebook.ipynb").write_text(json.dumps(nb))
    cfg_marker = marker("config")
    (proj / "pyproject.toml").write_text(
        "[project]\n"
        f"name = \"__import__('os').system('touch {cfg_marker}')\"\n"
        "[tool.tflint]\n"
        f'extend-exclude = ["$(touch {cfg_marker}.sh)", "`touch {cfg_marker}`"]\n'
        'per-file-ignores = { "{__import__(\'os\')}" = ["TFL102"] }\n'
    )
    (proj / ".tflint_cache").mkdir()
    return proj, markers


def test_checked_code_notebooks_and_config_are_never_run(tmp_path):
    proj, markers = _plant(tmp_path)
    env = {"PYTHONPATH": "", "PYTHONSTARTUP": ""}
    proc = run_tflint(["check", "--no-cache", "--output-format", "json", "."], cwd=proj, env=env, timeout=120)
    assert_no_crash(proc)
    # What was found in the planted files came from reading them.
    found = relative_names(json.loads(proc.stdout), proj)
    assert {"evil.py", "conftest.py", "setup.py", "pkg/__init__.py", "notebook.ipynb"} <= {f["filename"] for f in found}
    proc = run_tflint(["check", "--fix", "--unsafe-fixes", "."], cwd=proj, env=env, timeout=120)
    assert_no_crash(proc)
    # The console script, and `python -m tflint` from elsewhere with the project as argument.
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tflint", "check", "--no-cache", str(proj)],
        cwd=tmp_path / "markers",
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert_no_crash(proc)
    imported = {ln.split("|")[-1].strip() for ln in proc.stderr.decode().splitlines() if ln.startswith("import time:")}
    assert "tflint.check.engine" in imported  # the import trace is real
    assert not {m for m in imported if m.split(".")[0] in ("tensorflow", "keras", "numpy", "evil", "conftest", "pkg")}
    assert not any(m.exists() for m in markers), [m.name for m in markers if m.exists()]


def test_tensorflow_is_not_imported_in_process(tmp_path):
    proj, markers = _plant(tmp_path)
    code = (
        "import sys, os\n"
        "from tflint.commands.check import CheckOptions, run_check\n"
        f"os.chdir({str(proj)!r})\n"
        "rc = run_check(CheckOptions(paths=['.'], no_cache=True, output_format='json', quiet=True))\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'evil', 'conftest', 'pkg', 'setup'))\n"
        "print('RESULT', rc, bad, file=sys.stderr)\n"
    )
    # -P: the interpreter itself must not put the (hostile) working directory on sys.path.
    proc = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, timeout=120, check=False)
    err = proc.stderr.decode()
    assert "RESULT 1 []" in err, err[-3000:]
    assert not any(m.exists() for m in markers)


@pytest.mark.parametrize("value", ["../outside", "/ABS/outside", "sub/../../outside"])
def test_config_cache_dir_outside_the_project_is_not_used(tmp_path, value):
    proj = tmp_path / "proj"
    proj.mkdir()
    outside = tmp_path / "outside"
    (proj / "m.py").write_text(TRACED_PRINT)
    value = value.replace("/ABS/outside", str(outside))
    (proj / "tflint.toml").write_text(f"cache-dir = {json.dumps(value)}\n")
    proc = run_tflint(["check", "--output-format", "json", "."], cwd=proj)
    err = assert_no_crash(proc)
    assert proc.returncode == 1 and len(json.loads(proc.stdout)) == 1
    assert "outside the project" in err
    assert not outside.exists()
    # Inside the project it is honoured.
    (proj / "tflint.toml").write_text('cache-dir = "build/.cache"\n')
    proc = run_tflint(["check", "."], cwd=proj)
    assert_no_crash(proc)
    assert list((proj / "build" / ".cache").rglob("*.json"))


def test_symlinked_cache_dir_pointing_elsewhere_is_not_written(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (proj / "m.py").write_text(TRACED_PRINT)
    os.symlink(elsewhere, proj / ".tflint_cache")
    proc = run_tflint(["check", "--output-format", "json", "."], cwd=proj)
    assert_no_crash(proc)
    assert len(json.loads(proc.stdout)) == 1
    assert list(elsewhere.iterdir()) == []
    # The user's own TFLINT_CACHE_DIR is honoured wherever it is.
    user_cache = tmp_path / "user-cache"
    proc = run_tflint(["check", "."], cwd=proj, env={"TFLINT_CACHE_DIR": str(user_cache)})
    assert_no_crash(proc)
    assert list(user_cache.rglob("*.json")) and list(elsewhere.iterdir()) == []


def test_cache_dir_dot_does_not_gitignore_the_project(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "m.py").write_text(TRACED_PRINT)
    (proj / "tflint.toml").write_text('cache-dir = "."\n')
    proc = run_tflint(["check", "."], cwd=proj)
    assert_no_crash(proc)
    assert not (proj / ".gitignore").exists()
    # A cache directory tflint creates gets its own .gitignore.
    (proj / "tflint.toml").write_text('cache-dir = "fresh-cache"\n')
    run_tflint(["check", "."], cwd=proj)
    assert (proj / "fresh-cache" / ".gitignore").read_text().strip().endswith("*")


def test_fix_does_not_write_through_symlinks_leaving_the_tree(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    outside = tmp_path / "outside.py"
    outside.write_text(TRACED_PRINT)
    os.symlink(outside, proj / "link_out.py")
    (proj / "real.py").write_text(TRACED_PRINT)
    os.symlink("real.py", proj / "link_in.py")
    proc = run_tflint(["check", "--no-cache", "--fix", "."], cwd=proj)
    err = assert_no_crash(proc)
    assert outside.read_text() == TRACED_PRINT, "fixed a file outside the checked directory"
    assert "link_out.py" in err and "outside" in err
    assert "tf.print(x)" in (proj / "real.py").read_text()
    assert (proj / "link_in.py").is_symlink() and (proj / "link_out.py").is_symlink()
    # Named explicitly, the link's target is what the user asked for.
    proc = run_tflint(["check", "--no-cache", "--fix", str(outside)], cwd=proj)
    assert_no_crash(proc)
    assert "tf.print(x)" in outside.read_text()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path, umask):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "m.py").write_text(TRACED_PRINT)
    keep = proj / "keep.py"
    keep.write_text(TRACED_PRINT)
    keep.chmod(0o751)

    def set_umask():
        os.umask(umask)

    proc = subprocess.run(
        [*tflint_cmd(), "check", "--fix", "."], cwd=proj, capture_output=True, timeout=120, preexec_fn=set_umask, check=False
    )
    assert_no_crash(proc)
    cache = proj / ".tflint_cache"
    files = [p for p in cache.rglob("*") if p.is_file()]
    dirs = [cache, *(p for p in cache.rglob("*") if p.is_dir())]
    assert files and any(p.suffix == ".json" for p in files)
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask, (p, oct(p.stat().st_mode))
    for p in dirs:
        assert stat.S_IMODE(p.stat().st_mode) == 0o777 & ~umask, (p, oct(p.stat().st_mode))
    assert "tf.print" in keep.read_text() and stat.S_IMODE(keep.stat().st_mode) == 0o751
    assert not list(proj.glob(".tflint-*"))  # no temporary files left behind
