"""Configuration files: discovery, keys, validation, and command-line precedence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tflint.check.config import ConfigError, ConfigFinder, Overrides, load_file, make_settings

BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def check(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--output-format", "concise", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env,
    )


def codes(proc) -> list[str]:
    return [ln.split(": ")[1].split()[0] + "@" + ln.split(":")[0] for ln in proc.stdout.splitlines() if ": TFL" in ln]


def assert_config_error(proc, *needles):
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)


def test_pyproject_found_walking_up(tmp_path):
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n\n[tool.tflint]\nignore = ["TFL101"]\n')
    write(tmp_path, "src/pkg/deep/train.py", BAD)
    assert check(cwd=tmp_path).returncode == 0
    # also when run from a subdirectory, and for a single file path
    assert check(cwd=tmp_path / "src" / "pkg").returncode == 0
    assert check("src/pkg/deep/train.py", cwd=tmp_path).returncode == 0


def test_pyproject_without_section_is_skipped(tmp_path):
    write(tmp_path, "tflint.toml", 'ignore = ["TFL101"]\n')
    write(tmp_path, "sub/pyproject.toml", '[project]\nname = "sub"\n')
    write(tmp_path, "sub/train.py", BAD)
    assert check(cwd=tmp_path).returncode == 0


def test_tflint_toml_wins_and_nearest_config_governs(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.tflint]\nignore = ["TFL101"]\n')
    write(tmp_path, "tflint.toml", 'select = ["TFL101"]\n')
    write(tmp_path, "a.py", BAD)
    write(tmp_path, "quiet/tflint.toml", 'ignore = ["TFL1"]\n')
    write(tmp_path, "quiet/b.py", BAD)
    assert codes(check(cwd=tmp_path)) == ["TFL101@a.py"]


def test_per_file_ignores(tmp_path):
    write(tmp_path, "pyproject.toml",
          '[tool.tflint.per-file-ignores]\n"tests/**" = ["TFL101"]\n"scratch_*.py" = ["TFL1"]\n')
    write(tmp_path, "tests/unit/test_a.py", BAD)
    write(tmp_path, "pkg/scratch_b.py", BAD)
    write(tmp_path, "pkg/model.py", BAD)
    assert codes(check(cwd=tmp_path)) == ["TFL101@pkg/model.py"]


def test_exclude_keys(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.tflint]\nextend-exclude = ["gen", "legacy/old.py"]\n')
    write(tmp_path, "gen/a.py", BAD)
    write(tmp_path, "legacy/old.py", BAD)
    write(tmp_path, "legacy/new.py", BAD)
    write(tmp_path, "build/b.py", BAD)
    assert codes(check(cwd=tmp_path)) == ["TFL101@legacy/new.py"]
    write(tmp_path, "pyproject.toml", '[tool.tflint]\nexclude = ["legacy"]\n')
    assert codes(check(cwd=tmp_path)) == ["TFL101@build/b.py", "TFL101@gen/a.py"]


def test_select_and_extend_select_keys(tmp_path):
    write(tmp_path, "a.py", BAD)
    write(tmp_path, "tflint.toml", 'select = ["TFL4"]\n')
    assert codes(check(cwd=tmp_path)) == []
    write(tmp_path, "tflint.toml", 'select = ["TFL4"]\nextend-select = ["TFL101"]\n')
    assert codes(check(cwd=tmp_path)) == ["TFL101@a.py"]


def test_cli_overrides_config(tmp_path):
    write(tmp_path, "a.py", BAD)
    write(tmp_path, "tflint.toml", 'ignore = ["TFL101"]\n')
    assert codes(check(cwd=tmp_path)) == []
    assert codes(check("--select", "TFL101", cwd=tmp_path)) == ["TFL101@a.py"]
    write(tmp_path, "tflint.toml", 'select = ["TFL4"]\n')
    assert codes(check("--extend-select", "TFL101", cwd=tmp_path)) == ["TFL101@a.py"]
    write(tmp_path, "tflint.toml", 'select = ["TFL1"]\n')
    assert codes(check("--ignore", "TFL101", cwd=tmp_path)) == []
    write(tmp_path, "tflint.toml", 'exclude = ["a.py"]\n')
    assert codes(check(cwd=tmp_path)) == []
    # --exclude replaces the configured `exclude` (`extend-exclude` still applies)
    assert codes(check("--exclude", "nothing", cwd=tmp_path)) == ["TFL101@a.py"]
    write(tmp_path, "tflint.toml", 'extend-exclude = ["a.py"]\n')
    assert codes(check("--exclude", "nothing", cwd=tmp_path)) == []


@pytest.mark.parametrize(
    "body, needles",
    [
        ('[tool.tflint]\nselekt = ["TFL1"]\n', ["pyproject.toml", "selekt", "expected one of"]),
        ('[tool.tflint]\nselect = "TFL1"\n', ["pyproject.toml", "'select'", "list of strings", "str"]),
        ('[tool.tflint]\nignore = ["TFL1", 3]\n', ["'ignore'", "list of strings"]),
        ('[tool.tflint]\nselect = ["TFL777"]\n', ["'select'", "TFL777", "unknown rule code"]),
        ('[tool.tflint]\nper-file-ignores = ["x"]\n', ["per-file-ignores", "table"]),
        ('[tool.tflint.per-file-ignores]\n"a.py" = ["NOPE1"]\n', ["per-file-ignores", "NOPE1"]),
        ('[tool.tflint]\ncache-dir = 5\n', ["cache-dir", "string"]),
        ('[tool.tflint\nselect = []\n', ["pyproject.toml", "invalid TOML"]),
    ],
)
def test_invalid_config_is_exit_2_one_line(tmp_path, body, needles):
    write(tmp_path, "pyproject.toml", body)
    write(tmp_path, "a.py", BAD)
    assert_config_error(check(cwd=tmp_path), *needles)


def test_invalid_tflint_toml(tmp_path):
    write(tmp_path, "tflint.toml", "exclude = [1]\n")
    write(tmp_path, "a.py", BAD)
    assert_config_error(check(cwd=tmp_path), "tflint.toml", "'exclude'", "list of strings")


def test_cache_dir_key(tmp_path):
    write(tmp_path, "tflint.toml", 'cache-dir = "var/lint-cache"\n')
    write(tmp_path, "a.py", BAD)
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    subprocess.run([sys.executable, "-m", "tflint", "check", "-q"], cwd=tmp_path, env=env,
                   capture_output=True, timeout=120)
    assert (tmp_path / "var" / "lint-cache").is_dir()
    assert not (tmp_path / ".tflint_cache").exists()


def test_load_file_and_settings_in_process(tmp_path):
    cfg_path = write(tmp_path, "pyproject.toml",
                     '[tool.tflint]\nselect = ["TFL1"]\nignore = ["TFL102"]\n'
                     '[tool.tflint.per-file-ignores]\n"tests/*.py" = ["TFL101"]\n')
    cfg = load_file(str(cfg_path))
    assert cfg.select == ("TFL1",) and cfg.ignore == ("TFL102",)
    settings = make_settings(cfg, Overrides())
    assert "TFL101" in settings.enabled and "TFL102" not in settings.enabled
    assert all(c.startswith("TFL1") for c in settings.enabled)
    assert "TFL101" not in settings.enabled_for(str(tmp_path / "tests" / "test_x.py"))
    assert "TFL101" in settings.enabled_for(str(tmp_path / "src" / "x.py"))
    finder = ConfigFinder(str(tmp_path))
    assert finder.for_dir(str(tmp_path / "a" / "b")).path == str(cfg_path)
    write(tmp_path, "bad/tflint.toml", "what = 1\n")
    with pytest.raises(ConfigError, match="unknown key 'what'"):
        finder.for_dir(str(tmp_path / "bad"))
