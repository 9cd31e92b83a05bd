"""Traced code followed across the modules of a project (tflint/analysis/project.py and the
two-pass engine): resolution of imports, methods, instances and aliases; single-file checks;
the cache re-analysing only what an edit touches."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tflint.analysis import Analysis
from tflint.analysis.project import ProjectIndex, module_name, summarise

ROOT = Path(__file__).resolve().parents[1]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def index_of(root: Path) -> ProjectIndex:
    mods = []
    for p in sorted(root.rglob("*.py")):
        text = p.read_text()
        a = Analysis(ast.parse(text), text)
        mods.append((str(p), str(p.relative_to(root)), summarise(a, a.traced)))
    return ProjectIndex(mods)


def reached(root: Path, rel: str) -> dict[str, list]:
    return index_of(root).facts_for(str(root / rel))


STEP = """
    import tensorflow as tf
    {imports}

    @tf.function
    def step(x):
        {body}
        return x
"""


@pytest.mark.parametrize(
    "imports,body,module,qual",
    [
        ("from pkg import helpers", "helpers.f(x)", "pkg/helpers.py", "f"),
        ("from . import helpers", "helpers.f(x)", "pkg/helpers.py", "f"),
        ("from .helpers import f", "f(x)", "pkg/helpers.py", "f"),
        ("from .helpers import f as g", "g(x)", "pkg/helpers.py", "f"),
        ("import pkg.helpers as h", "h.f(x)", "pkg/helpers.py", "f"),
        ("import pkg.helpers", "pkg.helpers.f(x)", "pkg/helpers.py", "f"),
        ("from pkg.helpers import Tool", "Tool().g(x)", "pkg/helpers.py", "Tool.g"),
        ("from pkg.helpers import Tool", "t = Tool()\n        t.g(x)", "pkg/helpers.py", "Tool.g"),
        ("from pkg import helpers", "helpers.Tool.g(None, x)", "pkg/helpers.py", "Tool.g"),
        ("from pkg import f_alias", "f_alias(x)", "pkg/helpers.py", "f"),
        ("from pkg.sub.deep import k", "k(x)", "pkg/sub/deep.py", "k"),
        ("from ..pkg.helpers import f", "f(x)", None, None),  # beyond the top package
    ],
)
def test_resolution(tmp_path, imports, body, module, qual):
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .helpers import f as f_alias\n",
            "pkg/helpers.py": """
                def f(x):
                    return x

                class Tool:
                    def g(self, x):
                        return x
            """,
            "pkg/sub/__init__.py": "",
            "pkg/sub/deep.py": "def k(x):\n    return x\n",
            "pkg/train.py": STEP.format(imports=imports, body=body),
        },
    )
    idx = index_of(tmp_path)
    got = {(os.path.relpath(p, tmp_path), q) for p, facts in idx.external.items() for q in facts}
    if module is None:
        assert got == set()
    else:
        assert got == {(module, qual)}
        entry = idx.facts_for(str(tmp_path / module))[qual]
        assert entry == ["step", "pkg/train.py", 6]


def test_methods_through_self_and_a_base_class_of_another_module(tmp_path):
    write(
        tmp_path,
        {
            "base.py": """
                class Base:
                    def shared(self, x):
                        return self.deeper(x)

                    def deeper(self, x):
                        return x

                    def unused(self):
                        pass
            """,
            "model.py": """
                import tensorflow as tf
                from base import Base

                class Runner(Base):
                    @tf.function
                    def step(self, x):
                        return self.shared(x)
            """,
        },
    )
    assert set(reached(tmp_path, "base.py")) == {"Base.shared", "Base.deeper"}


def test_transitive_across_three_modules_and_eager_code_stays_untraced(tmp_path):
    write(
        tmp_path,
        {
            "a.py": "import tensorflow as tf\nimport b\n\n@tf.function\ndef step(x):\n    return b.f(x)\n\ndef eager():\n    b.g()\n",
            "b.py": "import c\n\ndef f(x):\n    return c.h(x)\n\ndef g():\n    pass\n",
            "c.py": "def h(x):\n    return x\n",
        },
    )
    assert set(reached(tmp_path, "b.py")) == {"f"}
    assert reached(tmp_path, "c.py") == {"h": ["step", "a.py", 5]}


def test_module_names(tmp_path):
    write(tmp_path, {"p/__init__.py": "", "p/q/__init__.py": "", "p/q/m.py": "", "script.py": ""})
    assert module_name(str(tmp_path / "p/q/m.py")) == "p.q.m"
    assert module_name(str(tmp_path / "p/q/__init__.py")) == "p.q"
    assert module_name(str(tmp_path / "script.py")) == "script"


# -- through the command line ----------------------------------------------------------------
PROJECT = {
    "pkg/__init__.py": "",
    "pkg/train.py": """
        import tensorflow as tf
        from pkg import losses
        from pkg.log import Log

        @tf.function
        def train_step(x):
            Log().write(x)
            return losses.loss(x)
    """,
    "pkg/losses.py": """
        def loss(x):
            print("tracing")
            return x
    """,
    "pkg/log.py": """
        class Log:
            def write(self, x):
                print(x)
    """,
    "pkg/other.py": "import tensorflow as tf\n\ndef unrelated():\n    return tf.constant(1)\n",
}


def run(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TFLINT_STATS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tflint", "check", "--output-format", "json", *args],
        cwd=cwd, env=env, capture_output=True, text=True, input=stdin, timeout=120,
    )


def findings(proc) -> list[tuple[str, int, str, str]]:
    return sorted((f["filename"], f["location"]["row"], f["code"], f["message"]) for f in json.loads(proc.stdout))


def stats(proc) -> dict[str, int]:
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("tflint-stats:"))
    return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}


def test_findings_in_other_modules_name_the_entry_point(tmp_path):
    write(tmp_path, PROJECT)
    got = findings(run(tmp_path, "--no-cache", "pkg"))
    where = [(Path(f).name, line, code) for f, line, code, _ in got]
    assert where == [("log.py", 4, "TFL101"), ("losses.py", 3, "TFL101")]
    assert all("is traced through `train_step` in pkg/train.py:7" in m for *_, m in got)


def test_one_file_on_its_own_and_stdin_see_their_package(tmp_path):
    write(tmp_path, PROJECT)
    one = findings(run(tmp_path, "--no-cache", "pkg/losses.py"))
    assert [(Path(f).name, line, code) for f, line, code, _ in one] == [("losses.py", 3, "TFL101")]
    text = (tmp_path / "pkg/log.py").read_text()
    piped = findings(run(tmp_path, "--no-cache", "-", "--stdin-filename", "pkg/log.py", stdin=text))
    assert [(line, code) for _, line, code, _ in piped] == [(4, "TFL101")]
    # Without a file name, stdin is a project of its own: nothing traces `write`.
    assert findings(run(tmp_path, "--no-cache", "-", stdin=text)) == []


def test_editing_one_file_reanalyses_only_what_depends_on_it(tmp_path):
    write(tmp_path, PROJECT)
    cold = run(tmp_path, "pkg")
    assert stats(cold)["summarised"] == 5 and stats(cold)["cached"] == 0
    warm = run(tmp_path, "pkg")
    assert findings(warm) == findings(cold)
    assert stats(warm) == {"files": 5, "summarised": 0, "analysed": 0, "cached": 5}

    # An edit that changes nothing the project shares: only that file is read again.
    p = tmp_path / "pkg/other.py"
    p.write_text(p.read_text() + "\n# a comment\n")
    s = stats(run(tmp_path, "pkg"))
    assert (s["summarised"], s["analysed"], s["cached"]) == (1, 1, 4)

    # The traced step stops calling `loss`: train.py and losses.py (whose facts changed) are
    # analysed again, the others come from the cache.
    t = tmp_path / "pkg/train.py"
    t.write_text(t.read_text().replace("return losses.loss(x)", "return x"))
    edited = run(tmp_path, "pkg")
    s = stats(edited)
    assert (s["summarised"], s["cached"]) == (1, 3)
    assert s["analysed"] == 2  # train.py (summary pass) and losses.py (its facts are gone)
    assert [(Path(f).name, line) for f, line, _, _ in findings(edited)] == [("log.py", 4)]
