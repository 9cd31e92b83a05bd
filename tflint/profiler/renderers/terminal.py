"""The end-of-run report on the terminal (stderr, so the script's stdout stays its own).

Layout: a header (script, exit status, duration, steps); one summary line per signal kind
(OK / how bad / not measured); a table per signal kind that fired, with counts, locations,
causes and suggested fixes; step time, input wait and memory over time as sparklines; and a
line for every hook that was unavailable or failed on this TensorFlow.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from typing import TYPE_CHECKING, Any, TextIO

from tflint.profiler.renderers import device_memory, metric_scalar, metric_series
from tflint.profiler.report import MERGED_SIGNAL_KINDS, SIGNAL_KINDS, TRAINING_HEALTH_KINDS

if TYPE_CHECKING:
    from tflint.profiler.report import Report, Signal

_BARS = "▁▂▃▄▅▆▇█"
_SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_TITLES = {
    "retrace": "Retraces",
    "none-gradient": "None gradients",
    "soft-placement": "Soft-placement fallbacks",
    "input-stall": "Input stalls",
    "memory-growth": "Memory growth",
    # training health
    "nan-inf": "Training health: NaN/Inf",
    "dead-parameter": "Training health: dead parameters",
    "exploding-gradient": "Training health: exploding gradients",
    "vanishing-gradient": "Training health: vanishing gradients",
    "loss-stall": "Training health: loss stall",
    "loss-broadcast": "Training health: loss broadcasting",
    "straggler": "Stragglers",
}
# details keys shown as the "cause" and "fix" columns, first match wins
_CAUSE_KEYS = ("cause", "causes")
_FIX_KEYS = ("fix", "suggestion", "suggested_fix", "fixes")
_COUNT_KEYS = ("count", "retraces", "occurrences", "calls", "ops")


def sparkline(values: list[float], width: int = 40) -> str:
    """Unicode block chart of ``values`` squeezed to ``width`` columns (bucket means)."""
    vals = [v for v in values if v == v]  # drop NaN
    if not vals:
        return ""
    if len(vals) > width:
        buckets: list[float] = []
        n = len(vals)
        for i in range(width):
            lo, hi = i * n // width, max((i + 1) * n // width, i * n // width + 1)
            chunk = vals[lo:hi]
            buckets.append(sum(chunk) / len(chunk))
        vals = buckets
    lo, hi = min(vals), max(vals)
    if hi - lo <= 1e-12 * max(abs(hi), 1.0):
        return _BARS[0] * len(vals)
    scale = (len(_BARS) - 1) / (hi - lo)
    return "".join(_BARS[int(round((v - lo) * scale))] for v in vals)


def fmt_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1.0:
        return f"{s * 1e3:.1f} ms"
    if s < 120:
        return f"{s:.1f} s"
    return f"{s / 60:.1f} min"


def fmt_bytes(n: float) -> str:
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} TiB"  # pragma: no cover


def _short_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith(".." + os.sep) else path


def _first(details: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = details.get(k)
        if v not in (None, "", [], {}):
            return v
    return None


def split_fix(message: str) -> tuple[str, str]:
    """``"What happens. Fix: do this."`` -> (what happens, do this)."""
    for marker in (" Fix: ", "\nFix: "):
        if marker in message:
            head, _, tail = message.partition(marker)
            return head.strip(), tail.strip()
    return message, ""


def headline(message: str, limit: int = 90) -> str:
    """The first sentence of a message, for one-line summaries: whole, or cut at a word with "…"."""
    text = split_fix(message)[0]
    cut = text.find(". ")
    first = text[: cut + 1] if cut >= 0 else text
    if len(first) <= limit:
        return first
    head = first[: limit - 1]
    if " " in head[limit // 2 :]:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:—(") + "…"


def _exception_line(text: Any) -> str:
    """An exception for the header: its first line (the traceback is printed once, above)."""
    if not text:
        return "an exception"
    lines = str(text).strip().splitlines()
    line = lines[0].rstrip() if lines else str(text)
    more = len(lines) > 1
    if len(line) > 100:
        line, more = line[:99].rstrip(), True
    return line + (" … (traceback above)" if more else "")


def _text(value: Any, limit: int = 6) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        items = [_text(v) for v in value[:limit]]
        more = len(value) - limit
        return "\n".join(items + ([f"(+{more} more)"] if more > 0 else []))
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return value["text"]
        return ", ".join(f"{k}: {_text(v)}" for k, v in list(value.items())[:limit])
    return str(value)


class TerminalRenderer:
    def __init__(self, file: TextIO | None = None, width: int | None = None) -> None:
        self.file = file
        self.width = width

    def _console(self) -> Any:
        from rich.console import Console

        file = self.file if self.file is not None else sys.stderr
        width = self.width
        if width is None and not _isatty(file):
            try:  # a log file or CI: wide enough for paths, or what COLUMNS says
                width = int(os.environ.get("COLUMNS", "")) or 120
            except ValueError:
                width = 120
        return Console(file=file, width=width, highlight=False, soft_wrap=False)

    def render(self, report: Report) -> None:
        console = self._console()
        for renderable in self.renderables(report):
            console.print(renderable)

    # ------------------------------------------------------------------------------------
    def renderables(self, report: Report) -> list[Any]:
        from rich.text import Text

        out: list[Any] = [Text(""), self._header(report)]
        out.append(self._summary(report))
        for kind in _kinds(report):
            signals = report.signals_of(kind)
            if signals:
                out.append(self._table(kind, signals))
        loops = self._loops(report)
        if loops is not None:
            out.append(loops)
        charts = self._charts(report)
        if charts is not None:
            out.append(charts)
        health = _training_health_charts(report)
        if health is not None:
            out.append(health)
        hooks = self._hook_lines(report)
        if hooks is not None:
            out.append(hooks)
        return out

    def _header(self, report: Report) -> Any:
        from rich.text import Text

        t = Text()
        t.append("tflint profile ", style="bold")
        t.append(_short_path(report.script), style="bold")
        if report.argv:
            t.append(" " + " ".join(report.argv))
        run = report.metrics.get("run") if isinstance(report.metrics.get("run"), dict) else {}
        outcome = run.get("outcome")
        code = report.exit_code
        if outcome == "interrupted":
            t.append(" · interrupted (partial report)", style="bold yellow")
        elif outcome == "exception":
            t.append(f" · raised {_exception_line(run.get('exception'))}", style="bold red")
        elif code not in (None, 0):
            t.append(f" · exit {code}", style="bold red")
        else:
            t.append(f" · exit {code if code is not None else '?'}")
        t.append(f" · {fmt_seconds(report.duration_s)} · {report.steps:,} steps")
        return t

    def _summary(self, report: Report) -> Any:
        from rich.table import Table
        from rich.text import Text

        hooks = report.metrics.get("hooks") if isinstance(report.metrics.get("hooks"), dict) else {}
        rows = []
        for kind in _kinds(report):
            signals = sorted(report.signals_of(kind), key=lambda s: _SEVERITY_RANK.get(s.severity, 3))
            hook = hooks.get(kind) if isinstance(hooks.get(kind), dict) else {}
            status = hook.get("status", "ok")
            if signals:
                worst = signals[0].severity
                n = len(signals)
                word = Text(f"✗ {n} {worst}" + ("s" if n > 1 and worst != "info" else ""),
                            style=_SEVERITY_STYLE.get(worst, ""))
                note = Text(headline(signals[0].message))
            elif status in ("unavailable", "failed"):
                word = Text("? not measured", style="dim")
                note = Text(f"hook {status}", style="dim")
            elif status == "off":
                word = Text("– off", style="dim")
                note = Text("not collected", style="dim")
            else:
                word = Text("✓ OK", style="green")
                note = Text("")
            rows.append((Text(kind, style="bold"), word, note))
        rows = _group_training_health(rows)
        table = Table.grid(padding=(0, 2), expand=False)
        table.add_column(no_wrap=True, min_width=max(len(r[0]) for r in rows))
        table.add_column(no_wrap=True, min_width=max(len(r[1]) for r in rows))
        table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        for row in rows:
            table.add_row(*row)
        return table

    def _table(self, kind: str, signals: list[Signal]) -> Any:
        from rich.table import Table
        from rich.text import Text

        signals = sorted(signals, key=lambda s: _SEVERITY_RANK.get(s.severity, 3))
        table = Table(title=_TITLES.get(kind, kind), title_justify="left", show_lines=True,
                      expand=False)
        table.add_column("Severity", no_wrap=True)
        table.add_column("Count", justify="right", no_wrap=True)
        table.add_column("Where and what", overflow="fold", ratio=3)
        table.add_column("Suggested fix", overflow="fold", ratio=2)
        for s in signals:
            details = s.details or {}
            count = _first(details, _COUNT_KEYS)
            what, fix_in_message = split_fix(s.message)
            loc = f"{_short_path(s.location.file)}:{s.location.line}" if s.location else "(no location)"
            problem = Text(loc + "\n", style="bold")
            problem.append(what, style="")
            cause = _first(details, _CAUSE_KEYS)
            extra = [line for line in _text(cause).splitlines() if line and line not in what]
            if extra:
                problem.append("\n" + "\n".join(extra), style="dim")
            fix = _first(details, _FIX_KEYS) or fix_in_message
            table.add_row(
                Text(s.severity, style=_SEVERITY_STYLE.get(s.severity, "")),
                _text(count) if isinstance(count, (int, float)) else "",
                problem,
                _text(fix),
            )
        return table

    def _loops(self, report: Report) -> Any:
        """One line per training loop when the run had several (steps add up to the header's)."""
        from rich.table import Table

        loops = report.metrics.get("loops")
        if not isinstance(loops, list) or len(loops) < 2:
            return None
        table = Table(title=f"Training loops ({report.steps:,} steps in all)", title_justify="left",
                      expand=False, show_edge=False, box=None, padding=(0, 2))
        for col in ("loop", "where", "steps", "median step", "input wait"):
            table.add_column(col, no_wrap=True, justify="right" if col in ("steps", "median step", "input wait") else "left")
        for lp in loops:
            if not isinstance(lp, dict):
                continue
            site = lp.get("site") if isinstance(lp.get("site"), dict) else None
            where = f"{_short_path(str(site['file']))}:{site['line']}" if site else "-"
            med = lp.get("median_step_time_s")
            share = lp.get("input_wait_share")
            opts = lp.get("optimizers") or []
            name = f"{lp.get('name')} ({lp.get('kind')}" + (f", {len(opts)} optimizers" if len(opts) > 1 else "") + ")"
            table.add_row(name, where, f"{int(lp.get('steps') or 0):,}",
                          fmt_seconds(float(med)) if isinstance(med, (int, float)) else "-",
                          f"{100 * share:.0f}%" if isinstance(share, (int, float)) else "-")
        return table

    def _charts(self, report: Report) -> Any:
        from rich.table import Table

        m = report.metrics
        rows: list[tuple[str, str, str]] = []
        steps = [y for _, y in metric_series(m.get("step_time_s"))]
        if steps:
            # the report's median (over every step), and a nearest-rank p90: with a handful of
            # steps an interpolated rank would put it below the median
            med = m.get("median_step_time_s")
            if not isinstance(med, (int, float)):
                med = statistics.median(steps)
            ranked = sorted(steps)
            p90 = max(ranked[max(0, math.ceil(0.9 * len(ranked)) - 1)], med)
            rows.append(("step time", sparkline(steps),
                         f"median {fmt_seconds(med)}, p90 {fmt_seconds(p90)}"))
        wait = m.get("input_wait_share")
        wait_series = [y for _, y in metric_series(wait)]
        overall = metric_scalar(wait)
        if wait_series or overall is not None:
            share = overall if overall is not None else statistics.median(wait_series)
            rows.append(("input wait", sparkline(wait_series), f"{100 * share:.0f}% of step time"))
        rss = [y for _, y in metric_series(m.get("host_rss_bytes"))]
        if rss:
            rows.append(("host memory", sparkline(rss),
                         f"{fmt_bytes(rss[0])} → {fmt_bytes(rss[-1])} (peak {fmt_bytes(max(rss))})"))
        for dev, entry in device_memory(m.get("device_memory_bytes")).items():
            vals = [y for _, y in entry["series"]]
            label = f"TF {dev} memory"
            if vals:
                peak = entry["peak"] if entry["peak"] is not None else max(vals)
                rows.append((label, sparkline(vals),
                             f"{fmt_bytes(vals[0])} → {fmt_bytes(vals[-1])} (peak {fmt_bytes(peak)})"))
            elif entry["current"] is not None:
                rows.append((label, "", f"{fmt_bytes(entry['current'])}"))
        if not rows:
            return None
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True, style="cyan")
        grid.add_column(overflow="fold")
        for row in rows:
            grid.add_row(*row)
        return grid

    def _hook_lines(self, report: Report) -> Any:
        from rich.text import Text

        hooks = report.metrics.get("hooks")
        if not isinstance(hooks, dict):
            return None
        t = Text()
        for kind, info in hooks.items():
            if not isinstance(info, dict) or info.get("status", "ok") in ("ok", "off"):
                continue
            if t:
                t.append("\n")
            t.append(f"! {kind} hook {info.get('status')}", style="yellow")
            if info.get("reason"):
                t.append(f": {info['reason']}")
        return t if t else None


def _kinds(report: Report) -> list[str]:
    """Every profile kind, and the merged-report kinds (stragglers) the report has."""
    return list(SIGNAL_KINDS) + [k for k in MERGED_SIGNAL_KINDS if report.signals_of(k)]


# ------------------------------------------------------------------------ training health
def _group_training_health(rows: list[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """Summary rows with a "Training health" heading before the training-health kinds."""
    from rich.text import Text

    out = []
    headed = False
    for row in rows:
        if not headed and row[0].plain in TRAINING_HEALTH_KINDS:
            out.append((Text("Training health", style="bold underline"), Text(""), Text("")))
            headed = True
        out.append(row)
    return out


def _training_health_charts(report: Report) -> Any:
    """Loss and global gradient norm over the run, as sparklines."""
    from rich.table import Table

    m = report.metrics
    rows = []

    def finite(series: Any) -> list[float]:
        return [y for _, y in metric_series(series) if y == y and abs(y) != float("inf")]

    def add(label: str, loss: list[float], norms: list[float]) -> None:
        if loss:
            rows.append((f"loss{label}", sparkline(loss), f"{loss[0]:.4g} → {loss[-1]:.4g}"))
        if norms:
            rows.append((f"gradient norm{label}", sparkline(norms),
                         f"{norms[0]:.3g} → {norms[-1]:.3g} (max {max(norms):.3g})"))

    # separate losses (a GAN's players) each get their own lines: the shared series interleave them
    separate = [e for e in m.get("losses") or [] if isinstance(e, dict)]
    for e in separate:
        loc = e.get("location") if isinstance(e.get("location"), dict) else {}
        label = f" ({os.path.basename(str(loc.get('file')))}:{loc.get('line')})" if loc else ""
        add(label, finite(e.get("loss")), finite(e.get("grad_norm")))
    if not separate:
        gn = m.get("grad_norm") if isinstance(m.get("grad_norm"), dict) else {}
        add("", finite(m.get("loss")), finite(gn.get("global")))
    if not rows:
        return None
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(no_wrap=True, style="cyan")
    grid.add_column(overflow="fold")
    for row in rows:
        grid.add_row(*row)
    return grid


def _isatty(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except Exception:
        return False
