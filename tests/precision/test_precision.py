"""Precision on real TensorFlow code: the judged findings of ``bench/precision.py`` hold.

Every finding of ``tflint check`` on the harness's corpora (the tf-models-official wheel, twelve
pinned wheels of TensorFlow's ecosystem, the installed ``keras/src`` and ``tensorflow/python``)
was judged by hand once; the verdicts live in
``tests/precision/verdicts.json``. These tests fail when

- a finding judged false, and since fixed, fires again;
- a finding judged true no longer fires;
- ``tflint check`` reports an internal error on a corpus.

New findings with no verdict do not fail (rules change; ``python bench/precision.py`` lists them
to be judged). A corpus is skipped with the reason when it is not available: the wheels are
downloaded with pip into the harness's cache and skipped without network; an installed tree
whose version differs from the one judged is skipped (its lines are other code).

The four corpora are checked once per session (a module-scoped fixture): about 2.2M lines,
which takes tens of seconds on two cores.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_harness():
    spec = importlib.util.spec_from_file_location("tflint_bench_precision", ROOT / "bench" / "precision.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


prec = _load_harness()
VERDICTS = prec.load_verdicts()

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def results() -> dict:
    out: dict = {}
    for name in prec.CORPORA:
        try:
            corpus = prec.get_corpus(name, download=True)
        except prec.Unavailable as e:
            out[name] = f"{name} not available: {e}"
            continue
        judged = VERDICTS["corpora"].get(name)
        if judged is None:
            out[name] = f"{name}: no verdicts recorded"
            continue
        if corpus.version != judged:
            out[name] = f"{name}: verdicts judged on version {judged}, found {corpus.version}"
            continue
        result = prec.run_check(corpus)
        prec.judge(result, VERDICTS["verdicts"])
        out[name] = result
    return out


def _result(results: dict, name: str):
    r = results[name]
    if isinstance(r, str):
        pytest.skip(r)
    return r


def _where(f: dict) -> str:
    return f"{f['corpus']}:{f['file']}:{f['line']}: {f['code']}  {f['source']}"


@pytest.mark.parametrize("name", prec.CORPORA)
def test_no_internal_error(results, name):
    r = _result(results, name)
    assert not r.errors, r.errors[-3000:]
    assert r.files > 100 and r.lines > 50_000, (r.files, r.lines)


@pytest.mark.parametrize("name", prec.CORPORA)
def test_fixed_false_findings_stay_fixed(results, name):
    r = _result(results, name)
    back = prec.came_back(r)
    assert not back, "findings judged false came back:\n" + "\n".join(
        f"{_where(f)}\n    judged false: {v['reason']}" for f, v in back
    )


@pytest.mark.parametrize("name", prec.CORPORA)
def test_true_findings_still_fire(results, name):
    r = _result(results, name)
    lost = prec.lost_true(r)
    assert not lost, "findings judged true no longer fire:\n" + "\n".join(
        f"{_where(v)}\n    judged true: {v['reason']}" for v in lost
    )


def test_verdicts_are_well_formed():
    for v in VERDICTS["verdicts"]:
        assert v["verdict"] in prec.VERDICTS, v
        assert v["reason"].strip(), v
        assert v["corpus"] in prec.CORPORA, v
        assert not v.get("fixed") or v["verdict"] == "false", v
        assert isinstance(v["line"], int) and v["file"] and not v["file"].startswith("/"), v


def test_matching_survives_line_shifts():
    """A verdict names its finding by code, corpus, file and line text; the line is a hint."""
    corpus = prec.Corpus("keras", Path("/nonexistent"), "0", "test")
    findings = [
        {"code": "TFL101", "corpus": "keras", "file": "a.py", "line": 12, "source": "print(x)", "message": ""},
        {"code": "TFL101", "corpus": "keras", "file": "a.py", "line": 40, "source": "print(x)", "message": ""},
        {"code": "TFL102", "corpus": "keras", "file": "a.py", "line": 50, "source": "l.append(t)", "message": ""},
    ]
    verdicts = [
        {"code": "TFL101", "corpus": "keras", "file": "a.py", "line": 38, "source": "print(x)",
         "verdict": "true", "reason": "r"},
        {"code": "TFL101", "corpus": "keras", "file": "a.py", "line": 10, "source": "print(x)",
         "verdict": "false", "reason": "r", "fixed": True},
        {"code": "TFL105", "corpus": "keras", "file": "a.py", "line": 5, "source": "time.time()",
         "verdict": "true", "reason": "r"},
    ]
    r = prec.Result(corpus, 1, 100, 0.0, findings)
    prec.judge(r, verdicts)
    pairs = {(f["line"], v["line"]) for f, v in r.matched}
    assert pairs == {(40, 38), (12, 10)}
    assert [f["line"] for f in r.unjudged] == [50]
    assert [v["code"] for v in prec.lost_true(r)] == ["TFL105"]
    assert [f["line"] for f, _ in prec.came_back(r)] == [12]


def test_every_rule_that_fires_has_a_true_finding_or_a_note(results):
    """Issue target: a rule that still fires has a finding judged true, or ``notes`` in the
    verdicts file says why it is kept (rules with unjudged findings are still to be judged)."""
    available = [r for r in results.values() if not isinstance(r, str)]
    if not available:
        pytest.skip("no corpus available")
    missing = prec.rules_without_true(available, VERDICTS["notes"])
    assert not missing, f"rules firing with no true finding and no note in verdicts.json: {missing}"
