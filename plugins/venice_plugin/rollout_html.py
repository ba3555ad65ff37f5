"""The rollout page's HTML, rendered on the server from the read model (no script: it shows in the Airflow UI's
frame as it is). Every text from the store, the run or a hook is escaped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

from venice_core.jobs.airflow_push import dag_id
from venice_core.jobs.rollout_view import Answer, RegionRow, RolloutView, Step
from venice_plugin.airflow_runs import RunInfo

STYLE = """
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 16px; color: #1a202c; }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 16px; margin: 20px 0 6px; }
table { border-collapse: collapse; } th, td { border: 1px solid #cbd5e0; padding: 4px 8px; vertical-align: top; }
th { background: #edf2f7; text-align: left; }
.state { font-weight: 600; } .muted { color: #718096; } .reason { color: #4a5568; }
.success { background: #c6f6d5; } .failed { background: #fed7d7; } .upstream_failed { background: #feebc8; }
.running, .up_for_reschedule, .up_for_retry, .deferred, .awaiting_input { background: #bee3f8; }
.skipped { background: #e2e8f0; }
.answer { font-size: 12px; } .ABORT, .ROLLBACK, .FAILED { color: #c53030; font-weight: 700; }
.WAIT { color: #b7791f; font-weight: 600; }
.stop { background: #fff5f5; } .outcome { min-width: 16em; max-width: 28em; }
.runs a { margin-right: 8px; } .current { font-weight: 700; }
"""
IN_PROGRESS = ("queued", "running")  # run states


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _css(state: str) -> str:
    """A state as a class name (only letters and underscores survive)."""
    return re.sub(r"[^A-Za-z_]", "", state)


def render_page(view: RolloutView, runs: Sequence[RunInfo] = ()) -> str:
    # A run that is still going: the page reloads itself (it has no script).
    refresh = "<meta http-equiv='refresh' content='10'>" if view.run_state in IN_PROGRESS else ""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'>{refresh}<title>Rollout of {_e(view.store)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Rollout of <span id='store'>{_e(view.store)}</span></h1>",
        _summary(view),
        _runs(view, runs),
        _regions(view.regions),
        _job_steps(view.job_steps),
        _matrix(view),
        _unplaced(view.unplaced),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def render_index(stores: Sequence[tuple[RolloutView, RunInfo | None]]) -> str:
    """Every store the user may read: what each region serves, its latest run, a link to its DAG's Rollout tab."""
    rows = []
    for view, run in stores:
        serving = ", ".join(f"{_e(r.region)} {_version(r.current)}" for r in view.regions)
        latest = f"<span class='state {_css(run.state)}'>{_e(run.state)}</span> {_e(run.started)}" if run else "-"
        link = f"/dags/{_e(quote(dag_id(view.store), safe=''))}/plugin/venice-rollout"
        rows.append(
            f"<tr data-store='{_e(view.store)}'><th><a href='{link}' target='_top'>{_e(view.store)}</a></th>"
            f"<td>{serving}</td><td>{latest}</td></tr>"
        )
    body = "".join(rows) or "<tr><td colspan='3' class='muted'>No store yet.</td></tr>"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Rollouts</title><style>{STYLE}</style></head>"
        "<body><h1>Rollouts</h1><table id='stores'><tr><th>store</th><th>serving, in rollout order</th>"
        f"<th>latest run</th></tr>{body}</table></body></html>"
    )


def render_missing(message: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Rollout</title><style>{STYLE}</style></head>"
        f"<body><p id='missing'>{_e(message)}</p></body></html>"
    )


def _summary(view: RolloutView) -> str:
    if view.run_id is None:
        return "<p id='run' class='muted'>No rollout run yet.</p>"
    run = f"<p id='run'>Run <code>{_e(view.run_id)}</code>: <span class='state {_css(view.run_state or '')}'>"
    run += f"{_e(view.run_state or 'unknown')}</span></p>"
    if view.version is None:
        return run + "<p id='version' class='muted'>No version was created by this run.</p>"
    version = view.version
    reason = f" <span class='reason'>{_e(version.reason)}</span>" if version.reason else ""
    return (
        run + f"<p id='version'>Version {version.number}: "
        f"<span id='version-status' class='state'>{_e(version.status)}</span>{reason}</p>"
    )


def _runs(view: RolloutView, runs: Sequence[RunInfo]) -> str:
    if len(runs) < 2:
        return ""
    links = [
        f"<a href='?run_id={_e(quote(r.run_id, safe=''))}' title='{_e(r.started)}'>"
        + (f"<b>{_e(r.run_id)}</b>" if r.run_id == view.run_id else _e(r.run_id))
        + f" <span class='muted'>({_e(r.state)})</span></a>"
        for r in runs
    ]
    return "<p class='runs'>Runs: " + " ".join(links) + "</p>"


def _regions(rows: Sequence[RegionRow]) -> str:
    body = "".join(
        f"<tr data-region='{_e(r.region)}'><th>{_e(r.region)}</th><td class='current'>{_version(r.current)}</td>"
        f"<td>{_version(r.backup)}</td><td>{_progress(r)}</td></tr>"
        for r in rows
    )
    return (
        "<h2>Regions, in rollout order</h2><table id='regions'><tr><th>region</th><th>current version</th>"
        f"<th>backup version</th><th>ingestion of this run's version</th></tr>{body}</table>"
    )


def _version(number: int) -> str:
    return f"v{number}" if number else "<span class='muted'>none</span>"


def _progress(row: RegionRow) -> str:
    if row.progress is None:
        return "<span class='muted'>-</span>"
    percent = row.progress.percent
    if percent is None:
        return f"{row.progress.records:,} records"
    return f"{row.progress.records:,} / {row.progress.total:,} records ({percent:.0f}%)"


def _job_steps(steps: Sequence[Step]) -> str:
    if not steps:
        return ""
    head = "".join(f"<th>{_name(s.name)}</th>" for s in steps)
    cells = "".join(_cell(s) for s in steps)
    return f"<h2>Push job</h2><table id='job'><tr>{head}</tr><tr>{cells}</tr></table>"


def _matrix(view: RolloutView) -> str:
    if not view.columns:
        return ""
    head = "<tr><th>region</th><th>outcome</th>" + "".join(f"<th>{_name(c)}</th>" for c in view.columns) + "</tr>"
    rows = []
    for row in view.regions:
        cells = "".join(_cell(row.steps[c]) if c in row.steps else "<td class='muted'>-</td>" for c in view.columns)
        outcome = "<td class='outcome'></td>"
        if row.stop is not None:
            outcome = (
                f"<td class='outcome stop'><span class='decision {_css(row.stop.decision)}'>"
                f"{_e(row.stop.decision)}</span> at {_e(row.stop.step)}"
                f"<div class='reason'>{_e(row.stop.reason)}</div></td>"
            )
        rows.append(f"<tr data-region='{_e(row.region)}'><th>{_e(row.region)}</th>{outcome}{cells}</tr>")
    return f"<h2>Steps by region</h2><table id='matrix'>{head}{''.join(rows)}</table>"


def _name(step: str) -> str:
    """A step name that may wrap after its underscores (the matrix is wide)."""
    return _e(step).replace("_", "_<wbr>")


def _cell(step: Step) -> str:
    tries = f" <span class='muted'>({step.tries} tries)</span>" if step.tries > 1 else ""
    answers = _answers(step.answers)
    return (
        f"<td class='{_css(step.state)}' data-task='{_e(step.task_id)}'>"
        f"<span class='state'>{_e(step.state)}</span>{tries}{answers}</td>"
    )


def _answers(answers: Sequence[Answer]) -> str:
    """A line per notable answer; the hooks that simply proceeded (or were informed) counted on one line per
    function, their names in its tooltip."""
    quiet: dict[tuple[str, str | None, str], list[str]] = {}
    for a in answers:
        if not a.notable:
            quiet.setdefault((a.function, a.region, a.outcome or "informed"), []).append(a.hook)
    lines = [_answer(a) for a in answers if a.notable]
    for (function, region, outcome), hooks in quiet.items():
        names = ", ".join(dict.fromkeys(hooks))
        lines.append(
            f"<div class='answer muted' title='{_e(names)}'>{len(set(hooks))} hook(s) {_e(outcome)}"
            f" at {_e(function)}{_where(region)}</div>"
        )
    return "".join(lines)


def _answer(answer: Answer) -> str:
    count = f" &times;{answer.count}" if answer.count > 1 else ""
    outcome = answer.outcome or ("error" if answer.detail else "informed")
    detail = f": <span class='reason'>{_e(answer.detail)}</span>" if answer.detail else ""
    return (
        f"<div class='answer'>{_e(answer.hook)} <span class='{_css(outcome)}'>{_e(outcome)}</span>{count}"
        f" at {_e(answer.function)}{_where(answer.region)}{detail}</div>"
    )


def _where(region: str | None) -> str:
    return f" in {_e(region)}" if region else ""


def _unplaced(answers: Sequence[Answer]) -> str:
    if not answers:
        return ""
    return f"<h2>Other hook answers</h2><div id='unplaced'>{_answers(answers)}</div>"
