"""The distributed part of a report on the terminal: one row per worker, the stragglers, and
which worker saw which finding.

Shown after the single-report view (:class:`~.terminal.TerminalRenderer`) for merged reports
(``metrics["workers"]``) and for one worker's report tagged with ``metrics["worker"]``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from tflint.profiler.report import Report


def _fmt_s(v: Any, unit: bool = True) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    text = f"{v * 1000:.1f} ms" if v < 10 else f"{v:.1f} s"
    return text if unit or v >= 10 else text[:-3]


def _fmt_share(v: Any) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    return f"{100 * v:.0f}%"


def _role(row: dict[str, Any]) -> str:
    strategy = str(row.get("strategy") or "-").replace("Strategy", "")
    n = row.get("num_replicas")
    return f"{strategy} ×{n}" if n else strategy


def _batch(row: dict[str, Any]) -> str:
    g, p = row.get("global_batch_size"), row.get("per_replica_batch_size")
    if g is None and p is None:
        return "-"
    return f"{g if g is not None else '?'}/{p if p is not None else '?'}"


def worker_rows(report: Report) -> dict[str, dict[str, Any]]:
    """``metrics["workers"]`` of a merged report, or the one worker of a tagged report."""
    workers = report.metrics.get("workers")
    if isinstance(workers, dict) and workers:
        return {str(k): v for k, v in workers.items() if isinstance(v, dict)}
    tag = report.metrics.get("worker")
    if isinstance(tag, dict):
        from tflint.profiler.merge import worker_row

        return {str(tag.get("id") or "local"): worker_row(report)}
    return {}


class WorkersRenderer:
    def __init__(self, file: TextIO | None = None, width: int | None = None) -> None:
        self.file = file
        self.width = width

    def render(self, report: Report) -> None:
        from rich.console import Console

        file = self.file if self.file is not None else sys.stderr
        width = self.width
        if width is None and not _isatty(file):
            try:  # a log file or CI: what COLUMNS says, else wide enough for the table
                width = int(os.environ.get("COLUMNS", "")) or 120
            except ValueError:
                width = 120
        console = Console(file=file, width=width, highlight=False, soft_wrap=False)
        for r in self.renderables(report):
            console.print(r)

    def renderables(self, report: Report) -> list[Any]:
        from rich.table import Table
        from rich.text import Text

        rows = worker_rows(report)
        if not rows:
            return []
        stragglers = report.metrics.get("stragglers")
        stragglers = [s for s in stragglers if isinstance(s, dict)] if isinstance(stragglers, list) else []
        slow = {s.get("worker"): s for s in stragglers}
        from rich import box

        table = Table(title="Workers (✗ straggler)" if slow else "Workers", title_justify="left",
                      expand=False, box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False)
        for col in ("Worker", "Strategy", "Batch g/r", "Steps", "Step med/p90", "Input wait",
                    "Compute/peers", "Findings", "Exit"):
            table.add_column(col, justify="left" if col in ("Worker", "Strategy") else "right",
                             no_wrap=True)
        for wid, row in rows.items():
            step = row.get("step_time_s") if isinstance(row.get("step_time_s"), dict) else {}
            split = row.get("split") if isinstance(row.get("split"), dict) else {}
            straggler = slow.get(wid)
            code = row.get("exit_code")
            table.add_row(
                Text(f"✗ {wid}" if straggler else wid, style="bold red" if straggler else "bold"),
                _role(row), _batch(row), str(row.get("steps", "-")),
                f"{_fmt_s(step.get('median'), unit=False)}/{_fmt_s(step.get('p90'))}",
                Text(_fmt_share(row.get("input_wait_share")),
                     style="red" if (straggler or {}).get("cause") == "input-wait" else ""),
                Text(f"{_fmt_share(split.get('compute_share'))}/{_fmt_share(split.get('peer_wait_share'))}",
                     style="red" if (straggler or {}).get("cause") == "compute" else ""),
                str(row.get("signals", "-")),
                Text(str(code) if code is not None else "-", style="" if code in (None, 0) else "red"),
            )
        out: list[Any] = [table]
        if len(rows) > 1:
            if stragglers:
                t = Text()
                for i, s in enumerate(stragglers):
                    if i:
                        t.append("\n")
                    t.append("✗ ", style="bold red")
                    t.append(str(s.get("message", "")) + ".")
                for wid, row in rows.items():
                    waiting = row.get("waiting_for") if isinstance(row.get("waiting_for"), dict) else None
                    if waiting:
                        t.append(f"\n  {wid}: its waiting for peers ({_fmt_share(waiting.get('peer_wait_share'))} of its "
                                 f"step time) is caused by {waiting.get('worker')} ({waiting.get('cause')}), "
                                 "not by its own input or compute")
                out.append(t)
            else:
                out.append(Text("✓ no straggler: the workers' step times and input waits are "
                                "within 1.5× of each other", style="green"))
        seen = [s for s in report.signals if isinstance(s.details, dict) and s.details.get("workers")]
        if seen and len(rows) > 1:
            ft = Table(title="Findings by worker", title_justify="left", expand=False)
            ft.add_column("Kind", no_wrap=True)
            ft.add_column("Location", no_wrap=True)
            ft.add_column("Finding", overflow="fold", ratio=3)
            ft.add_column("Seen on", overflow="fold")
            for s in seen:
                workers = s.details["workers"]
                on = "all workers" if len(workers) == len(rows) and len(rows) > 1 else ", ".join(map(str, workers))
                loc = f"{os.path.basename(s.location.file)}:{s.location.line}" if s.location else "-"
                ft.add_row(s.kind, loc, s.message, on)
            out.append(ft)
        return out


def _isatty(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except Exception:  # noqa: BLE001
        return False
