"""The `--json` report matches the schema documented in docs/profile-json.md, on real runs."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from tests.profile.conftest import DOCS_SCHEMA
from tflint.profiler.report import MERGED_SIGNAL_KINDS, SIGNAL_KINDS, Report

# runs shared with the other profile tests (cached for the session)
REPORTED_RUNS = [
    "retrace_python_int.py",
    "none_gradient_unused.py",
    "input_stall_eager.py",
    "memory_growth.py",
    "clean_fit.py",
    "clean_three_loops.py",
    "memory_loss_list.py",
    "retrace_partial_batch.py",
    "crash.py",
    "exit_code.py",
    # training health
    "nan_inf_late.py",
    "dead_parameter_fit.py",
    "dead_parameter_loop.py",
    "loss_stall_fit.py",
    "loss_broadcast_loop.py",
    "exploding_gradient_loop.py",
    "vanishing_gradient_loop.py",
    "nan_inf_eager.py",
]


def documented_schema() -> dict:
    text = DOCS_SCHEMA.read_text(encoding="utf-8")
    section = text.split("## JSON Schema", 1)[1]
    m = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert m, "docs/profile-json.md has no ```json block under '## JSON Schema'"
    return json.loads(m.group(1))


def test_documented_schema_is_a_valid_json_schema():
    schema = documented_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["signals"]["items"] == {"$ref": "#/$defs/signal"}
    assert set(schema["$defs"]["signal"]["properties"]["kind"]["enum"]) == set(SIGNAL_KINDS) | set(MERGED_SIGNAL_KINDS)


def test_documented_fields_are_in_the_tables():
    """Every required field of the schema is described in the prose of the document."""
    text = DOCS_SCHEMA.read_text(encoding="utf-8").split("## JSON Schema", 1)[0]
    schema = documented_schema()
    for name in schema["required"] + schema["properties"]["metrics"]["required"]:
        assert f"`{name}`" in text, name


def test_schema_rejects_a_malformed_report():
    schema = documented_schema()
    bad = {"schema_version": 1, "tflint_version": "0", "script": "x.py", "argv": [], "exit_code": 0,
           "duration_s": 1.0, "steps": 3, "metrics": {},
           "signals": [{"kind": "slow", "severity": "warning", "message": "m", "location": None,
                        "details": {}}]}
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    messages = " ".join(e.message for e in errors)
    assert "'slow' is not one of" in messages
    assert "'step_time_s' is a required property" in messages


@pytest.mark.parametrize("name", REPORTED_RUNS)
def test_real_report_matches_documented_schema(profiled, name):
    run = profiled(name)
    report = run.report
    jsonschema.Draft202012Validator(documented_schema()).validate(report)
    # and it round-trips through the report data class unchanged
    assert Report.load(run.json_path).to_dict() == report
    assert report["script"].endswith(name)


def test_documented_none_gradient_reasons_match_the_runtime():
    from tflint.runtime.gradients import REASON_TEXT

    text = DOCS_SCHEMA.read_text(encoding="utf-8")
    for reason in REASON_TEXT:
        assert f"`{reason}`" in text, reason


def test_report_of_a_run_without_hooks_matches_schema():
    """When the hooks cannot be installed the script still runs; its report says so."""
    from tflint.profiler.runner import Outcome, ProfileOptions, _build_report

    report = _build_report(None, "RuntimeError: no hooks", ProfileOptions(script="train.py", args=["-x"]),
                           Outcome(0, "completed"), 1.5)
    report.metrics["run"] = Outcome(0, "completed").to_dict()
    data = json.loads(report.to_json())
    jsonschema.Draft202012Validator(documented_schema()).validate(data)
    assert data["signals"] == [] and data["argv"] == ["-x"] and data["exit_code"] == 0
    assert {v["status"] for v in data["metrics"]["hooks"].values()} == {"failed"}
    assert "RuntimeError: no hooks" in data["metrics"]["hooks"]["retrace"]["reason"]


def test_merged_report_with_a_straggler_matches_documented_schema(tmp_path):
    """A merged report of two real worker rows (a made-up split: no cluster needed) validates."""
    from tflint.profiler.merge import merge

    def worker(index: int, input_share: float, peer_share: float) -> Report:
        split = {"time_s": 1.0, "input_wait_s": input_share, "peer_wait_s": peer_share,
                 "compute_s": 1.0 - input_share - peer_share, "input_wait_share": input_share,
                 "peer_wait_share": peer_share, "compute_share": 1.0 - input_share - peer_share,
                 "collectives_timed": True, "own_pipeline_timed": True}
        tag = {"id": f"worker:{index}", "task_type": "worker", "task_index": index, "steps_observed": 10,
               "step_time_s": {"median": 0.05, "p90": 0.06, "n": 10}, "input_wait_share": input_share, "split": split}
        return Report(tflint_version="0", script="train.py", argv=[], exit_code=0, duration_s=1.0, steps=10,
                      metrics={"step_time_s": [], "input_wait_share": {"overall": None, "series": []},
                               "host_rss_bytes": [], "device_memory_bytes": {}, "retraces": 0, "gpu": {},
                               "hooks": {k: {"status": "ok"} for k in SIGNAL_KINDS},
                               "run": {"outcome": "completed", "exception": None}, "worker": tag})

    merged = merge([worker(0, 0.02, 0.9), worker(1, 0.6, 0.25)])
    data = json.loads(merged.to_json())
    data["metrics"].update(step_time_s=[], input_wait_share={"overall": None, "series": []}, host_rss_bytes=[],
                           device_memory_bytes={}, retraces=0, gpu={}, run={"outcome": "completed", "exception": None})
    jsonschema.Draft202012Validator(documented_schema()).validate(data)
    (sig,) = [s for s in data["signals"] if s["kind"] == "straggler"]
    assert (sig["details"]["worker"], sig["details"]["cause"]) == ("worker:1", "input-wait")
