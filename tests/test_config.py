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


# -- target-version -----------------------------------------------------------------------

from tflint.analysis import version as tfversion  # noqa: E402

UNPREFETCHED = "import tensorflow as tf\nds = tf.data.Dataset.range(8).batch(2)\nfor x in ds:\n    pass\n"


@pytest.mark.parametrize(
    "text,expected",
    [("2.16", (2, 16)), ("2.16.1", (2, 16)), ("tf2.16", (2, 16)), ("TF2.9", (2, 9)),
     ("tensorflow2.21", (2, 21)), ("2.0", (2, 0)), (" 2.12 ", (2, 12))],
)
def test_target_version_spellings(text, expected):
    assert tfversion.parse_version(text) == expected


@pytest.mark.parametrize("text", ["3.0", "1.15", "2.22", "2", "latest", "", "2.x", 2.16])
def test_target_version_invalid_names_the_range(text):
    with pytest.raises(ValueError, match=r"from 2\.0 to 2\.21"):
        tfversion.parse_version(text)


@pytest.mark.parametrize(
    "spec,low",
    [("==2.15.*", (2, 15)), (">=2.12,<2.16", (2, 12)), ("~=2.14.0", (2, 14)), ("<2.16", None),
     ("", None), (">=2.10, !=2.11.0", (2, 10)), ("==2.13.1", (2, 13)), (">2.8", (2, 8))],
)
def test_lower_bound_of_specifiers(spec, low):
    assert tfversion.lower_bound(spec) == low


def test_target_from_requirements_and_pyproject(tmp_path):
    tfversion.from_project.cache_clear()
    write(tmp_path, "a/requirements.txt", "numpy\ntensorflow-cpu>=2.8,<2.16  # pinned\n-r other.txt\n")
    t = tfversion.from_project(str(tmp_path / "a"))
    assert t.tensorflow == (2, 8) and t.keras == 2
    write(tmp_path, "b/pyproject.toml",
          '[project]\nname = "x"\ndependencies = ["tensorflow[and-cuda]==2.17.*; sys_platform == \'linux\'"]\n')
    t = tfversion.from_project(str(tmp_path / "b" / "src"))  # found walking up
    assert t.tensorflow == (2, 17) and t.keras == 3
    write(tmp_path, "c/pyproject.toml",
          '[project]\nname = "x"\ndependencies = []\n[project.optional-dependencies]\n'
          'gpu = ["tensorflow>=2.16", "tf-keras>=2.16"]\n')
    t = tfversion.from_project(str(tmp_path / "c"))
    assert t.tensorflow == (2, 16) and t.keras == 2  # tf-keras declared: Keras 2
    write(tmp_path, "d/requirements-dev.txt", "pytest\n")
    assert tfversion.from_project(str(tmp_path / "d")) is None


def test_installed_metadata_is_read_without_importing_tensorflow():
    proc = subprocess.run(
        [sys.executable, "-c",
         "import sys; from tflint.analysis import version as v; t = v.from_installed(); "
         "print(t, t.keras, 'tensorflow' in sys.modules)"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.stdout.split() == ["2.21", "3", "False"], proc.stderr


def test_target_version_from_config_cli_and_project(tmp_path):
    write(tmp_path, "train.py", UNPREFETCHED)
    # Default: the installed TensorFlow (2.21) injects the prefetch: nothing to report.
    assert check("train.py", cwd=tmp_path).returncode == 0
    assert codes(check("--target-version", "2.8", "train.py", cwd=tmp_path)) == ["TFL401@train.py"]
    write(tmp_path, "requirements.txt", "tensorflow==2.8.4\n")
    assert codes(check("train.py", cwd=tmp_path)) == ["TFL401@train.py"]
    assert check("--target-version", "tf2.21", "train.py", cwd=tmp_path).returncode == 0
    write(tmp_path, "tflint.toml", 'target-version = "2.12"\n')
    assert check("train.py", cwd=tmp_path).returncode == 0
    assert codes(check("--target-version", "2.5", "train.py", cwd=tmp_path)) == ["TFL401@train.py"]


def test_invalid_target_version_is_a_usage_error(tmp_path):
    write(tmp_path, "train.py", UNPREFETCHED)
    proc = check("--target-version", "2.99", "train.py", cwd=tmp_path)
    assert_config_error(proc, "--target-version", "2.0 to 2.21")
    write(tmp_path, "tflint.toml", 'target-version = "1.15"\n')
    assert_config_error(check("train.py", cwd=tmp_path), "tflint.toml", "target-version", "2.0 to 2.21")
    write(tmp_path, "tflint.toml", "target-version = 2.16\n")
    assert_config_error(check("train.py", cwd=tmp_path), "target-version", "2.0 to 2.21")


def test_retired_code_in_configuration(tmp_path):
    write(tmp_path, "train.py", UNPREFETCHED)
    write(tmp_path, "tflint.toml", 'select = ["TFL501"]\n')
    assert_config_error(check("train.py", cwd=tmp_path), "TFL501", "was removed")
    write(tmp_path, "tflint.toml", 'ignore = ["TFL501"]\nper-file-ignores = { "x.py" = ["TFL501"] }\n')
    assert check("train.py", cwd=tmp_path).returncode == 0
    assert_config_error(check("--select", "TFL501", "train.py", cwd=tmp_path), "--select", "was removed")
    assert check("--ignore", "TFL501", "train.py", cwd=tmp_path).returncode == 0


def test_target_version_is_part_of_the_cache_key(tmp_path):
    from tflint.check.cache import file_key

    enabled = frozenset({"TFL401"})
    k = file_key("a.py", b"x", enabled)
    assert k == file_key("a.py", b"x", enabled, tfversion.DEFAULT)
    assert k != file_key("a.py", b"x", enabled, tfversion.make_target("2.8"))
    assert file_key("a.py", b"x", enabled, tfversion.TargetVersion((2, 16), 2)) != file_key(
        "a.py", b"x", enabled, tfversion.TargetVersion((2, 16), 3)
    )
    # End to end, with the cache on: a changed target is not answered from the cache.
    write(tmp_path, "train.py", UNPREFETCHED)
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}

    def cached(*args):
        return subprocess.run([sys.executable, "-m", "tflint", "check", "--output-format", "concise", *args,
                               "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)

    assert cached().returncode == 0
    assert cached("--target-version", "2.8").returncode == 1
    assert cached().returncode == 0
    assert (tmp_path / ".tflint_cache").is_dir()


def test_rules_outside_their_tensorflow_versions_do_not_run():
    import ast as ast_mod

    from tflint.check.engine import lint_text
    from tflint.check.render import ruledoc
    from tflint.finding import Severity
    from tflint.rules.base import Rule

    class OldOnly(Rule):
        code = "TFL999"
        name = "old-only"
        severity = Severity.WARNING
        summary = "for old TensorFlow"
        tensorflow_versions = ((2, 0), (2, 8))

        def check(self, ctx):
            for node in ctx.analysis.nodes(ast_mod.Import):
                ctx.report(node, f"target {ctx.analysis.target}")

    src = "import tensorflow as tf\n"
    enabled = frozenset({"TFL999"})
    assert lint_text("a.py", src, enabled, rules=[OldOnly()]).findings == []  # default: 2.21
    got = lint_text("a.py", src, enabled, rules=[OldOnly()], target=tfversion.make_target("2.8")).findings
    assert [f.message for f in got] == ["target 2.8"]
    assert lint_text("a.py", src, enabled, rules=[OldOnly()], target=tfversion.make_target("2.9")).findings == []
    assert OldOnly.versions_text() == "TensorFlow 2.0 to 2.8"
    assert "Applies to TensorFlow 2.0 to 2.8" in ruledoc.rule_text(OldOnly)
    assert ruledoc.rule_dict(OldOnly)["tensorflow_versions"] == {"from": "2.0", "to": "2.8"}
    from tflint.rules import all_rules

    assert all("Applies to TensorFlow" in ruledoc.rule_text(r) for r in all_rules())


def test_each_file_takes_the_closest_declarations(tmp_path):
    write(tmp_path, "old/requirements.txt", "tensorflow==2.8.*\n")
    write(tmp_path, "old/train.py", UNPREFETCHED)
    write(tmp_path, "new/pyproject.toml", '[project]\nname = "n"\ndependencies = ["tensorflow>=2.16"]\n')
    write(tmp_path, "new/pkg/train.py", UNPREFETCHED)
    proc = check(".", cwd=tmp_path)
    assert codes(proc) == ["TFL401@old/train.py"], proc.stdout
    # stdin takes the declarations of the directory --stdin-filename names
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    proc = subprocess.run([sys.executable, "-m", "tflint", "check", "--no-cache", "-", "--stdin-filename",
                           "old/x.py", "--output-format", "concise"], input=UNPREFETCHED, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1 and "TFL401" in proc.stdout
