"""The profile report: plain data, independent of how it is shown.

A ``Report`` is what one profiled run (or the merge of several workers' runs) produced. The
terminal, JSON, TensorBoard and merged views are renderers of this one object. It round-trips
through JSON (``to_json``/``from_json``, ``save``/``load``); the JSON shape is the documented,
stable ``tflint profile --json`` schema.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from tflint.atomic import write_atomic

SIGNAL_KINDS = ("retrace", "none-gradient", "soft-placement", "input-stall", "memory-growth",
                # training health
                "nan-inf", "dead-parameter", "exploding-gradient", "vanishing-gradient", "loss-stall",
                "loss-broadcast")
TRAINING_HEALTH_KINDS = SIGNAL_KINDS[5:]
#: Names that stand for several kinds in ``--signals``, ``--fail-on`` and ``watch(signals=...)``.
SIGNAL_GROUPS = {"all": SIGNAL_KINDS, "training-health": TRAINING_HEALTH_KINDS}


def expand_signal_names(names: Any) -> tuple[set[str], list[str]]:
    """Signal kinds and group names (a comma-separated string or an iterable) -> the kinds they
    stand for, and the names that are neither, in order."""
    if isinstance(names, str):
        names = names.split(",")
    kinds: set[str] = set()
    unknown: list[str] = []
    for name in (str(n).strip() for n in names):
        if name in SIGNAL_GROUPS:
            kinds.update(SIGNAL_GROUPS[name])
        elif name in SIGNAL_KINDS:
            kinds.add(name)
        elif name:
            unknown.append(name)
    return kinds, unknown
#: Kinds only a merged report (``tflint report merge``) has: they compare workers.
MERGED_SIGNAL_KINDS = ("straggler",)
SEVERITIES = ("error", "warning", "info")
SCHEMA_VERSION = 1


@dataclass
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Signal:
    kind: str  # one of SIGNAL_KINDS
    severity: str  # one of SEVERITIES
    message: str
    location: Location | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "location": asdict(self.location) if self.location else None,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Signal":
        loc = d.get("location")
        return cls(
            kind=d["kind"],
            severity=d["severity"],
            message=d["message"],
            location=Location(loc["file"], int(loc["line"])) if loc else None,
            details=dict(d.get("details") or {}),
        )


@dataclass
class Report:
    tflint_version: str
    script: str
    argv: list[str]
    exit_code: int | None
    duration_s: float
    steps: int
    signals: list[Signal] = field(default_factory=list)
    # Time series and summaries: step_time_s, input_wait_share, host_rss_bytes,
    # device_memory_bytes, retraces ..., plus per-signal status (which hooks ran, which were
    # unavailable and why) under "hooks".
    metrics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tflint_version": self.tflint_version,
            "script": self.script,
            "argv": list(self.argv),
            "exit_code": self.exit_code,
            "duration_s": self.duration_s,
            "steps": self.steps,
            "signals": [s.to_dict() for s in self.signals],
            "metrics": self.metrics,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, default=_json_default)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Report":
        return cls(
            tflint_version=str(d["tflint_version"]),
            script=str(d["script"]),
            argv=[str(a) for a in d.get("argv", [])],
            exit_code=d.get("exit_code"),
            duration_s=float(d.get("duration_s", 0.0)),
            steps=int(d.get("steps", 0)),
            signals=[Signal.from_dict(s) for s in d.get("signals", [])],
            metrics=dict(d.get("metrics") or {}),
        )

    @classmethod
    def from_json(cls, text: str) -> "Report":
        return cls.from_dict(json.loads(text))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a reader sees the old file or the whole new one, never a part."""
        write_atomic(os.fspath(path), self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Report":
        with open(path, encoding="utf-8") as fh:
            return cls.from_json(fh.read())

    def signals_of(self, kind: str) -> list[Signal]:
        return [s for s in self.signals if s.kind == kind]


def _json_default(obj: Any) -> Any:
    # numpy scalars and other number-likes
    for conv in (int, float):
        try:
            return conv(obj)
        except (TypeError, ValueError):
            continue
    return str(obj)
