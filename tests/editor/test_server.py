"""`tflint server` driven end to end over stdio by a real LSP client (tests/editor/lsp_client.py)."""

from __future__ import annotations

import os
import time

import pytest

from tests.editor.lsp_client import LspClient, apply_edits, server_command

pytestmark = pytest.mark.timeout(180)

BUGGY = 'import tensorflow as tf\n\n\n@tf.function\ndef step(x):\n    print("x", x)\n    return x * 2\n'
PRINT_LINE = 5  # 0-based line of the print call


def _client(tmp_path, *extra: str) -> LspClient:
    env = {k: v for k, v in os.environ.items() if k != "TFLINT_CACHE_DIR"}
    return LspClient(server_command(*extra), cwd=tmp_path, env=env)


@pytest.fixture
def server(tmp_path):
    client = _client(tmp_path, "-X", "importtime")
    try:
        yield client
    finally:
        rc = client.close()
        assert rc == 0, client.stderr[-2000:]


def _open(client: LspClient, uri: str, text: str, version: int = 1) -> None:
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}},
    )


def _change(client: LspClient, uri: str, text: str, version: int) -> None:
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
    )


def _actions(client: LspClient, uri: str, diag: dict, only: list[str] | None = None) -> list[dict]:
    ctx: dict = {"diagnostics": [diag]}
    if only:
        ctx["only"] = only
    return client.request(
        "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": diag["range"], "context": ctx}
    )


def test_file_diagnostic_fix_noqa_hover_and_edit(server, tmp_path):
    init = server.initialize(tmp_path)
    caps = init["capabilities"]
    assert caps["hoverProvider"]
    assert "source.fixAll.tflint" in caps["codeActionProvider"]["codeActionKinds"]
    assert caps["notebookDocumentSync"]["notebookSelector"]
    assert init["serverInfo"]["name"] == "tflint"

    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    uri = path.as_uri()
    _open(server, uri, BUGGY)
    diags = server.diagnostics(uri, version=1)
    assert [d["code"] for d in diags] == ["TFL101"]
    d = diags[0]
    assert d["range"] == {
        "start": {"line": PRINT_LINE, "character": 4},
        "end": {"line": PRINT_LINE, "character": len('    print("x", x)')},
    }
    assert d["severity"] == 1 and d["source"] == "tflint"
    assert d["codeDescription"]["href"].endswith("#tfl101-print-in-traced-code")

    # the quick fix, applied, gives tf.print
    actions = _actions(server, uri, d)
    fixes = [a for a in actions if a["kind"] == "quickfix" and a["title"].startswith("TFL101")]
    assert len(fixes) == 1 and fixes[0]["isPreferred"] is True
    fixed = apply_edits(BUGGY, fixes[0]["edit"]["changes"][uri])
    assert '    tf.print("x", x)\n' in fixed and "    print(" not in fixed

    # "# noqa: TFL101" for the line
    noqa = [a for a in actions if "noqa" in a["title"]]
    assert len(noqa) == 1
    suppressed = apply_edits(BUGGY, noqa[0]["edit"]["changes"][uri])
    assert suppressed.splitlines()[PRINT_LINE] == '    print("x", x)  # noqa: TFL101'

    # "fix all" is offered as a source action
    fix_all = _actions(server, uri, d, only=["source.fixAll"])
    assert [a["kind"] for a in fix_all] == ["source.fixAll.tflint"]
    assert apply_edits(BUGGY, fix_all[0]["edit"]["changes"][uri]) == fixed

    # hover over the finding: the rule's documentation
    hover = server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": PRINT_LINE, "character": 6}}
    )
    md = hover["contents"]["value"]
    assert hover["contents"]["kind"] == "markdown"
    assert "TFL101" in md and "What it does" in md and "Use instead" in md
    # ... and nowhere else on a clean line
    assert server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 3}}
    ) is None

    # the fix applied by the editor clears the diagnostic
    _change(server, uri, fixed, 2)
    assert server.diagnostics(uri, version=2) == []

    # the bug back, then the line edited away
    _change(server, uri, BUGGY, 3)
    assert [d["code"] for d in server.diagnostics(uri, version=3)] == ["TFL101"]
    gone = BUGGY.replace('    print("x", x)\n', "")
    _change(server, uri, gone, 4)
    assert server.diagnostics(uri, version=4) == []

    # the noqa line: no diagnostic, and a hover over the code in the comment gives its docs
    _change(server, uri, suppressed, 5)
    assert server.diagnostics(uri, version=5) == []
    col = suppressed.splitlines()[PRINT_LINE].index("TFL101") + 2
    hover = server.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": PRINT_LINE, "character": col}}
    )
    assert "TFL101" in hover["contents"]["value"] and "Fix safety" in hover["contents"]["value"]

    # quick successive edits: the last version is what gets published
    mark = server.mark()
    for v, text in ((6, gone), (7, BUGGY), (8, fixed), (9, BUGGY)):
        _change(server, uri, text, v)
    assert [d["code"] for d in server.diagnostics(uri, version=9, after=mark)] == ["TFL101"]

    # closing the document clears its diagnostics
    mark = server.mark()
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert server.diagnostics(uri, after=mark) == []

    server.close()
    imported = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in server.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "pygls" in imported  # importtime worked
    assert not imported & {"tensorflow", "keras", "tf_keras", "jax", "torch"}


def _cell(uri: str, text: str) -> dict:
    return {"uri": uri, "languageId": "python", "version": 1, "text": text}


def test_notebook_document_diagnostics_on_the_cell(server, tmp_path):
    server.initialize(tmp_path)
    nb_uri = (tmp_path / "train.ipynb").as_uri()
    cells = [
        ("import tensorflow as tf\n\n@tf.function\ndef scale(x, n):\n    return x * n\n", 2),
        ("# Training\nSome *markdown* with print(x)", 1),
        ('%matplotlib inline\n@tf.function\ndef step(x):\n    print("x", x)\n    return x\n', 2),
        ("for i in range(10):\n    scale(tf.constant(1.0), i)\n", 2),
    ]
    uris = [f"vscode-notebook-cell:{tmp_path / 'train.ipynb'}#c{i}" for i in range(len(cells))]
    server.notify(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": nb_uri,
                "notebookType": "jupyter-notebook",
                "version": 1,
                "cells": [{"kind": kind, "document": u} for (_, kind), u in zip(cells, uris)],
            },
            "cellTextDocuments": [
                {**_cell(u, text), "languageId": "python" if kind == 2 else "markdown"}
                for (text, kind), u in zip(cells, uris)
            ],
        },
    )
    # the bug in the third cell (the second code cell): the diagnostic is on that cell, in its lines
    d2 = server.diagnostics(uris[2])
    assert [d["code"] for d in d2] == ["TFL101"]
    assert d2[0]["range"]["start"] == {"line": 3, "character": 4}
    # a tf.function defined in one cell, called in a loop in another: found in the caller's cell
    d3 = server.diagnostics(uris[3])
    assert [d["code"] for d in d3] == ["TFL201"]
    assert d3[0]["range"]["start"]["line"] == 1
    assert server.diagnostics(uris[0]) == []

    # the quick fix, in the cell's coordinates
    actions = _actions(server, uris[2], d2[0])
    fix = next(a for a in actions if a["kind"] == "quickfix" and a["title"].startswith("TFL101"))
    fixed_cell = apply_edits(cells[2][0], fix["edit"]["changes"][uris[2]])
    assert '    tf.print("x", x)' in fixed_cell and "%matplotlib inline" in fixed_cell

    # the cell edited: its diagnostic goes, the other cell's stays
    mark = server.mark()
    server.notify(
        "notebookDocument/didChange",
        {
            "notebookDocument": {"uri": nb_uri, "version": 2},
            "change": {
                "cells": {
                    "textContent": [
                        {"document": {"uri": uris[2], "version": 2}, "changes": [{"text": fixed_cell}]}
                    ]
                }
            },
        },
    )
    assert server.diagnostics(uris[2], after=mark) == []
    assert [d["code"] for d in server.diagnostics(uris[3], after=mark)] == ["TFL201"]

    # fix all over the notebook: edits per cell
    mark = server.mark()
    server.notify(
        "notebookDocument/didChange",
        {
            "notebookDocument": {"uri": nb_uri, "version": 3},
            "change": {
                "cells": {
                    "textContent": [
                        {"document": {"uri": uris[2], "version": 3}, "changes": [{"text": cells[2][0]}]}
                    ]
                }
            },
        },
    )
    d2 = server.diagnostics(uris[2], after=mark)
    fix_all = _actions(server, uris[2], d2[0], only=["source.fixAll"])
    changes = fix_all[0]["edit"]["changes"]
    assert list(changes) == [uris[2]]
    assert apply_edits(cells[2][0], changes[uris[2]]) == fixed_cell

    mark = server.mark()
    server.notify(
        "notebookDocument/didClose",
        {"notebookDocument": {"uri": nb_uri}, "cellTextDocuments": [{"uri": u} for u in uris]},
    )
    assert server.diagnostics(uris[3], after=mark) == []


def test_configuration_is_honoured_and_reloaded(tmp_path):
    client = _client(tmp_path)
    try:
        client.initialize(
            tmp_path, {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
        )
        cfg = tmp_path / "pyproject.toml"
        cfg.write_text('[tool.tflint]\nignore = ["TFL101"]\n')
        path = tmp_path / "pkg" / "train.py"
        path.parent.mkdir()
        path.write_text(BUGGY)
        uri = path.as_uri()
        _open(client, uri, BUGGY)
        assert client.diagnostics(uri, version=1) == []
        # the server asked to watch the configuration files
        regs = [r for m in client.server_requests if m["method"] == "client/registerCapability"
                for r in m["params"]["registrations"]]
        assert any(r["method"] == "workspace/didChangeWatchedFiles" for r in regs)

        # the configuration changes: a watched-files notice re-checks the open document
        cfg.write_text('[tool.tflint]\nignore = ["TFL2"]\n')
        mark = client.mark()
        client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": cfg.as_uri(), "type": 2}]})
        assert [d["code"] for d in client.diagnostics(uri, after=mark)] == ["TFL101"]

        # a closer tflint.toml, seen by its modification time on the next edit (no notice)
        (tmp_path / "pkg" / "tflint.toml").write_text('select = ["TFL3"]\n')
        _change(client, uri, BUGGY + "\n", 2)
        assert client.diagnostics(uri, version=2) == []

        # an invalid configuration: one message naming the file and key; defaults apply
        time.sleep(0.01)
        (tmp_path / "pkg" / "tflint.toml").write_text('selekt = ["TFL3"]\n')
        mark = client.mark()
        _change(client, uri, BUGGY, 3)
        assert [d["code"] for d in client.diagnostics(uri, version=3)] == ["TFL101"]
        msg = client.wait_for(lambda m: m.get("method") == "window/showMessage", after=mark)
        text = msg["params"]["message"]
        assert "tflint.toml" in text and "selekt" in text and "\n" not in text

        # an excluded file gets no diagnostics, as `tflint check` skips it
        cfg.write_text('[tool.tflint]\nextend-exclude = ["generated/"]\n')
        gen = tmp_path / "generated" / "model.py"
        gen.parent.mkdir()
        gen.write_text(BUGGY)
        _open(client, gen.as_uri(), BUGGY)
        assert client.diagnostics(gen.as_uri(), version=1) == []
        other = tmp_path / "model.py"
        other.write_text(BUGGY)
        _open(client, other.as_uri(), BUGGY)
        assert [d["code"] for d in client.diagnostics(other.as_uri(), version=1)] == ["TFL101"]
    finally:
        assert client.close() == 0


def test_server_without_pygls_is_one_line_error(tmp_path):
    import subprocess
    import sys

    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "pygls").mkdir()
    (blocker / "pygls" / "__init__.py").write_text("raise ImportError('blocked', name='pygls')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "tflint", "server"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "tflint[lsp]" in proc.stderr


def test_unsafe_fix_is_marked_and_unparsable_file_is_tfl000(server, tmp_path):
    server.initialize(tmp_path)
    text = 'import tensorflow as tf\n\n\n@tf.function\ndef step(x):\n    print(f"x={x}")\n    return x\n'
    uri = "untitled:Untitled-1"
    _open(server, uri, text)
    [d] = server.diagnostics(uri, version=1)
    actions = _actions(server, uri, d)
    [fix] = [a for a in actions if a["title"].startswith("TFL101")]
    assert fix["kind"] == "quickfix.tflint.unsafe" and fix["title"].endswith("(unsafe)")
    assert fix["isPreferred"] is False
    assert 'tf.print(f"x={x}")' in apply_edits(text, fix["edit"]["changes"][uri])
    # "fix all" applies safe fixes only: nothing to offer here
    assert _actions(server, uri, d, only=["source.fixAll"]) == []

    # a document in another language is not checked
    json_uri = (tmp_path / "nb.ipynb").as_uri()
    server.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": json_uri, "languageId": "json", "version": 1, "text": '{"cells": ['}},
    )

    broken = "import tensorflow as tf\ndef f(:\n    pass\n"
    _change(server, uri, broken, 2)
    [d] = server.diagnostics(uri, version=2)
    assert d["code"] == "TFL000" and d["range"]["start"]["line"] == 1
    assert not [a for a in _actions(server, uri, d) if "noqa" in a["title"]]
    assert not [
        m for m in server.notifications
        if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == json_uri
    ]


def test_positions_are_utf16_code_units_and_uris_may_be_escaped(server, tmp_path):
    server.initialize(tmp_path)
    text = 'import tensorflow as tf\n\n\n@tf.function\ndef step(x):\n    s = "\U0001F600"; print(s)\n    return x\n'
    folder = tmp_path / "my project"  # a URI with an escaped space
    folder.mkdir()
    uri = (folder / "emoji.py").as_uri()
    assert "%20" in uri
    _open(server, uri, text)
    [d] = server.diagnostics(uri, version=1)
    prefix = '    s = "\U0001F600"; '
    assert d["range"]["start"] == {"line": 5, "character": len(prefix) + 1}  # the emoji is 2 units
    [fix] = [a for a in _actions(server, uri, d) if a["title"].startswith("TFL101")]
    assert apply_edits(text, fix["edit"]["changes"][uri]).splitlines()[5] == prefix + "tf.print(s)"
    hover = server.request(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 5, "character": len(prefix) + 2}},
    )
    assert "TFL101" in hover["contents"]["value"]
