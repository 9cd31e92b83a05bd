"""A small, real Language Server Protocol client: JSON-RPC 2.0 with ``Content-Length`` framing
over a server process's stdin/stdout. It answers the server's own requests (capability
registration) and collects notifications (diagnostics, messages) for the tests to wait on.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


class LspError(Exception):
    pass


class LspClient:
    def __init__(self, cmd: list[str], cwd: str | os.PathLike, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._next_id = 0
        self._pending: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self.notifications: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self.server_requests: list[dict[str, Any]] = []
        self.stderr_chunks: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # -- wire -------------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode("utf-8")
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode("ascii").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = out.read(int(headers["content-length"]))
            msg = json.loads(body)
            if "id" in msg and "method" in msg:  # a request from the server
                self.server_requests.append(msg)
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                q = self._pending.pop(msg["id"], None)
                if q is not None:
                    q.put(msg)
            else:
                with self._cond:
                    self.notifications.append(msg)
                    self._cond.notify_all()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read(4096), b""):
            self.stderr_chunks.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    # -- API --------------------------------------------------------------------------------
    def request(self, method: str, params: Any = None, timeout: float = 60) -> Any:
        with self._lock:
            self._next_id += 1
            rid = self._next_id
        q: queue.Queue = queue.Queue()
        self._pending[rid] = q
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            msg = q.get(timeout=timeout)
        except queue.Empty:
            raise LspError(f"no answer to {method} in {timeout}s; server stderr:\n{self.stderr[-3000:]}") from None
        if "error" in msg:
            raise LspError(f"{method}: {msg['error']}")
        return msg.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, predicate, timeout: float = 60, after: int = 0) -> dict[str, Any]:
        """The first notification (index >= ``after``) for which ``predicate`` holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for msg in self.notifications[after:]:
                    if predicate(msg):
                        return msg
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise LspError(
                        f"no matching notification in {timeout}s; got {json.dumps(self.notifications[after:])[:3000]}"
                        f"\nserver stderr:\n{self.stderr[-3000:]}"
                    )
                self._cond.wait(min(left, 0.5))

    def diagnostics(self, uri: str, timeout: float = 60, after: int = 0, version: int | None = None) -> list[dict]:
        def ok(msg: dict) -> bool:
            if msg.get("method") != "textDocument/publishDiagnostics" or msg["params"]["uri"] != uri:
                return False
            return version is None or msg["params"].get("version") == version

        return self.wait_for(ok, timeout, after)["params"]["diagnostics"]

    def mark(self) -> int:
        with self._cond:
            return len(self.notifications)

    def initialize(self, root: Path, capabilities: dict | None = None) -> dict:
        result = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": {
                    "textDocument": {"publishDiagnostics": {"versionSupport": True}, "hover": {}, "codeAction": {}},
                    "notebookDocument": {"synchronization": {}},
                    **(capabilities or {}),
                },
                "initializationOptions": {"debounce_ms": 50},
            },
        )
        self.notify("initialized", {})
        return result

    def close(self, timeout: float = 20) -> int:
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None, timeout=timeout)
                self.notify("exit", None)
            return self.proc.wait(timeout=timeout)
        except Exception:
            self.proc.kill()
            self.proc.wait(timeout=timeout)
            raise


def server_command(*extra: str) -> list[str]:
    return [sys.executable, *extra, "-m", "tflint", "server"]


def apply_edits(text: str, edits: list[dict]) -> str:
    """Apply LSP ``TextEdit``s (UTF-16 positions) to ``text``."""
    lines = text.split("\n")

    def offset(pos: dict) -> int:
        base = sum(len(ln) + 1 for ln in lines[: pos["line"]])
        line = lines[pos["line"]] if pos["line"] < len(lines) else ""
        units = 0
        for i, ch in enumerate(line):
            if units >= pos["character"]:
                return base + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return base + len(line)

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for s, t, new in spans:
        text = text[:s] + new + text[t:]
    return text
