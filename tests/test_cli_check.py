"""`tflint check` from the command line: every option, exit codes, formats, discovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BAD = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    print(x)\n    return x\n"
GOOD = BAD.replace("print(x)", "tf.print(x)")
ROOT = Path(__file__).resolve().parents[1]


def tflint(*args, cwd, input=None, env=None):
    e = dict(os.environ)
    e.pop("TFLINT_CACHE_DIR", None)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tflint", "check", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
        env=e,
    )


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def concise(*args, cwd, **kw):
    return tflint("--output-format", "concise", "--no-cache", *args, cwd=cwd, **kw)


def finding_lines(proc) -> list[str]:
    return [ln for ln in proc.stdout.splitlines() if ": TFL" in ln]


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error:")
    for n in needles:
        assert n in err


def test_default_path_is_current_directory(tmp_path):
    write(tmp_path, "pkg/train.py", BAD)
    proc = concise(cwd=tmp_path)
    assert proc.returncode == 1
    assert finding_lines(proc) == [
        "pkg/train.py:5:5: TFL101 " + finding_lines(proc)[0].split(" TFL101 ", 1)[1]
    ]


def test_clean_exits_zero_and_findings_exit_one(tmp_path):
    write(tmp_path, "ok.py", GOOD)
    assert concise("ok.py", cwd=tmp_path).returncode == 0
    write(tmp_path, "bad.py", BAD)
    assert concise("bad.py", "ok.py", cwd=tmp_path).returncode == 1


def test_exit_zero(tmp_path):
    write(tmp_path, "bad.py", BAD)
    proc = concise("--exit-zero", cwd=tmp_path)
    assert proc.returncode == 0 and finding_lines(proc)


def test_quiet_prints_only_findings(tmp_path):
    write(tmp_path, "bad.py", BAD)
    loud = concise(cwd=tmp_path)
    quiet = concise("--quiet", cwd=tmp_path)
    assert "Found 1" in loud.stdout
    assert quiet.stdout.strip().splitlines() == finding_lines(loud)
    write(tmp_path, "bad.py", GOOD)
    assert tflint("--quiet", "--no-cache", cwd=tmp_path).stdout == ""
    assert "All checks passed" in tflint("--no-cache", cwd=tmp_path).stdout


def test_select_ignore_extend_select(tmp_path):
    write(tmp_path, "bad.py", BAD)
    assert finding_lines(concise("--select", "TFL101", cwd=tmp_path))
    assert finding_lines(concise("--select", "TFL1", cwd=tmp_path))
    assert not finding_lines(concise("--select", "TFL4", cwd=tmp_path))
    assert finding_lines(concise("--select", "TFL4", "--extend-select", "TFL101", cwd=tmp_path))
    # comma-separated and repeatable
    assert finding_lines(concise("--select", "TFL4,TFL101", cwd=tmp_path))
    assert finding_lines(concise("--select", "TFL4", "--select", "TFL10", cwd=tmp_path))
    proc = concise("--ignore", "TFL101", cwd=tmp_path)
    assert proc.returncode == 0 and not finding_lines(proc)
    assert not finding_lines(concise("--ignore", "TFL4,TFL1", cwd=tmp_path))


def test_unknown_codes_are_usage_errors(tmp_path):
    write(tmp_path, "bad.py", BAD)
    assert_one_line_error(concise("--select", "TFL999", cwd=tmp_path), "--select", "TFL999")
    assert_one_line_error(concise("--ignore", "TFL101,XYZ", cwd=tmp_path), "--ignore", "XYZ")
    assert_one_line_error(concise("--extend-select", "E501", cwd=tmp_path), "E501")


def test_other_usage_errors(tmp_path):
    assert_one_line_error(concise("missing.py", cwd=tmp_path), "missing.py")
    assert_one_line_error(tflint("--output-format", "xml", cwd=tmp_path), "xml", "concise")
    assert_one_line_error(tflint("-", "other.py", cwd=tmp_path, input=""), "stdin")
    assert_one_line_error(tflint("--stdin-filename", "x.py", ".", cwd=tmp_path), "--stdin-filename")


def test_default_excludes(tmp_path):
    for rel in ("build/b.py", "dist/d.py", ".venv/v.py", "venv/v.py", "__pycache__/c.py",
                "lib/site-packages/s.py", ".git/g.py", "myenv/lib/e.py", "src/ok.py"):
        write(tmp_path, rel, BAD)
    write(tmp_path, "myenv/pyvenv.cfg", "home = /usr\n")
    proc = tflint("--show-files", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.split() == ["src/ok.py"]
    # A path given explicitly is checked even inside an excluded directory.
    assert tflint("--show-files", "build/b.py", cwd=tmp_path).stdout.split() == ["build/b.py"]


def test_exclude_and_extend_exclude(tmp_path):
    write(tmp_path, "src/a.py", BAD)
    write(tmp_path, "src/gen/g.py", BAD)
    write(tmp_path, "build/b.py", BAD)
    write(tmp_path, "legacy_x.py", BAD)
    files = lambda *a: tflint("--show-files", *a, cwd=tmp_path).stdout.split()  # noqa: E731
    assert files() == ["legacy_x.py", "src/a.py", "src/gen/g.py"]
    assert files("--extend-exclude", "gen") == ["legacy_x.py", "src/a.py"]
    assert files("--extend-exclude", "legacy_*.py,src/gen") == ["src/a.py"]
    # --exclude replaces the defaults: build/ is checked again
    assert files("--exclude", "gen") == ["build/b.py", "legacy_x.py", "src/a.py"]
    proc = concise("--extend-exclude", "src", "--extend-exclude", "legacy_x.py", cwd=tmp_path)
    assert proc.returncode == 0


def test_gitignore_is_respected(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    write(tmp_path, ".gitignore", "generated/\n*.gen.py\n!keep.gen.py\n/top_only.py\n")
    write(tmp_path, "generated/x.py", BAD)
    write(tmp_path, "a.gen.py", BAD)
    write(tmp_path, "keep.gen.py", BAD)
    write(tmp_path, "top_only.py", BAD)
    write(tmp_path, "sub/top_only.py", BAD)
    write(tmp_path, "sub/.gitignore", "local.py\n")
    write(tmp_path, "sub/local.py", BAD)
    write(tmp_path, "main.py", BAD)
    files = tflint("--show-files", cwd=tmp_path).stdout.split()
    assert files == ["keep.gen.py", "main.py", "sub/top_only.py"]
    # Checking a subdirectory still honours the .gitignore files above it.
    write(tmp_path, "sub/b.gen.py", BAD)
    assert tflint("--show-files", "sub", cwd=tmp_path).stdout.split() == ["sub/top_only.py"]


def test_show_files_sorted_and_notebooks(tmp_path):
    write(tmp_path, "z.py", "")
    write(tmp_path, "a/b.ipynb", '{"cells": []}')
    write(tmp_path, "a/types.pyi", "")
    write(tmp_path, "notes.txt", "")
    assert tflint("--show-files", cwd=tmp_path).stdout.split() == ["a/b.ipynb", "a/types.pyi", "z.py"]


def test_output_format_concise_full_json_sarif_github(tmp_path):
    write(tmp_path, "bad.py", BAD)
    (line,) = finding_lines(concise(cwd=tmp_path))
    assert line.startswith("bad.py:5:5: TFL101 ")
    full = tflint("--no-cache", cwd=tmp_path).stdout
    assert "print(x)" in full and "^" in full and "TFL101" in full
    data = json.loads(tflint("--output-format", "json", "--no-cache", cwd=tmp_path).stdout)
    (f,) = data
    assert f["code"] == "TFL101" and f["filename"].endswith("bad.py")
    assert f["location"] == {"row": 5, "column": 5} and f["severity"] == "error"
    assert f["fix"] is not None and f["url"]
    sarif = json.loads(tflint("--output-format", "sarif", "--no-cache", cwd=tmp_path).stdout)
    assert sarif["version"] == "2.1.0"
    assert sarif["runs"][0]["results"][0]["ruleId"] == "TFL101"
    gh = tflint("--output-format", "github", "--no-cache", cwd=tmp_path).stdout
    assert gh.startswith("::error") and "file=bad.py" in gh and "line=5" in gh


def test_statistics(tmp_path):
    write(tmp_path, "a.py", BAD)
    write(tmp_path, "b.py", BAD)
    write(tmp_path, "c.py", "def f(:\n")
    proc = tflint("--statistics", "--no-cache", cwd=tmp_path)
    assert proc.returncode == 1
    rows = {ln.split()[1]: int(ln.split()[0]) for ln in proc.stdout.splitlines() if ln.strip()}
    assert rows == {"TFL101": 2, "TFL000": 1}
    stats = json.loads(tflint("--statistics", "--output-format", "json", "--no-cache", cwd=tmp_path).stdout)
    assert {r["code"]: r["count"] for r in stats} == {"TFL101": 2, "TFL000": 1}


def test_stdin(tmp_path):
    proc = concise("-", cwd=tmp_path, input=BAD)
    assert proc.returncode == 1
    assert finding_lines(proc)[0].startswith("-:5:5: TFL101")
    proc = concise("-", "--stdin-filename", "pkg/train.py", cwd=tmp_path, input=BAD)
    assert finding_lines(proc)[0].startswith("pkg/train.py:5:5: TFL101")
    assert concise("-", cwd=tmp_path, input=GOOD).returncode == 0


def test_stdin_filename_picks_up_config(tmp_path):
    write(tmp_path, "pkg/pyproject.toml", '[tool.tflint]\nignore = ["TFL101"]\n')
    proc = concise("-", "--stdin-filename", "pkg/train.py", cwd=tmp_path, input=BAD)
    assert proc.returncode == 0, proc.stdout


def test_notebook_findings_show_cell(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
             "source": ["%load_ext autoreload\n", "import tensorflow as tf\n"]},
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
             "source": ["@tf.function\n", "def f(x):\n", "    print(x)\n", "    return x\n"]},
        ],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    write(tmp_path, "nb.ipynb", json.dumps(nb))
    (line,) = finding_lines(concise(cwd=tmp_path))
    assert line.startswith("nb.ipynb:cell 2:3:5: TFL101")
    f = json.loads(tflint("--output-format", "json", "--no-cache", cwd=tmp_path).stdout)[0]
    assert f["cell"] == 2 and f["location"]["row"] == 3
    full = tflint("--no-cache", cwd=tmp_path).stdout
    assert "print(x)" in full


def test_unparsable_files_do_not_stop_the_run(tmp_path):
    write(tmp_path, "a_bad.py", "def f(:\n")
    (tmp_path / "b_bin.py").write_bytes(b"\x00\x01\x02")
    (tmp_path / "c_enc.py").write_bytes(b"x = '\xff'\n")
    write(tmp_path, "d_nb.ipynb", "{not json")
    write(tmp_path, "e.py", BAD)
    proc = concise(cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    codes = [(ln.split(":")[0], ln.split(": ")[1].split()[0]) for ln in finding_lines(proc)]
    assert codes == [("a_bad.py", "TFL000"), ("b_bin.py", "TFL000"), ("c_enc.py", "TFL000"),
                     ("d_nb.ipynb", "TFL000"), ("e.py", "TFL101")]


def test_output_is_deterministic_with_many_files(tmp_path):
    for i in range(60):
        write(tmp_path, f"pkg{i % 4}/m{i:02d}.py", BAD if i % 2 else GOOD + "\n" * i)
    first = concise(cwd=tmp_path).stdout
    second = concise(cwd=tmp_path).stdout
    assert first == second
    lines = [ln for ln in first.splitlines() if ": TFL" in ln]
    assert len(lines) == 30 and lines == sorted(lines)


CRASH_DRIVER = textwrap.dedent(
    """
    import sys
    import tflint.rules as registry
    from tflint.rules.base import Rule

    class Crash(Rule):
        code = "TFL998"
        name = "crashes-on-purpose"
        summary = what = why = example = use_instead = "crashes"

        def check(self, ctx):
            raise RuntimeError("kaput")

    original = registry.all_rules()
    registry.all_rules = lambda: original + (Crash,)
    from tflint.cli import main
    sys.argv = ["tflint", "check", *sys.argv[1:]]
    main()
    """
)


def test_crashing_rule_is_an_internal_error_exit_2(tmp_path):
    write(tmp_path, "bad.py", BAD)
    write(tmp_path, "driver.py", CRASH_DRIVER)
    proc = subprocess.run(
        [sys.executable, "driver.py", "--output-format", "concise", "--no-cache", "bad.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "TFL998" in proc.stderr and "crashes-on-purpose" in proc.stderr and "bad.py" in proc.stderr
    assert "kaput" in proc.stderr
    assert finding_lines(proc)[0].startswith("bad.py:5:5: TFL101")  # other rules' findings kept


def test_version():
    proc = subprocess.run([sys.executable, "-m", "tflint", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("tflint ")


@pytest.mark.parametrize("flag", ["--help"])
def test_help_lists_every_option(flag):
    proc = subprocess.run([sys.executable, "-m", "tflint", "check", flag], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"})
    for opt in ("--select", "--ignore", "--extend-select", "--exclude", "--extend-exclude", "--output-format",
                "--statistics", "--exit-zero", "--quiet", "--no-cache", "--show-files", "--fix", "--diff",
                "--unsafe-fixes", "--stdin-filename"):
        assert opt in proc.stdout, opt


def test_force_exclude_applies_excludes_to_explicit_paths(tmp_path):
    write(tmp_path, "build/gen.py", BAD)
    write(tmp_path, "vendor/lib/x.py", BAD)
    write(tmp_path, "src/a.py", BAD)
    write(tmp_path, "tflint.toml", 'extend-exclude = ["vendor"]\n')
    args = ["--show-files", "build/gen.py", "vendor/lib/x.py", "src/a.py"]
    assert tflint(*args, cwd=tmp_path).stdout.split() == ["build/gen.py", "src/a.py", "vendor/lib/x.py"]
    assert tflint(*args, "--force-exclude", cwd=tmp_path).stdout.split() == ["src/a.py"]
    assert concise("--force-exclude", "build/gen.py", cwd=tmp_path).returncode == 0


def test_unknown_option_is_one_line_usage_error(tmp_path):
    assert_one_line_error(tflint("--bogus", cwd=tmp_path), "--bogus")
    assert_one_line_error(tflint("--select", cwd=tmp_path), "--select")


def test_check_main_entry_point_matches_cli(tmp_path):
    # The function the CLI dispatches to, called directly (no CLI framework involved).
    write(tmp_path, "bad.py", BAD)
    code = subprocess.run(
        [sys.executable, "-c", "import sys; from tflint.commands.check import main; sys.exit(main(sys.argv[1:]))",
         "--output-format", "concise", "--no-cache", "bad.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert code.returncode == 1 and code.stdout == concise("bad.py", cwd=tmp_path).stdout
