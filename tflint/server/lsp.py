"""The Language Server Protocol face of tflint, on pygls.

Documents: Python text documents, and notebook documents (``notebookDocument/*`` sync) whose
Python code cells are checked together, in order, as `tflint check` checks an ``.ipynb``.
Diagnostics are published on open and save at once, and on change after a short quiet period
(:data:`DEBOUNCE_S`). All checking runs on one worker thread, off the protocol's event loop,
and a result is published only if the document has not changed since.

Code actions: a rule's fix (``quickfix``; unsafe fixes are titled so and never preferred),
``# noqa: CODE`` for the line, and "fix all" for the file (``source.fixAll.tflint``). Hover: the
rule's documentation over a finding or over a rule code in a comment.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer

from tflint import __version__
from tflint.finding import Edit, Finding, Severity
from tflint.server import core

DEBOUNCE_S = 0.3
SOURCE = "tflint"
FIX_ALL_KIND = "source.fixAll.tflint"
UNSAFE_FIX_KIND = "quickfix.tflint.unsafe"


def uri_to_path(uri: str, root: str | None = None) -> str:
    """A file system path for a ``file:`` URI; other schemes get a pseudo-path in ``root``."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        path = unquote(parsed.path)
        if os.name == "nt" and path.startswith("/") and len(path) > 2 and path[2] == ":":
            path = path[1:]
        return path
    # untitled:, vscode-notebook-cell: ... : checked as if in the workspace root
    name = os.path.basename(unquote(parsed.path)) or "untitled"
    return os.path.join(root or os.getcwd(), name)


@dataclass
class Doc:
    """What was last checked for one document (a text document or a notebook)."""

    version: int | None = None
    outcome: core.Outcome | None = None
    # for notebooks: the cell URIs, in order, of the code cells checked
    cell_uris: list[str] = field(default_factory=list)
    cell_texts: list[str] = field(default_factory=list)
    published: set[str] = field(default_factory=set)  # URIs that got diagnostics
    timer: asyncio.TimerHandle | None = None


class TflintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "tflint",
            __version__,
            text_document_sync_kind=t.TextDocumentSyncKind.Incremental,
            notebook_document_sync=t.NotebookDocumentSyncOptions(
                notebook_selector=[
                    t.NotebookDocumentFilterWithCells(notebook="*", cells=[t.NotebookCellLanguage(language="python")])
                ],
                save=True,
            ),
        )
        self.cache = core.ConfigCache()
        self.docs: dict[str, Doc] = {}  # by document URI (notebooks: the notebook URI)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tflint-check")
        self.debounce_s = DEBOUNCE_S
        self._shown_errors: set[str] = set()

    # -- what a document is -------------------------------------------------------------
    def notebook_of(self, uri: str) -> t.NotebookDocument | None:
        return self.workspace.get_notebook_document(cell_uri=uri)

    def _code_cells(self, nb: t.NotebookDocument) -> tuple[list[str], list[str]]:
        uris, texts = [], []
        for cell in nb.cells:
            if cell.kind != t.NotebookCellKind.Code:
                continue
            doc = self.workspace.get_text_document(cell.document)
            if doc.language_id not in (None, "", "python"):
                continue
            uris.append(cell.document)
            texts.append(doc.source)
        return uris, texts

    # -- checking -----------------------------------------------------------------------
    def _snapshot(self, key: str, notebook: bool) -> tuple[int | None, str | list[str], list[str]] | None:
        """(version, content, URIs of what is checked) of an open document; None once closed."""
        if notebook:
            nb = self.workspace.get_notebook_document(notebook_uri=key)
            if nb is None:
                return None
            uris, texts = self._code_cells(nb)
            return nb.version, texts, uris
        if unquote(key) not in self.workspace.text_documents:
            return None
        doc = self.workspace.get_text_document(key)
        if doc.language_id not in (None, "", "python"):
            return None  # e.g. a notebook's JSON opened as text: only Python is checked
        return doc.version, doc.source, [key]

    def _compute(self, key: str, notebook: bool, content: str | list[str]) -> core.Outcome:
        path = uri_to_path(key, self.cache.root)
        try:
            if notebook:
                return core.lint_notebook(self.cache, path, list(content))
            return core.lint_python(self.cache, path, str(content))
        except Exception as exc:  # noqa: BLE001 - a crash is reported, never fatal
            return core.Outcome(errors=[f"tflint failed on {path}: {type(exc).__name__}: {exc}"])

    async def check(self, key: str, notebook: bool) -> Doc | None:
        """Check document ``key`` now and publish; return what was checked."""
        snap = self._snapshot(key, notebook)
        if snap is None:
            return None
        version, content, uris = snap
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(self.executor, self._compute, key, notebook, content)
        now = self._snapshot(key, notebook)
        if now is None or now[0] != version:
            return None  # closed, or changed meanwhile (a newer check is scheduled)
        doc = self.docs.setdefault(key, Doc())
        doc.version, doc.outcome = version, outcome
        doc.cell_uris = uris
        doc.cell_texts = list(content) if notebook else [str(content)]
        self._report_problems(outcome)
        self._publish(key, doc, notebook)
        return doc

    async def current(self, key: str, notebook: bool) -> Doc | None:
        """The check results for the document as it is now (checking it if needed)."""
        snap = self._snapshot(key, notebook)
        if snap is None:
            return None
        doc = self.docs.get(key)
        if doc is not None and doc.outcome is not None and doc.version == snap[0]:
            return doc
        return await self.check(key, notebook)

    def schedule(self, key: str, notebook: bool, delay: float | None = None) -> None:
        doc = self.docs.setdefault(key, Doc())
        if doc.timer is not None:
            doc.timer.cancel()
        loop = asyncio.get_running_loop()
        delay = self.debounce_s if delay is None else delay

        def fire() -> None:
            doc.timer = None
            loop.create_task(self.check(key, notebook))

        doc.timer = loop.call_later(delay, fire)

    def forget(self, key: str) -> None:
        doc = self.docs.pop(key, None)
        if doc is None:
            return
        if doc.timer is not None:
            doc.timer.cancel()
        for uri in doc.published:
            self.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def _report_problems(self, outcome: core.Outcome) -> None:
        for msg in ([outcome.config_error] if outcome.config_error else []) + outcome.errors:
            if msg in self._shown_errors:
                continue
            self._shown_errors.add(msg)
            kind = t.MessageType.Error
            self.window_show_message(t.ShowMessageParams(type=kind, message=f"tflint: {msg}"))

    # -- positions ------------------------------------------------------------------------
    def _units(self, text: str) -> int:
        return self.workspace.position_codec.client_num_units(text)

    @staticmethod
    def _lines(text: str) -> list[str]:
        return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")

    def to_position(self, lines: list[str], line: int, col: int) -> t.Position:
        """An LSP position for a 1-based line and 0-based character column."""
        i = max(line - 1, 0)
        if i >= len(lines):
            return t.Position(line=i, character=0)
        text = lines[i]
        return t.Position(line=i, character=self._units(text[: max(col, 0)]))

    def to_range(self, lines: list[str], line: int, col: int, end_line: int, end_col: int) -> t.Range:
        return t.Range(start=self.to_position(lines, line, col), end=self.to_position(lines, end_line, end_col))

    def from_position(self, lines: list[str], pos: t.Position) -> tuple[int, int]:
        """A 1-based line and 0-based character column for an LSP position."""
        if pos.line >= len(lines):
            return pos.line + 1, 0
        text = lines[pos.line]
        units = 0
        for i, ch in enumerate(text):
            if units >= pos.character:
                return pos.line + 1, i
            units += self._units(ch)
        return pos.line + 1, len(text)

    # -- diagnostics ------------------------------------------------------------------------
    def diagnostic(self, lines: list[str], f: Finding) -> t.Diagnostic:
        url = core.rule_url(f)
        sev = t.DiagnosticSeverity.Error if f.severity == Severity.ERROR else t.DiagnosticSeverity.Warning
        return t.Diagnostic(
            range=self.to_range(lines, f.line, f.col, f.end_line, f.end_col),
            message=f.message,
            severity=sev,
            code=f.code,
            code_description=t.CodeDescription(href=url) if url else None,
            source=SOURCE,
        )

    def findings_by_uri(self, doc: Doc) -> dict[str, list[Finding]]:
        out: dict[str, list[Finding]] = {uri: [] for uri in doc.cell_uris}
        if doc.outcome is None:
            return out
        for f in doc.outcome.findings:
            idx = (f.cell or 1) - 1
            if 0 <= idx < len(doc.cell_uris):
                out[doc.cell_uris[idx]].append(f)
        return out

    def _publish(self, key: str, doc: Doc, notebook: bool) -> None:
        by_uri = self.findings_by_uri(doc)
        for uri in doc.published - set(by_uri):  # cells that went away
            self.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        for uri, text in zip(doc.cell_uris, doc.cell_texts):
            lines = self._lines(text)
            diags = [self.diagnostic(lines, f) for f in by_uri.get(uri, [])]
            version = None if notebook else doc.version
            self.text_document_publish_diagnostics(
                t.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version)
            )
        doc.published = set(by_uri)

    # -- requests on one text document (a file or a notebook cell) --------------------------
    async def findings_for_uri(self, uri: str) -> tuple[Doc | None, str, list[Finding], str | None]:
        """(checked doc, the text of ``uri``, its findings, the notebook URI or None)."""
        nb = self.notebook_of(uri)
        key, notebook = (nb.uri, True) if nb is not None else (uri, False)
        doc = await self.current(key, notebook)
        if doc is None:
            return None, "", [], None
        by_uri = self.findings_by_uri(doc)
        try:
            text = doc.cell_texts[doc.cell_uris.index(uri)]
        except ValueError:
            return doc, "", [], key if notebook else None
        return doc, text, by_uri.get(uri, []), key if notebook else None

    def text_edits(self, lines: list[str], edits: tuple[Edit, ...] | list[Edit]) -> list[t.TextEdit]:
        return [
            t.TextEdit(range=self.to_range(lines, e.line, e.col, e.end_line, e.end_col), new_text=e.content)
            for e in edits
        ]

    def whole_text_edit(self, old: str, new: str) -> t.TextEdit:
        lines = self._lines(old)
        end = t.Position(line=len(lines) - 1, character=self._units(lines[-1]))
        return t.TextEdit(range=t.Range(start=t.Position(line=0, character=0), end=end), new_text=new)


def _overlaps(f: Finding, start: tuple[int, int], end: tuple[int, int]) -> bool:
    return (f.line, f.col) <= end and start <= (f.end_line, f.end_col)


def _wanted(only: list[str] | None, kind: str) -> bool:
    if not only:
        return kind.startswith("quickfix")  # source actions only when asked for
    return any(kind == k or kind.startswith(k + ".") for k in only)


def build_server() -> TflintServer:
    ls = TflintServer()

    @ls.feature(t.INITIALIZE)
    def initialize(params: t.InitializeParams) -> None:
        root = None
        if params.workspace_folders:
            root = uri_to_path(params.workspace_folders[0].uri)
        elif params.root_uri:
            root = uri_to_path(params.root_uri)
        elif params.root_path:
            root = params.root_path
        if root and os.path.isdir(root):
            ls.cache = core.ConfigCache(root)
        opts = params.initialization_options
        if isinstance(opts, dict) and isinstance(opts.get("debounce_ms"), (int, float)):
            ls.debounce_s = max(float(opts["debounce_ms"]), 0.0) / 1000.0

    @ls.feature(t.INITIALIZED)
    async def initialized(params: t.InitializedParams) -> None:
        caps = ls.client_capabilities
        ws = caps.workspace
        dyn = ws is not None and ws.did_change_watched_files is not None and bool(
            ws.did_change_watched_files.dynamic_registration
        )
        if not dyn:
            return  # configuration changes are still seen by modification time
        watchers = [t.FileSystemWatcher(glob_pattern=f"**/{name}") for name in ("pyproject.toml", "tflint.toml")]
        try:
            await ls.client_register_capability_async(
                t.RegistrationParams(
                    registrations=[
                        t.Registration(
                            id="tflint-config-watch",
                            method=t.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=t.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
                        )
                    ]
                )
            )
        except Exception:  # noqa: BLE001 - the client declined: modification times still work
            pass

    @ls.feature(t.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: t.DidChangeWatchedFilesParams) -> None:
        names = {os.path.basename(uri_to_path(c.uri)) for c in params.changes}
        if names & {"pyproject.toml", "tflint.toml"}:
            ls.cache.invalidate()
            ls._shown_errors.clear()
            for key in list(ls.docs):
                ls.schedule(key, ls.workspace.get_notebook_document(notebook_uri=key) is not None, 0.0)

    # text documents
    @ls.feature(t.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: t.DidOpenTextDocumentParams) -> None:
        if ls.notebook_of(params.text_document.uri) is None:
            await ls.check(params.text_document.uri, False)

    @ls.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: t.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        nb = ls.notebook_of(uri)
        ls.schedule(nb.uri if nb is not None else uri, nb is not None)

    @ls.feature(t.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: t.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.notebook_of(uri) is None:
            await ls.check(uri, False)

    @ls.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: t.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    # notebook documents
    @ls.feature(t.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def nb_open(params: t.DidOpenNotebookDocumentParams) -> None:
        await ls.check(params.notebook_document.uri, True)

    @ls.feature(t.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def nb_change(params: t.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, True)

    @ls.feature(t.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def nb_save(params: t.DidSaveNotebookDocumentParams) -> None:
        await ls.check(params.notebook_document.uri, True)

    @ls.feature(t.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def nb_close(params: t.DidCloseNotebookDocumentParams) -> None:
        ls.forget(params.notebook_document.uri)

    # code actions
    @ls.feature(
        t.TEXT_DOCUMENT_CODE_ACTION,
        t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix, UNSAFE_FIX_KIND, FIX_ALL_KIND]),
    )
    async def code_action(params: t.CodeActionParams) -> list[t.CodeAction] | None:
        uri = params.text_document.uri
        doc, text, findings, nb_key = await ls.findings_for_uri(uri)
        if doc is None:
            return None
        lines = ls._lines(text)
        start = ls.from_position(lines, params.range.start)
        end = ls.from_position(lines, params.range.end)
        only = [str(k.value if hasattr(k, "value") else k) for k in (params.context.only or [])] or None
        actions: list[t.CodeAction] = []
        for f in findings:
            if not _overlaps(f, start, end):
                continue
            diag = ls.diagnostic(lines, f)
            if f.fix is not None and f.fix.edits:
                safe = f.fix.applicability == "safe"
                kind = t.CodeActionKind.QuickFix.value if safe else UNSAFE_FIX_KIND
                if _wanted(only, kind):
                    title = f"{f.code}: {f.fix.message}" + ("" if safe else " (unsafe)")
                    actions.append(
                        t.CodeAction(
                            title=title,
                            kind=kind,
                            diagnostics=[diag],
                            is_preferred=safe,
                            edit=t.WorkspaceEdit(changes={uri: ls.text_edits(lines, f.fix.edits)}),
                        )
                    )
            if f.code != "TFL000" and _wanted(only, t.CodeActionKind.QuickFix.value):
                e = core.noqa_edit(text, f)
                if e is not None:
                    actions.append(
                        t.CodeAction(
                            title=f"Disable {f.code} for this line (# noqa: {f.code})",
                            kind=t.CodeActionKind.QuickFix,
                            diagnostics=[diag],
                            edit=t.WorkspaceEdit(changes={uri: ls.text_edits(lines, [e])}),
                        )
                    )
        all_findings = doc.outcome.findings if doc.outcome else []
        fixable = any(f.fix is not None and f.fix.applicability == "safe" for f in all_findings)
        if fixable and (_wanted(only, FIX_ALL_KIND) or (only is None and any(f.fix for f in findings))):
            edit = await fix_all_edit(doc, nb_key, uri)
            if edit is not None:
                actions.append(t.CodeAction(title="Fix all tflint safe fixes", kind=FIX_ALL_KIND, edit=edit))
        return actions

    async def fix_all_edit(doc: Doc, nb_key: str | None, uri: str) -> t.WorkspaceEdit | None:
        loop = asyncio.get_running_loop()
        if nb_key is None:
            text = doc.cell_texts[0]
            new = await loop.run_in_executor(ls.executor, core.fix_all_python, ls.cache, uri_to_path(uri, ls.cache.root), text)
            if new is None:
                return None
            return t.WorkspaceEdit(changes={uri: [ls.whole_text_edit(text, new)]})
        new_cells = await loop.run_in_executor(
            ls.executor, core.fix_all_notebook, ls.cache, uri_to_path(nb_key, ls.cache.root), list(doc.cell_texts)
        )
        if new_cells is None:
            return None
        changes = {
            cell_uri: [ls.whole_text_edit(old, new)]
            for cell_uri, old, new in zip(doc.cell_uris, doc.cell_texts, new_cells)
            if old != new
        }
        return t.WorkspaceEdit(changes=changes) if changes else None

    # hover
    @ls.feature(t.TEXT_DOCUMENT_HOVER)
    async def hover(params: t.HoverParams) -> t.Hover | None:
        doc, text, findings, _ = await ls.findings_for_uri(params.text_document.uri)
        if doc is None:
            return None
        lines = ls._lines(text)
        line, col = ls.from_position(lines, params.position)
        line_text = lines[line - 1] if 1 <= line <= len(lines) else ""
        code = core.code_in_comment(line_text, col)
        if code is not None:
            md = core.rule_markdown(code)
            if md:
                return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=md))
        for f in findings:
            if _overlaps(f, (line, col), (line, col)):
                md = core.rule_markdown(f.code, f)
                if md:
                    return t.Hover(
                        contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=md),
                        range=ls.to_range(lines, f.line, f.col, f.end_line, f.end_col),
                    )
        return None

    return ls
