"""The check pipeline for one file, and for many.

Per file: bytes → text (:mod:`tflint.check.source`) → ``ast`` (:mod:`tflint.check.parse`) → one shared
:class:`tflint.analysis.Analysis` → every enabled rule → suppression comments → findings.
A file that cannot be read, decoded or parsed yields one ``TFL000`` finding. A file whose text
never mentions TensorFlow or Keras is parsed (so that ``TFL000`` is reported) but not analyzed.
A rule that raises is reported as an internal error naming the rule and the file; the other
rules' findings for that file are kept.

Many files are checked in a process pool; the result order is ``Finding.sort_key()`` whatever
the parallelism.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tflint.finding import Finding, Severity
from tflint.check.parse import ParseError, parse
from tflint.check.source import NotebookMap, SourceError, decode

PARSE_ERROR_CODE = "TFL000"
PARSE_ERROR_URL = "https://github.com/tflint/tflint/blob/main/docs/rules.md#tfl000-unparsable-file"

# A module that imports TensorFlow or Keras under any spelling (``tensorflow``, ``tf_keras``,
# ``keras``, ``from tensorflow import keras as K``) contains one of these substrings.
_TF_MARKERS = ("tensorflow", "keras")
# So does code that uses a conventional ``tf`` name handed in from elsewhere (``tf.function``),
# but not ``ietf.org`` or ``'utf.8'``.
_TF_NAME_RE = re.compile(r"(?<![\w.])tf\.")

# Below this many files to check, the pool costs more than it saves.
PARALLEL_MIN_FILES = 24


def may_use_tensorflow(text: str) -> bool:
    if any(m in text for m in _TF_MARKERS):
        return True
    return "tf." in text and _TF_NAME_RE.search(text) is not None


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # internal errors (rule crashes)
    cacheable: bool = True
    summary: dict | None = None  # the module's project summary, when asked for


def parse_error(path: str, reason: str, line: int = 1, col: int = 0, cell: int | None = None) -> Finding:
    return Finding(
        code=PARSE_ERROR_CODE,
        message=reason,
        path=path,
        line=max(line, 1),
        col=max(col, 0),
        end_line=max(line, 1),
        end_col=max(col, 0),
        severity=Severity.ERROR,
        cell=cell,
        url=PARSE_ERROR_URL,
    )


_rule_instances: dict[str, object] = {}


def _rules_for(enabled: frozenset[str], tensorflow: tuple[int, int]) -> list:
    from tflint.rules import all_rules

    out = []
    for cls in all_rules():
        if cls.code in enabled and cls.code != PARSE_ERROR_CODE and cls.applies_to(tensorflow):
            inst = _rule_instances.get(cls.code)
            if inst is None:
                inst = _rule_instances[cls.code] = cls()
            out.append(inst)
    return out


def _describe_exception(exc: BaseException) -> str:
    tb = exc.__traceback__
    where = ""
    while tb is not None:
        frame = tb.tb_frame
        where = f" (at {os.path.basename(frame.f_code.co_filename)}:{tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {exc}{where}"


def _to_char_col(line_text: str, col: int) -> int:
    """``ast`` columns are UTF-8 byte offsets; findings use character offsets."""
    return len(line_text.encode("utf-8")[:col].decode("utf-8", "ignore"))


def _normalise_columns(findings: list[Finding], text: str) -> list[Finding]:
    if text.isascii():
        return findings
    from dataclasses import replace

    from tflint.finding import Edit, Fix

    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")

    def char(line: int, col: int) -> int:
        if 1 <= line <= len(lines) and not lines[line - 1].isascii():
            return _to_char_col(lines[line - 1], col)
        return col

    out = []
    for f in findings:
        fix = f.fix
        if fix is not None:
            fix = Fix(
                fix.message,
                tuple(
                    Edit(e.line, char(e.line, e.col), e.end_line, char(e.end_line, e.end_col), e.content)
                    for e in fix.edits
                ),
                fix.applicability,
            )
        out.append(replace(f, col=char(f.line, f.col), end_col=char(f.end_line, f.end_col), fix=fix))
    return out


_LINE_REF_RE = re.compile(r"\b(lines?) (\d+)(?:-(\d+))?\b")


def _cell_lines_in_message(message: str, cell: int, nb: NotebookMap) -> str:
    """``line 21`` of the notebook's text, in a message, as the line of its cell."""

    def sub(m: re.Match) -> str:
        first = int(m.group(2))
        if not 1 <= first <= len(nb.lines):
            return m.group(0)
        c1, l1 = nb.locate(first)
        where = "" if c1 == cell else f"cell {c1} "
        if m.group(3) is None:
            return f"{where}line {l1}"
        c2, l2 = nb.locate(int(m.group(3)))
        if c2 != c1:
            return f"cell {c1} line {l1} to cell {c2} line {l2}"
        return f"{where}lines {l1}-{l2}"

    return _LINE_REF_RE.sub(sub, message)


def _locate_in_cells(findings: list[Finding], nb: NotebookMap) -> list[Finding]:
    from dataclasses import replace

    from tflint.finding import Edit, Fix

    out = []
    for f in findings:
        cell, line, col = nb.position(f.line, f.col)
        end_cell, end_line, end_col = nb.position(f.end_line, f.end_col)
        if end_cell != cell:  # clamp to the end of the cell
            end_line, end_col = line, col
        fix = f.fix
        if fix is not None:
            # Keep a fix only when it stays inside the finding's cell and off IPython lines;
            # its edits are then in cell coordinates too.
            edits = []
            for e in fix.edits:
                c1, l1 = nb.locate(e.line)
                c2, l2 = nb.locate(e.end_line)
                if c1 != cell or c2 != cell or e.line > len(nb.lines) or any(
                    ln in nb.replaced for ln in range(e.line, e.end_line + 1)
                ):
                    edits = None
                    break
                edits.append(Edit(l1, e.col, l2, e.end_col, e.content))
            fix = Fix(fix.message, tuple(edits), fix.applicability) if edits else None
        message = _cell_lines_in_message(f.message, cell, nb) if "line" in f.message else f.message
        out.append(replace(f, message=message, cell=cell, line=line, col=col, end_line=end_line,
                           end_col=end_col, fix=fix))
    return out


def _with_deep_stack(fn):
    """Call ``fn`` in a thread with a large stack and a high recursion limit; re-raise."""
    import sys
    import threading

    out: dict = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            out["error"] = exc

    old_limit = sys.getrecursionlimit()
    old_size = threading.stack_size()
    try:
        threading.stack_size(512 * 1024 * 1024)
        sys.setrecursionlimit(max(old_limit, 60_000))
        t = threading.Thread(target=target, name="tflint-deep")
        t.start()
        t.join()
    finally:
        threading.stack_size(old_size)
        sys.setrecursionlimit(old_limit)
    if "error" in out:
        raise out["error"]
    return out["value"]


def lint_text(
    path: str,
    text: str,
    enabled: frozenset[str],
    notebook: NotebookMap | None = None,
    rules: list | None = None,
    project: dict | None = None,
    summarise: bool = False,
    target=None,
) -> FileResult:
    """Check Python ``text`` (for notebooks: the concatenated code cells).

    ``rules``: the rule instances to run (default: the registered rules in ``enabled``).
    ``target``: the :class:`tflint.analysis.version.TargetVersion` the code targets (default:
    the newest supported); rules that do not apply to it are not run.
    ``project``: the functions of this module that traced code of other modules reaches
    (:meth:`tflint.analysis.project.ProjectIndex.facts_for`). ``summarise``: also return the
    module's project summary (computed from the module alone) in ``result.summary``.
    """
    result = FileResult(path)
    cell_errors: list[Finding] = []
    try:
        tree = parse(text, path)
    except ParseError as exc:
        tree = None
        if notebook is not None:
            # A cell that does not parse is reported on its own; the other cells are checked.
            from tflint.check.source import isolate_unparsable_cells

            text, bad = isolate_unparsable_cells(text, notebook)
            if bad:
                if PARSE_ERROR_CODE in enabled:
                    cell_errors = [parse_error(path, r, ln, c, cell) for cell, ln, c, r in bad]
                try:
                    tree = parse(text, path)
                except ParseError as again:
                    exc = again
        if tree is None:
            if summarise:
                result.summary = _summary_of(None, text)
            if PARSE_ERROR_CODE in enabled:
                cell = None
                line, col = exc.line, exc.col
                if notebook is not None:
                    cell, line, col = notebook.position(exc.line, exc.col)
                result.findings.append(parse_error(path, exc.reason, line, col, cell))
            return result
        result.findings.extend(cell_errors)
    if not enabled or not (project or may_use_tensorflow(text)):
        if summarise:
            result.summary = _summary_of(tree, text, None, path)
        return result
    if target is None:
        from tflint.analysis.version import DEFAULT as target
    if rules is None:
        rules = _rules_for(enabled, target.tensorflow)
    else:
        rules = [r for r in rules if r.code in enabled and r.applies_to(target.tensorflow)]
    if not rules:
        if summarise:
            result.summary = _summary_of(tree, text, None, path)
        return result
    from tflint.analysis import Analysis
    from tflint.rules.base import RuleContext

    def run_rules() -> tuple[list[Finding], list[str]]:
        """The rules' findings and failures; ``RecursionError`` propagates (deep code)."""
        found: list[Finding] = []
        failures: list[str] = []
        try:
            analysis = Analysis(tree, text, target, project)
        except RecursionError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported, never fatal to the run
            return found, [f"analysis failed on {path}: {_describe_exception(exc)}"]
        for rule in rules:
            ctx = RuleContext(path, text, tree, analysis)
            try:
                rule.run(ctx)
            except RecursionError:
                raise
            except Exception as exc:  # noqa: BLE001
                failures.append(f"rule {rule.code} ({rule.name}) failed on {path}: {_describe_exception(exc)}")
                continue
            found.extend(f for f in ctx.findings if f.code in enabled)
        if summarise:
            result.summary = _summary_of(tree, text, analysis, path)
        return found, failures

    try:
        findings, failures = run_rules()
    except RecursionError:
        # Deeply nested (but valid) code: analyze again with a deep stack.
        try:
            findings, failures = _with_deep_stack(run_rules)
        except (RecursionError, MemoryError):
            if PARSE_ERROR_CODE in enabled:
                result.findings.append(parse_error(path, "cannot analyze: code nested too deeply"))
            return result
    if failures:
        result.errors.extend(failures)
        result.cacheable = False
    if findings:
        from tflint.check import suppress

        findings = _normalise_columns(findings, text)
        findings = suppress.apply(findings, text)
        if notebook is not None:
            findings = _locate_in_cells(findings, notebook)
    result.findings = cell_errors + findings
    return result


def _summary_of(tree, text: str, analysis=None, path: str = "") -> dict:
    """The module's project summary (an empty one for a module that does not parse)."""
    from tflint.analysis.project import empty_summary, is_framework_module, summarise

    if tree is None:
        return empty_summary()
    follow = not (path and is_framework_module(path))
    try:
        if analysis is None:
            from tflint.analysis import Analysis

            analysis = Analysis(tree, text)
            traced = analysis.traced if follow and may_use_tensorflow(text) else None
            return summarise(analysis, traced, follow)
        return summarise(analysis, analysis.traced if follow else None, follow)
    except RecursionError:
        return empty_summary()


def lint_bytes(
    path: str,
    raw: bytes,
    enabled: frozenset[str],
    rules: list | None = None,
    project: dict | None = None,
    summarise: bool = False,
    target=None,
) -> FileResult:
    """Check a file's content ``raw`` as read from ``path`` (the options: see :func:`lint_text`)."""
    try:
        src = decode(path, raw)
    except SourceError as exc:
        result = FileResult(path)
        if summarise:
            result.summary = _summary_of(None, "")
        if PARSE_ERROR_CODE in enabled:
            result.findings.append(parse_error(path, exc.reason, exc.line, exc.col, exc.cell))
        return result
    return lint_text(path, src.text, enabled, src.notebook, rules, project, summarise, target)


# One unit of work: (display path, content, enabled codes[, project facts, summarise, TargetVersion]).
Task = tuple


def _lint_chunk(chunk: list[Task]) -> list[FileResult]:
    """Check each task with the cyclic garbage collector paused while one file is checked.

    A module's syntax tree and its analysis are hundreds of thousands of young objects; the
    collector would traverse them again and again while they are built (10-15% of a cold run's
    CPU). Paused per file, the collector runs once after it, and frees that file's cycles.
    """
    import gc

    results = []
    for path, raw, enabled, *more in chunk:
        project, summarise, target = (more + [None, False, None])[:3]
        paused = gc.isenabled()
        gc.disable()
        try:
            results.append(lint_bytes(path, raw, enabled, None, project, summarise, target))
        finally:
            if paused:
                gc.enable()
    return results


def _pool_context():
    import multiprocessing as mp
    import sys

    if sys.platform.startswith("linux"):
        return mp.get_context("fork")  # workers inherit the imported rules: no start-up cost
    return mp.get_context("spawn")


def default_jobs() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(n, 1)


def lint_many(tasks: list[Task], jobs: int | None = None) -> list[FileResult]:
    """Check every task, in a process pool when there are many; results in task order."""
    if jobs is None:
        jobs = default_jobs()
    if jobs <= 1 or len(tasks) < PARALLEL_MIN_FILES:
        return _lint_chunk(tasks)
    # Import what the workers need before they fork.
    from tflint.analysis import Analysis  # noqa: F401
    from tflint.rules import all_rules
    from tflint.rules.base import RuleContext  # noqa: F401

    all_rules()
    order = sorted(range(len(tasks)), key=lambda i: -len(tasks[i][1]))
    total = sum(len(t[1]) for t in tasks) or 1
    target = max(total // (jobs * 12), 1)  # about a dozen chunks per worker, biggest files first
    chunks: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in order:
        cur.append(i)
        size += len(tasks[i][1])
        if size >= target:
            chunks.append(cur)
            cur, size = [], 0
    if cur:
        chunks.append(cur)
    from concurrent.futures import ProcessPoolExecutor

    results: list[FileResult | None] = [None] * len(tasks)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_pool_context()) as pool:
            futures = [(c, pool.submit(_lint_chunk, [tasks[i] for i in c])) for c in chunks]
            for c, fut in futures:
                for i, r in zip(c, fut.result()):
                    results[i] = r
    except (OSError, RuntimeError, ImportError):
        # No process pool here (restricted sandbox, broken pool): check serially.
        return _lint_chunk(tasks)
    return results  # type: ignore[return-value]


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=Finding.sort_key)


# Counters of the last :func:`lint_project` run (``TFLINT_STATS=1`` prints them).
STATS: dict[str, int] = {"files": 0, "summarised": 0, "analysed": 0, "cached": 0}


def lint_project(
    files: list[tuple],
    cache=None,
    context: list[tuple[str, bytes]] = (),  # type: ignore[assignment]
    jobs: int | None = None,
) -> list[FileResult]:
    """Check ``files`` (display path, content, enabled codes[, target version]) as one project.

    Two passes. The summary pass reads every module whose summary is not cached (``files``
    and the ``context`` files, which are summarised only and never reported) and, for the
    checked files, lints each with its own facts on the way; then the summaries are joined
    into a :class:`~tflint.analysis.project.ProjectIndex`. A file's findings are keyed by its
    content, its enabled codes and the facts the project gives it; a file whose facts are not
    empty is checked again, given them, unless its findings are cached under that key.
    Results are in ``files`` order.
    """
    from tflint.analysis.project import ProjectIndex, is_framework_module, is_summary

    files = [(*f, None) if len(f) == 3 else tuple(f) for f in files]  # the target is optional
    if all(enabled <= {PARSE_ERROR_CODE} for _, _, enabled, _ in files):
        # no rule reads traced code: no project pass
        return lint_many([(d, r, e, None, False, t) for d, r, e, t in files], jobs)
    stats = STATS
    for k in stats:
        stats[k] = 0
    stats["files"] = len(files)
    summaries: dict[str, dict] = {}
    hashes: dict[str, str] = {}
    first: list[Task] = []
    checked = {disp for disp, _, _, _ in files}
    for disp, raw, enabled, target in (*files, *((d, r, frozenset(), None) for d, r in context if d not in checked)):
        if disp in hashes:
            continue
        h = hashes[disp] = content_hash(raw) + (":f" if is_framework_module(os.path.abspath(disp)) else "")
        got = cache.get_summary(h) if cache is not None else None
        if got is not None and is_summary(got):
            summaries[disp] = got
        else:
            first.append((disp, raw, enabled, None, True, target))
    local: dict[str, FileResult] = {}
    for res in lint_many(first, jobs):
        stats["summarised"] += 1
        if res.summary is not None:
            summaries[res.path] = res.summary
            if cache is not None:
                cache.put_summary(hashes[res.path], res.summary)
        if res.path in checked:
            local[res.path] = res
            stats["analysed"] += 1
    index = ProjectIndex([(os.path.abspath(d), d, s) for d, s in summaries.items()])

    out: dict[str, FileResult] = {}
    second: list[Task] = []
    keys: dict[str, str] = {}
    hits: set[str] = set()
    for disp, raw, enabled, target in files:
        facts = index.facts_for(os.path.abspath(disp))
        if cache is not None:
            from tflint.check.cache import file_key, project_key

            key = keys[disp] = project_key(file_key(disp, raw, enabled, target), facts)
            hit = cache.get(key, disp)
            if hit is not None:
                out[disp] = FileResult(disp, hit)
                hits.add(disp)
                stats["cached"] += 1
                continue
        res = local.get(disp)
        if res is not None and not facts:
            out[disp] = res
        else:
            second.append((disp, raw, enabled, facts, False, target))
    for res in lint_many(second, jobs):
        stats["analysed"] += 1
        out[res.path] = res
    if cache is not None:
        for disp, res in out.items():
            if res.cacheable and disp in keys and disp not in hits:
                cache.put(keys[disp], res.findings)
    return [out[disp] for disp, _, _, _ in files]


def content_hash(raw: bytes) -> str:
    import hashlib

    return hashlib.blake2b(raw, digest_size=20).hexdigest()
