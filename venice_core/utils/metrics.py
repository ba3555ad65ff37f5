"""Prometheus text rendering (counters, gauges, latency summaries), shared by the servers and `venice metrics`."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(
        f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in sorted(labels.items())
    )
    return "{" + inner + "}"


class LatencySummary:
    """Count, sum and p50/p99 over the most recent samples."""

    def __init__(self, window: int = 10_000) -> None:
        self.count = 0
        self.total = 0.0
        self._recent: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self.count += 1
            self.total += seconds
            self._recent.append(seconds)

    def quantile(self, q: float) -> float:
        with self._lock:
            ordered = sorted(self._recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def render(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{_labels(labels)} {value}" for labels, value in samples]
    return lines


def render_summary(
    name: str, help_text: str, summaries: dict[tuple[tuple[str, str], ...], LatencySummary]
) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} summary"]
    for key, summary in summaries.items():
        labels = dict(key)
        for q in (0.5, 0.99):
            lines.append(f"{name}{_labels({**labels, 'quantile': str(q)})} {summary.quantile(q)}")
        lines.append(f"{name}_sum{_labels(labels)} {summary.total}")
        lines.append(f"{name}_count{_labels(labels)} {summary.count}")
    return lines


@dataclass(frozen=True)
class PartitionIngestion:
    """One hosted partition's ingestion figures, as a server hands them to its metrics endpoint."""

    store: str
    version: int
    partition: int
    region: str
    records: int
    duplicates: int
    lag: int  # messages behind: the version topic's end, or the real-time topics' once past END_OF_PUSH
    nearline_applied: int | None = None  # a hybrid version past END_OF_PUSH: its nearline writes
    nearline_superseded: int | None = None

    def labels(self) -> dict[str, str]:
        return {
            "store": self.store,
            "version": str(self.version),
            "partition": str(self.partition),
            "region": self.region,
        }
