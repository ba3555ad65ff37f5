"""The rollout page's HTML, rendered on the server from the read model (no script: it shows in the Airflow UI's
frame as it is). Every text from the store, the run or a hook is escaped."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from urllib.parse import quote

from venice_core.rollout.names import rollout_dag_id
from venice_core.rollout.view import Answer, RegionRow, RolloutView, Step
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
.stop { background: #fff5f5; }
.runs a { margin-right: 8px; } .current { font-weight: 700; }
.steps { font-size: 11px; } .steps th, .steps td { padding: 2px; } .steps .state { font-weight: 400; }
.steps th { font-weight: 600; } .steps .sub { font-weight: 400; }
.steps .stop { min-width: 10em; } .steps .answer, .steps .outcome { overflow-wrap: anywhere; }
.when { font-size: 10px; color: #4a5568; } .when time, .took { white-space: nowrap; }
"""
# The step tables fit the Airflow UI's frame (about 1400 px in a 1600 px window) with every step of three regions:
# a column is as narrow as its longest word (a state, a start time, a shortened step name: the full name is in the
# header's title); hook answers may wrap anywhere and take the width left, their reasons clipped.
IN_PROGRESS = ("queued", "running")  # run states
BRANCHES = ("abort", "rollback")  # the tasks a decision may branch to besides the next step: `<decision>_<branch>`
SHORT = {"da_vinci": "DV", "ingestion": "ingest", "replication": "repl", "registration": "reg"}
CLIP = 100  # characters of a hook's reason shown in a step's cell (all of it in the title)


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _css(state: str) -> str:
    """A state as a class name (only letters and underscores survive)."""
    return re.sub(r"[^A-Za-z_]", "", state)


def render_page(view: RolloutView, runs: Sequence[RunInfo] = (), now: float | None = None) -> str:
    """The page of one run; `now` (epoch seconds, default the clock) times the steps still going."""
    now = time.time() if now is None else now
    # A run that is still going: the page reloads itself (it has no script).
    refresh = "<meta http-equiv='refresh' content='10'>" if view.run_state in IN_PROGRESS else ""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'>{refresh}<title>Rollout of {_e(view.store)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Rollout of <span id='store'>{_e(view.store)}</span></h1>",
        _summary(view),
        _runs(view, runs),
        _regions(view.regions),
        _job_steps(view.job_steps, now),
        _matrix(view, now),
        _unplaced(view.unplaced),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


PAGE_SIZE = 50  # stores on a page of the list: a page reads each of its stores' state, not every store's


@dataclass(frozen=True)
class StorePage:
    """Which page of the (filtered) store list is shown: `names` are its stores."""

    names: Sequence[str]
    number: int  # 1-based
    pages: int
    total: int  # stores matching the filter
    query: str  # the filter: a part of the name, any case ("" for every store)
    first: int  # the 1-based position of the page's first store (0 when there is none)

    @classmethod
    def of(cls, names: Sequence[str], query: str, number: int, size: int = PAGE_SIZE) -> StorePage:
        """The page `number` of the stores among `names` whose name holds `query` (clamped to the pages there
        are)."""
        matching = [name for name in names if query.lower() in name.lower()]
        pages = max(1, -(-len(matching) // size))
        number = min(max(1, number), pages)
        start = (number - 1) * size
        shown = matching[start : start + size]
        return cls(shown, number, pages, len(matching), query, start + 1 if shown else 0)


def render_index(stores: Sequence[tuple[RolloutView, RunInfo | None]], page: StorePage) -> str:
    """A page of the stores the user may read: what each region serves, its latest run, a link to its DAG's Rollout
    tab; a filter by name, and links to the pages before and after."""
    rows = []
    for view, run in stores:
        serving = ", ".join(f"{_e(r.region)} {_version(r.current)}" for r in view.regions)
        latest = f"<span class='state {_css(run.state)}'>{_e(run.state)}</span> {_e(run.started)}" if run else "-"
        link = f"/dags/{_e(quote(rollout_dag_id(view.store), safe=''))}/plugin/venice-rollout"
        rows.append(
            f"<tr data-store='{_e(view.store)}'><th><a href='{link}' target='_top'>{_e(view.store)}</a></th>"
            f"<td>{serving}</td><td>{latest}</td></tr>"
        )
    empty = f"No store matches '{_e(page.query)}'." if page.query else "No store yet."
    body = "".join(rows) or f"<tr><td colspan='3' class='muted'>{empty}</td></tr>"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Rollouts</title><style>{STYLE}</style></head>"
        f"<body><h1>Rollouts</h1>{_filter(page)}<table id='stores'><tr><th>store</th>"
        f"<th>serving, in rollout order</th><th>latest run</th></tr>{body}</table>{_pager(page)}</body></html>"
    )


def _filter(page: StorePage) -> str:
    return (
        "<form id='filter' method='get'><input name='q' type='search' placeholder='store name contains'"
        f" value='{_e(page.query)}'> <button type='submit'>Filter</button></form>"
    )


def _pager(page: StorePage) -> str:
    """ "Stores 51-100 of 3000", and links to the page before and after (keeping the filter)."""
    if page.total == 0:
        return ""
    query = f"&q={quote(page.query, safe='')}" if page.query else ""
    links = []
    if page.number > 1:
        links.append(f"<a id='previous' href='{_e(f'?page={page.number - 1}{query}')}'>previous</a>")
    if page.number < page.pages:
        links.append(f"<a id='next' href='{_e(f'?page={page.number + 1}{query}')}'>next</a>")
    shown = f"{page.first}-{page.first + len(page.names) - 1}"
    return f"<p id='pager' class='runs'>Stores {shown} of {page.total} {' '.join(links)}</p>"


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
    progress = row.progress
    percent = progress.percent
    text = (
        f"{progress.records:,} records"
        if percent is None
        else (f"{progress.records:,} / {progress.total:,} records ({percent:.0f}%)")
    )
    if progress.replicas:  # a replicated region: how many replicas can serve
        text += f"<br><span class='replicas'>{progress.replicas_ready} of {progress.replicas} replicas ready</span>"
    return text


def _job_steps(steps: Sequence[Step], now: float) -> str:
    if not steps:
        return ""
    cells = "".join(_cell(s, now) for s in steps)
    head = _head([s.name for s in steps], "")
    return f"<h2>Push job</h2><table id='job' class='steps'>{head}<tr>{cells}</tr></table>"


def _matrix(view: RolloutView, now: float) -> str:
    if not view.columns:
        return ""
    head = _head(view.columns, "<th{span}>region</th><th{span} class='outcome'>outcome</th>")
    rows = []
    for row in view.regions:
        cells = "".join(
            _cell(row.steps[c], now) if c in row.steps else "<td class='muted'>-</td>" for c in view.columns
        )
        outcome = "<td class='outcome'></td>"
        if row.stop is not None:
            outcome = (
                f"<td class='outcome stop'><span class='decision {_css(row.stop.decision)}'>"
                f"{_e(row.stop.decision)}</span> at {_e(row.stop.step)}"
                f"<div class='reason'>{_e(row.stop.reason)}</div></td>"
            )
        rows.append(f"<tr data-region='{_e(row.region)}'><th>{_e(row.region)}</th>{outcome}{cells}</tr>")
    table = f"<table id='matrix' class='steps'>{head}{''.join(rows)}</table>"
    return f"<h2>Steps by region</h2><p class='muted'>Start times in UTC.</p>{table}"


def _head(columns: Sequence[str], lead: str) -> str:
    """Header rows for step columns: a decision's branch columns (`pre_swap_outcome`, ...) under one header with
    the decision (its own column `ask`), on a second row; `lead` is the cells before them (`{span}` spans both rows).
    Each name shortened, the full task name in the title."""
    groups: list[list[str]] = []
    for column in columns:
        decision, _, branch = column.rpartition("_")
        if groups and branch in BRANCHES and decision == groups[-1][0]:
            groups[-1].append(column)
        else:
            groups.append([column])
    span = " rowspan='2'" if any(len(g) > 1 for g in groups) else ""
    top, sub = [lead.format(span=span)], []
    for group in groups:
        name = group[0]
        if len(group) == 1:
            top.append(f"<th{span} title='{_e(name)}'>{_label(name)}</th>")
            continue
        top.append(f"<th colspan='{len(group)}' title='{_e(name)}'>{_label(name)}</th>")
        sub += [
            f"<th class='sub' title='{_e(c)}'>{_e(c.removeprefix(name + '_') if c != name else 'ask')}</th>"
            for c in group
        ]
    return f"<tr>{''.join(top)}</tr>" + (f"<tr>{''.join(sub)}</tr>" if sub else "")


def _label(step: str) -> str:
    """A step name shortened for a header, in words that wrap (`da_vinci_ingestion_gate` -> `DV ingest gate`)."""
    for word, short in SHORT.items():
        step = re.sub(rf"(?<![^_]){word}(?![^_])", short, step)
    return _e(step.replace("_", " "))


def _cell(step: Step, now: float) -> str:
    tries = f" <span class='muted'>({step.tries} tries)</span>" if step.tries > 1 else ""
    when, title = _when(step, now)
    return (
        f"<td class='{_css(step.state)}' data-task='{_e(step.task_id)}' title='{_e(title)}'>"
        f"<span class='state'>{_words(step.state)}</span>{tries}{when}{_answers(step.answers, CLIP)}</td>"
    )


def _when(step: Step, now: float) -> tuple[str, str]:
    """The step's start and duration (so far, for a step still going) as the cell's line, and as its title."""
    elapsed = step.elapsed(now)
    if step.started_at is None or elapsed is None:
        return "", f"{step.task_id}: {step.state}"
    start = datetime.fromtimestamp(step.started_at, UTC)
    seconds, going = elapsed
    took = _duration(seconds)
    line = (
        f"<div class='when'><time datetime='{start.isoformat(timespec='seconds')}'>{start:%H:%M:%S}</time> "
        f"<span class='took'>{took.replace(' ', '&nbsp;')}</span>{' so far' if going else ''}</div>"
    )
    ran = f"running for {took}" if going else f"took {took}"
    return line, f"{step.task_id}: {step.state}, started {start:%Y-%m-%d %H:%M:%S} UTC, {ran}"


def _duration(seconds: float) -> str:
    """`12 s`, `1 m 05 s`, `2 h 03 m`."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} m {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} m"


def _answers(answers: Sequence[Answer], clip: int | None = None) -> str:
    """A line per notable answer (its reason cut at `clip` characters); the hooks that simply proceeded (or were
    informed) counted on one line per function, their names in its tooltip."""
    quiet: dict[tuple[str, str | None, str], list[str]] = {}
    for a in answers:
        if not a.notable:
            quiet.setdefault((a.function, a.region, a.outcome or "informed"), []).append(a.hook)
    lines = [_answer(a, clip) for a in answers if a.notable]
    for (function, region, outcome), hooks in quiet.items():
        names = ", ".join(dict.fromkeys(hooks))
        lines.append(
            f"<div class='answer muted' title='{_e(names)}'>{len(set(hooks))} hook(s) {_e(outcome)}"
            f" at {_words(function)}{_where(region)}</div>"
        )
    return "".join(lines)


def _answer(answer: Answer, clip: int | None) -> str:
    count = f" &times;{answer.count}" if answer.count > 1 else ""
    outcome = answer.outcome or ("error" if answer.detail else "informed")
    detail = ""
    if answer.detail:
        shown, title = answer.detail, ""
        if clip is not None and len(answer.detail) > clip:
            shown, title = answer.detail[: clip - 1] + "\u2026", f" title='{_e(answer.detail)}'"
        detail = f": <span class='reason'{title}>{_e(shown)}</span>"
    return (
        f"<div class='answer'>{_e(answer.hook)} <span class='{_css(outcome)}'>{_e(outcome)}</span>{count}"
        f" at {_words(answer.function)}{_where(answer.region)}{detail}</div>"
    )


def _words(name: str) -> str:
    """A name that may wrap after its underscores."""
    return _e(name).replace("_", "_<wbr>")


def _where(region: str | None) -> str:
    return f" in {_e(region)}" if region else ""


def _unplaced(answers: Sequence[Answer]) -> str:
    if not answers:
        return ""
    return f"<h2>Other hook answers</h2><div id='unplaced'>{_answers(answers)}</div>"
