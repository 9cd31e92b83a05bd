"""Launch a real multi-worker ``tf.distribute`` job on loopback, each worker under ``tflint profile``.

Ports are chosen at run time (bound on 127.0.0.1 with port 0, then released); every worker gets
its own ``TF_CONFIG``; every subprocess runs under a timeout and the whole job is killed as soon
as one worker fails or the deadline passes. No address outside 127.0.0.1 is used.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "distributed"
TFLINT = [sys.executable, "-m", "tflint"]
LOOPBACK = "127.0.0.1"


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tf_config(ports: list[int], index: int, task_type: str = "worker") -> str:
    return json.dumps({
        "cluster": {"worker": [f"{LOOPBACK}:{p}" for p in ports]},
        "task": {"type": task_type, "index": index},
    })


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # keep every gRPC connection on loopback, away from any proxy
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "grpc_proxy"):
        env.pop(var, None)
    env["no_proxy"] = env["NO_PROXY"] = LOOPBACK
    return env


@dataclass
class WorkerRun:
    index: int
    returncode: int | None
    stdout: str
    stderr: str
    report: Path


def run_job(tmp: Path, script: Path, n: int = 2, env_per_worker: list[dict[str, str]] | None = None,
            script_args: list[str] | None = None, timeout: float = 150.0,
            tflint: list[str] | None = None) -> list[WorkerRun]:
    """Run ``n`` workers of ``script``, each as ``tflint profile --json``; return their runs."""
    ports = free_ports(n)
    procs: list[subprocess.Popen] = []
    outs = []
    reports = [tmp / f"worker{i}.json" for i in range(n)]
    try:
        for i in range(n):
            env = base_env()
            env["TF_CONFIG"] = tf_config(ports, i)
            env.update((env_per_worker or [{}] * n)[i])
            out = open(tmp / f"worker{i}.out", "w+")  # noqa: SIM115 - closed below
            err = open(tmp / f"worker{i}.err", "w+")  # noqa: SIM115
            outs.append((out, err))
            cmd = [*(tflint or TFLINT), "profile", str(script), "--json", str(reports[i]), "--no-live"]
            if script_args:
                cmd += ["--", *script_args]
            procs.append(subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=err,
                                          start_new_session=True))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            if any(c not in (None, 0) for c in codes):
                time.sleep(2.0)  # let the others finish their report, then stop them
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
    runs = []
    for i, (p, (out, err)) in enumerate(zip(procs, outs)):
        out.seek(0)
        err.seek(0)
        runs.append(WorkerRun(i, p.returncode, out.read(), err.read(), reports[i]))
        out.close()
        err.close()
    return runs
