"""pre-commit: the published hook definition, and a real commit rejected then accepted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"
GOOD = BAD.replace("print(x)", "tf.print(x)")
PRE_COMMIT = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))


def test_hook_definition():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    by_id = {h["id"]: h for h in hooks}
    hook = by_id["tflint"]
    assert hook["language"] == "python"
    assert hook["entry"].split()[:2] == ["tflint", "check"]
    assert {"python", "jupyter"} <= set(hook["types_or"])
    assert "--fix" in by_id["tflint-fix"]["entry"]
    # Every flag the hooks pass is one `tflint check` accepts.
    help_text = subprocess.run([sys.executable, "-m", "tflint", "check", "--help"], capture_output=True,
                               text=True, env={**os.environ, "COLUMNS": "200"}).stdout
    for h in hooks:
        for arg in h["entry"].split()[2:]:
            assert arg in help_text, arg


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists(PRE_COMMIT), reason="pre-commit is not installed")
def test_commit_with_finding_is_rejected_and_fixed_one_accepted(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pc-home"),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    env.pop("TFLINT_CACHE_DIR", None)
    # The hook as published, but run with this checkout's interpreter (no network, no install).
    published = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}["tflint"]
    hook = {
        "id": "tflint",
        "name": "tflint",
        "entry": f"{sys.executable} -m " + published["entry"],
        "language": "system",
        "types_or": published["types_or"],
        "require_serial": True,
    }
    config = {"repos": [{"repo": "local", "hooks": [hook]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    run = lambda *a: subprocess.run(list(a), cwd=repo, capture_output=True, text=True, timeout=300, env=env)  # noqa: E731
    assert run("git", "init", "-q").returncode == 0
    assert run("git", "config", "commit.gpgsign", "false").returncode == 0
    proc = run(PRE_COMMIT, "install")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (repo / ".gitignore").write_text(".tflint_cache/\n")
    (repo / "train.py").write_text(BAD)
    (repo / "README.md").write_text("not python\n")
    run("git", "add", ".")
    proc = run("git", "commit", "-m", "add training step")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "TFL101" in out and "train.py" in out
    assert run("git", "rev-parse", "--verify", "HEAD").returncode != 0  # nothing committed
    (repo / "train.py").write_text(GOOD)
    run("git", "add", "train.py")
    proc = run("git", "commit", "-m", "add training step")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "train.py" in run("git", "show", "--stat", "HEAD").stdout
