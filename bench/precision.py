"""How often is `tflint check` right on real TensorFlow code?

    python bench/precision.py [--corpus NAME ...] [--verdicts PATH] [--tf-models DIR]
                              [--write-unjudged PATH] [--add-verdicts PATH] [--prune]
                              [--json PATH] [--tflint DIR]

Corpora (real TensorFlow code any machine can reach):

- ``tf_models``  — the ``tf-models-official`` 2.20.0 wheel (the Model Garden's training code),
  downloaded with ``pip download --no-deps`` into a cache directory and extracted when absent
  (``--tf-models DIR`` names an extracted copy instead; ``--cache-dir`` or
  ``$TFLINT_PRECISION_CACHE`` moves the cache, default ``~/.cache/tflint/precision``);
- ``tf_ecosystem`` — twelve pinned wheels of TensorFlow's ecosystem (TF-Agents, TF-GAN,
  TensorFlow Probability, Model Optimization, Privacy, Recommenders, Ranking, Similarity,
  Sonnet, KerasCV, KerasTuner, Addons: their examples, training loops and tests), downloaded
  and extracted into the same cache, one folder per distribution;
- ``keras``      — the installed ``keras/src`` tree;
- ``tensorflow`` — the installed ``tensorflow/python`` tree.

Each corpus is checked by a fresh ``python -m tflint check --no-cache --output-format json``
(every rule). The report prints, per corpus, findings per rule and per kLOC; with the verdicts
file (default ``tests/precision/verdicts.json``) also true / false / debatable per rule, the
findings judged false per 10 kLOC (target <= 1), the findings with no verdict yet (to be judged)
and the verdicts whose finding is gone.

A verdict names its finding by rule code, corpus, path relative to the corpus root and the
stripped text of the source line; the line number is only a hint (the nearest one wins when the
same text fires several times), so verdicts survive small line shifts. Verdicts: ``true`` (the
bug is real and matters), ``false`` (the finding is wrong), ``debatable`` (literally true but
harmless or deliberate), each with a one-line reason.

A false verdict whose finding no longer fires is kept, marked ``"fixed": true``, as a regression
guard: ``tests/precision/test_precision.py`` fails when such a finding comes back, and when a
finding judged true disappears. False findings that still fire are known, open false positives.

``--write-unjudged PATH`` writes the unjudged findings as verdict entries with an empty verdict;
fill them in and merge them with ``--add-verdicts PATH``. ``--prune`` updates the file after a
change: false verdicts whose finding is gone are marked fixed, debatable ones are dropped; it
refuses while a true finding is gone (fix the regression, or drop those verdicts with
``--accept-lost-true``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VERDICTS = ROOT / "tests" / "precision" / "verdicts.json"
TF_MODELS_VERSION = "2.20.0"
VERDICTS = ("true", "false", "debatable")
CORPORA = ("tf_models", "tf_ecosystem", "keras", "tensorflow")
# the tf_ecosystem corpus: pinned wheels of TensorFlow's ecosystem (pip arguments for the one
# that is not pure Python); ECOSYSTEM_VERSION names this set in the verdicts
ECOSYSTEM_VERSION = "2026.12"
_LINUX_311 = ("--platform", "manylinux2014_x86_64", "--python-version", "3.11")
ECOSYSTEM: list[tuple[str, tuple[str, ...]]] = [
    ("tf-agents==0.19.0", ()),
    ("tensorflow-gan==2.1.0", ()),
    ("tensorflow-probability==0.25.0", ()),
    ("tensorflow-model-optimization==0.8.1", ()),
    ("tensorflow-privacy==0.8.11", ()),
    ("tensorflow-recommenders==0.7.7", ()),
    ("tensorflow-ranking==0.5.5", ()),
    ("tensorflow-similarity==0.17.1", ()),
    ("dm-sonnet==2.0.2", ()),
    ("keras-cv==0.9.0", ()),
    ("keras-tuner==1.4.8", ()),
    ("tensorflow-addons==0.23.0", _LINUX_311),
]


class Unavailable(Exception):
    """A corpus that cannot be found or fetched on this machine (the message says why)."""


@dataclass
class Corpus:
    name: str
    root: Path
    version: str
    label: str


@dataclass
class Result:
    corpus: Corpus
    files: int
    lines: int
    seconds: float
    findings: list[dict]
    errors: str = ""
    # filled by judge()
    matched: list[tuple[dict, dict]] = field(default_factory=list)
    unjudged: list[dict] = field(default_factory=list)
    gone: list[dict] = field(default_factory=list)

    @property
    def kloc(self) -> float:
        return self.lines / 1000.0


# -- corpora ---------------------------------------------------------------------------------
def cache_dir(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("TFLINT_PRECISION_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tflint" / "precision"


def _package_dir(name: str) -> Path | None:
    """Where a top-level package is installed, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _dist_version(*names: str) -> str:
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def _download_wheels(base: Path, pins: list[tuple[str, tuple[str, ...]]], timeout: float) -> list[Path]:
    """The wheels of ``pins`` (``(requirement, extra pip arguments)``), downloaded with pip into
    ``base/wheels`` unless already there (one pip run per set of extra arguments); raises
    :class:`Unavailable` without network."""
    wheels = base / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)

    def stem(req: str) -> str:
        name, version = req.split("==")
        return f"{name.replace('-', '_')}-{version}-"

    missing: dict[tuple[str, ...], list[str]] = {}
    for req, extra in pins:
        if not any(wheels.glob(stem(req) + "*.whl")):
            missing.setdefault(extra, []).append(req)
    for extra, reqs in missing.items():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--retries", "1", "--timeout", "20", "--quiet",
               *extra, *reqs, "-d", str(wheels)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unavailable(f"pip download failed: {e}") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise Unavailable(f"pip download of {', '.join(reqs)} failed (no network?): {last}")
    out = []
    for req, _ in pins:
        found = sorted(wheels.glob(stem(req) + "*.whl"))
        if not found:
            raise Unavailable(f"pip download of {req} left no wheel in {wheels}")
        out.append(found[0])
    return out


def _extract(wheels: list[Path], root: Path, subdirs: bool) -> None:
    """Each wheel extracted into ``root`` (into ``root/<distribution>`` with ``subdirs``),
    atomically: a half-extracted corpus is never left at ``root``."""
    tmp = root.parent / f".extract-{os.getpid()}"
    for whl in wheels:
        dest = tmp / whl.name.split("-")[0] if subdirs else tmp
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(dest)
    try:
        tmp.rename(root)
    except OSError:  # another process extracted it first
        if not root.is_dir():
            raise


def tf_models_corpus(explicit: str | None = None, cache: str | None = None, download: bool = True,
                     timeout: float = 300) -> Corpus:
    """The extracted tf-models-official wheel: ``explicit`` if given, else the cache, else
    downloaded with pip (``download=False`` never touches the network)."""
    label = f"tf-models-official {TF_MODELS_VERSION}"
    if explicit:
        root = Path(explicit)
        if not (root / "official").is_dir():
            raise Unavailable(f"{root}: not an extracted tf-models-official wheel (no official/)")
        return Corpus("tf_models", root, TF_MODELS_VERSION, label)
    base = cache_dir(cache)
    root = base / f"tf_models_official-{TF_MODELS_VERSION}"
    if (root / "official").is_dir():
        return Corpus("tf_models", root, TF_MODELS_VERSION, label)
    if not download:
        raise Unavailable(f"not in the cache ({root}) and downloading is off")
    _extract(_download_wheels(base, [(f"tf-models-official=={TF_MODELS_VERSION}", ())], timeout), root, False)
    return Corpus("tf_models", root, TF_MODELS_VERSION, label)


def ecosystem_corpus(cache: str | None = None, download: bool = True, timeout: float = 300) -> Corpus:
    """TensorFlow's ecosystem: the wheels of :data:`ECOSYSTEM`, each extracted into a folder
    named after its distribution (agents, GANs, probability, model optimization, privacy,
    recommenders, ranking, similarity, Sonnet, KerasCV, KerasTuner, Addons: their examples,
    training loops and tests)."""
    label = f"TensorFlow ecosystem wheels ({len(ECOSYSTEM)} packages)"
    base = cache_dir(cache)
    root = base / f"tf_ecosystem-{ECOSYSTEM_VERSION}"
    if root.is_dir():
        return Corpus("tf_ecosystem", root, ECOSYSTEM_VERSION, label)
    if not download:
        raise Unavailable(f"not in the cache ({root}) and downloading is off")
    _extract(_download_wheels(base, ECOSYSTEM, timeout), root, True)
    return Corpus("tf_ecosystem", root, ECOSYSTEM_VERSION, label)


def installed_corpus(name: str) -> Corpus:
    if name == "keras":
        pkg, sub, dists = "keras", "src", ("keras",)
    elif name == "tensorflow":
        pkg, sub, dists = "tensorflow", "python", ("tensorflow", "tensorflow-cpu", "tensorflow-gpu")
    else:
        raise ValueError(name)
    base = _package_dir(pkg)
    if base is None or not (base / sub).is_dir():
        raise Unavailable(f"{pkg} is not installed (no {pkg}/{sub})")
    version = _dist_version(*dists)
    return Corpus(name, base / sub, version, f"installed {pkg}/{sub} ({dists[0]} {version})")


def get_corpus(name: str, tf_models: str | None = None, cache: str | None = None,
               download: bool = True) -> Corpus:
    if name == "tf_models":
        return tf_models_corpus(tf_models, cache, download)
    if name == "tf_ecosystem":
        return ecosystem_corpus(cache, download)
    return installed_corpus(name)


# -- running tflint ----------------------------------------------------------------------------
def _env(tflint_root: Path = ROOT) -> dict:
    env = dict(os.environ)
    env.pop("TFLINT_CACHE_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tflint_root), env.get("PYTHONPATH")) if p)
    return env


def run_check(corpus: Corpus, tflint_root: Path = ROOT) -> Result:
    """``tflint check`` of the checkout at ``tflint_root`` (default: this one) on ``corpus``."""
    env = _env(tflint_root)
    base = [sys.executable, "-m", "tflint", "check", "--no-cache", "--exit-zero"]
    root = str(corpus.root.resolve())
    cwd = str(tflint_root)  # ``python -m`` imports from the working directory first
    listed = subprocess.run([*base, "--show-files", root], capture_output=True, text=True, env=env, cwd=cwd)
    files = [os.path.join(cwd, f) for f in listed.stdout.splitlines() if f]
    lines = 0
    for f in files:
        try:
            with open(f, "rb") as fh:
                lines += fh.read().count(b"\n")
        except OSError:
            pass
    t = time.perf_counter()
    proc = subprocess.run(
        [*base, "--select", "ALL", "--output-format", "json", root],
        capture_output=True, text=True, env=env, cwd=cwd,
    )
    seconds = time.perf_counter() - t
    try:
        raw = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        raw = []
    errors = proc.stderr.strip() if proc.returncode != 0 or not proc.stdout else ""
    for f in raw:
        f["filename"] = os.path.join(cwd, f["filename"])
    findings = [_finding(corpus, f) for f in raw]
    findings.sort(key=lambda f: (f["file"], f["line"], f["code"]))
    return Result(corpus, len(files), lines, seconds, findings, errors)


_lines_cache: dict[str, list[str]] = {}


def _source_line(path: str, row: int) -> str:
    lines = _lines_cache.get(path)
    if lines is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            lines = []
        _lines_cache[path] = lines
    return lines[row - 1].strip() if 0 < row <= len(lines) else ""


def _finding(corpus: Corpus, f: dict) -> dict:
    path = f["filename"]
    row = (f.get("location") or {}).get("row") or 0
    try:
        rel = Path(path).resolve().relative_to(corpus.root.resolve()).as_posix()
    except ValueError:
        rel = path
    source = _source_line(path, row) if f.get("cell") is None else ""
    return {
        "code": f["code"], "corpus": corpus.name, "file": rel, "line": row,
        "source": source, "message": f.get("message", ""),
    }


# -- verdicts ----------------------------------------------------------------------------------
def key(entry: dict) -> tuple[str, str, str, str]:
    return (entry["code"], entry["corpus"], entry["file"], entry["source"])


def load_verdicts(path: Path = DEFAULT_VERDICTS) -> dict:
    if not path.exists():
        return {"corpora": {}, "notes": {}, "verdicts": []}
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    data.setdefault("notes", {})
    for v in data["verdicts"]:
        if v["verdict"] not in VERDICTS:
            raise ValueError(f"{path}: {v['corpus']}/{v['file']}:{v['line']}: verdict {v['verdict']!r}")
    return data


def save_verdicts(data: dict, path: Path = DEFAULT_VERDICTS) -> None:
    order = {c: i for i, c in enumerate(CORPORA)}
    vs = sorted(data["verdicts"], key=lambda v: (order.get(v["corpus"], 9), v["code"], v["file"], v["line"]))
    fields = ("code", "corpus", "file", "line", "source", "verdict", "reason", "fixed")
    body = ",\n".join(
        "  " + json.dumps({k: v[k] for k in fields if k in v and (k != "fixed" or v[k])}, ensure_ascii=False)
        for v in vs
    )
    notes = ",\n".join(
        f"  {json.dumps(code)}: {json.dumps(text, ensure_ascii=False)}"
        for code, text in sorted(data.get("notes", {}).items())
    )
    text = (
        "{\n"
        f' "corpora": {json.dumps(data["corpora"], sort_keys=True)},\n'
        f' "notes": {{\n{notes}\n }},\n'
        f' "verdicts": [\n{body}\n ]\n'
        "}\n"
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def judge(result: Result, verdicts: list[dict]) -> None:
    """Pair the corpus's findings with their verdicts (same key; nearest line first)."""
    mine = [v for v in verdicts if v["corpus"] == result.corpus.name]
    by_key: dict[tuple, list[dict]] = {}
    for f in result.findings:
        by_key.setdefault(key(f), []).append(f)
    vkeys: dict[tuple, list[dict]] = {}
    for v in mine:
        vkeys.setdefault(key(v), []).append(v)
    result.matched, result.unjudged, result.gone = [], [], []
    for k, fs in by_key.items():
        vs = vkeys.pop(k, [])
        pairs = sorted(
            ((abs(f["line"] - v["line"]), i, j) for i, f in enumerate(fs) for j, v in enumerate(vs)),
        )
        used_f: set[int] = set()
        used_v: set[int] = set()
        for _d, i, j in pairs:
            if i in used_f or j in used_v:
                continue
            used_f.add(i)
            used_v.add(j)
            result.matched.append((fs[i], vs[j]))
        result.unjudged.extend(f for i, f in enumerate(fs) if i not in used_f)
        result.gone.extend(v for j, v in enumerate(vs) if j not in used_v)
    for vs in vkeys.values():
        result.gone.extend(vs)
    result.unjudged.sort(key=lambda f: (f["code"], f["file"], f["line"]))
    result.gone.sort(key=lambda v: (v["code"], v["file"], v["line"]))


def came_back(result: Result) -> list[tuple[dict, dict]]:
    """Findings judged false and marked fixed that fire again."""
    return [(f, v) for f, v in result.matched if v["verdict"] == "false" and v.get("fixed")]


def lost_true(result: Result) -> list[dict]:
    """Verdicts ``true`` whose finding no longer fires."""
    return [v for v in result.gone if v["verdict"] == "true"]


def open_false(result: Result) -> list[tuple[dict, dict]]:
    return [(f, v) for f, v in result.matched if v["verdict"] == "false" and not v.get("fixed")]


def rules_without_true(results: list[Result], notes: dict[str, str]) -> list[str]:
    """Rules that fire, whose findings are all judged, none of them true, and that have no
    note saying why they are kept (a rule with unjudged findings is still to be judged)."""
    firing: dict[str, dict[str, int]] = {}
    for r in results:
        for code, row in table(r).items():
            agg = firing.setdefault(code, {"true": 0, "unjudged": 0})
            agg["true"] += row["true"]
            agg["unjudged"] += row["unjudged"]
    return sorted(c for c, row in firing.items() if not row["true"] and not row["unjudged"] and c not in notes)


def table(result: Result) -> dict[str, dict[str, int]]:
    rows: dict[str, dict[str, int]] = {}
    for f in result.findings:
        rows.setdefault(f["code"], {"findings": 0, "true": 0, "false": 0, "debatable": 0, "unjudged": 0})
        rows[f["code"]]["findings"] += 1
    for f, v in result.matched:
        rows[f["code"]][v["verdict"]] += 1
    for f in result.unjudged:
        rows[f["code"]]["unjudged"] += 1
    return dict(sorted(rows.items()))


def false_per_10kloc(result: Result) -> float:
    false = sum(1 for _f, v in result.matched if v["verdict"] == "false")
    return false / (result.lines / 10000.0) if result.lines else 0.0


# -- report ------------------------------------------------------------------------------------
def report(results: list[Result], judged: bool, out=sys.stdout, notes: dict | None = None) -> None:
    w = out.write
    notes = notes or {}
    for r in results:
        c = r.corpus
        n = len(r.findings)
        w(f"\n== {c.name}: {c.label}: {r.files} files, {r.kloc:.1f} kLOC, {n} findings "
          f"({n / r.kloc if r.kloc else 0:.2f} per kLOC), tflint check {r.seconds:.1f} s ==\n")
        if r.errors:
            w(f"   tflint reported errors:\n      {r.errors[-2000:]}\n")
        rows = table(r)
        if judged:
            w(f"   {'rule':8s} {'findings':>8s} {'per kLOC':>9s} {'true':>5s} {'false':>6s} {'debatable':>10s} {'unjudged':>9s}\n")
        else:
            w(f"   {'rule':8s} {'findings':>8s} {'per kLOC':>9s}\n")
        for code, row in rows.items():
            per = row["findings"] / r.kloc if r.kloc else 0
            line = f"   {code:8s} {row['findings']:8d} {per:9.3f}"
            if judged:
                line += f" {row['true']:5d} {row['false']:6d} {row['debatable']:10d} {row['unjudged']:9d}"
            w(line + "\n")
        if judged:
            fp = false_per_10kloc(r)
            fixed = sum(1 for v in r.gone if v["verdict"] == "false" and v.get("fixed"))
            w(f"   judged false: {fp:.2f} per 10 kLOC (target <= 1)   unjudged: {len(r.unjudged)}   "
              f"false and fixed: {fixed}   other verdicts with no finding: {len(r.gone) - fixed}\n")
    if not judged:
        return
    codes = sorted({f["code"] for r in results for f in r.findings})
    no_true = [c for c in codes if not any(table(r).get(c, {}).get("true") for r in results)]
    if no_true:
        w("\n== rules that fire with no finding judged true ==\n")
        for c in no_true:
            w(f"   {c}: {notes.get(c, '(no note: judge its findings or say why the rule is kept)')}\n")
    unjudged = [f for r in results for f in r.unjudged]
    if unjudged:
        w(f"\n== {len(unjudged)} findings with no verdict (to be judged) ==\n")
        for f in unjudged:
            w(f"{f['corpus']}:{f['file']}:{f['line']}: {f['code']} {f['message']}\n      {f['source']}\n")
    back = [p for r in results for p in came_back(r)]
    if back:
        w(f"\n== {len(back)} findings judged false and fixed came back ==\n")
        for f, v in back:
            w(f"{f['corpus']}:{f['file']}:{f['line']}: {f['code']} {f['message']}\n      {f['source']}\n"
              f"      judged false: {v['reason']}\n")
    gone = [v for r in results for v in r.gone if not (v["verdict"] == "false" and v.get("fixed"))]
    if gone:
        w(f"\n== {len(gone)} verdicts whose finding is gone (true ones are regressions) ==\n")
        for v in gone:
            w(f"{v['corpus']}:{v['file']}:{v['line']}: {v['code']} [{v['verdict']}] {v['reason']}\n"
              f"      {v['source']}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", choices=CORPORA, help="corpora to check (default: all)")
    ap.add_argument("--verdicts", default=str(DEFAULT_VERDICTS), help="verdicts file")
    ap.add_argument("--tf-models", help="an extracted tf-models-official wheel (instead of the cache)")
    ap.add_argument("--cache-dir", help="where the wheel is downloaded and extracted")
    ap.add_argument("--no-download", action="store_true", help="never download the wheel")
    ap.add_argument("--write-unjudged", metavar="PATH", help="write unjudged findings as verdict entries")
    ap.add_argument("--add-verdicts", metavar="PATH", help="merge filled-in verdict entries")
    ap.add_argument("--prune", action="store_true",
                    help="mark gone false findings fixed, drop gone debatable ones")
    ap.add_argument("--accept-lost-true", action="store_true", help="with --prune: drop gone true verdicts too")
    ap.add_argument("--json", metavar="PATH", help="write the findings and their verdicts as JSON")
    ap.add_argument("--tflint", metavar="DIR", default=str(ROOT),
                    help="the source checkout whose tflint runs (default: this one), to compare versions")
    args = ap.parse_args()

    vpath = Path(args.verdicts)
    data = load_verdicts(vpath)
    if args.add_verdicts:
        with open(args.add_verdicts, encoding="utf-8") as fh:
            new = [v for v in json.load(fh) if v.get("verdict")]
        bad = [v for v in new if v["verdict"] not in VERDICTS or not v.get("reason")]
        if bad:
            sys.exit(f"error: {len(bad)} entries lack a valid verdict or a reason, e.g. {bad[0]}")
        data["verdicts"].extend(new)
        save_verdicts(data, vpath)
        print(f"added {len(new)} verdicts to {vpath}")

    results: list[Result] = []
    for name in args.corpus or CORPORA:
        try:
            corpus = get_corpus(name, args.tf_models, args.cache_dir, not args.no_download)
        except Unavailable as e:
            print(f"== {name}: skipped: {e}")
            continue
        r = run_check(corpus, Path(args.tflint))
        judge(r, data["verdicts"])
        results.append(r)
        data["corpora"][corpus.name] = corpus.version
    judged = vpath.exists() or bool(args.add_verdicts)
    report(results, judged, notes=data.get("notes", {}))

    if args.write_unjudged:
        entries = [{**{k: f[k] for k in ("code", "corpus", "file", "line", "source")},
                    "message": f["message"], "verdict": "", "reason": ""}
                   for r in results for f in r.unjudged]
        with open(args.write_unjudged, "w", encoding="utf-8") as fh:
            json.dump(entries, fh, indent=1, ensure_ascii=False)
        print(f"\nwrote {len(entries)} unjudged findings to {args.write_unjudged}")
    if args.prune:
        lost = [v for r in results for v in lost_true(r)]
        if lost and not args.accept_lost_true:
            sys.exit(f"error: {len(lost)} findings judged true are gone; fix them or pass --accept-lost-true")
        gone = {id(v) for r in results for v in r.gone}
        kept, fixed = [], 0
        for v in data["verdicts"]:
            if id(v) in gone and v["verdict"] == "false":
                fixed += not v.get("fixed")
                v["fixed"] = True
            elif id(v) in gone:
                continue
            elif v.get("fixed") and v["verdict"] == "false":
                pass  # came back: stays marked, the test reports it
            kept.append(v)
        print(f"\nmarked {fixed} false verdicts fixed, dropped {len(data['verdicts']) - len(kept)} gone verdicts")
        data["verdicts"] = kept
        save_verdicts(data, vpath)
    elif args.add_verdicts and results:
        save_verdicts(data, vpath)  # records the corpus versions judged
    if args.json:
        payload = [
            {"corpus": r.corpus.name, "root": str(r.corpus.root), "version": r.corpus.version,
             "files": r.files, "lines": r.lines, "seconds": round(r.seconds, 2), "errors": r.errors,
             "findings": [{**f, "verdict": None} for f in r.unjudged]
             + [{**f, "verdict": v["verdict"], "reason": v["reason"]} for f, v in r.matched],
             "gone": r.gone}
            for r in results
        ]
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
