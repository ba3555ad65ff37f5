"""A push or repush job's Spark application name, in one place: the job names its session by it, the submit spec
gives it to spark-submit, and a retried step finds its earlier try's application on the master by it."""

from __future__ import annotations


def application_name(kind: str, store: str, version: int) -> str:
    """`venice-push-<store>-v<N>` (or `venice-repush-...`): the store and version, so that only an earlier try of the
    same step has it."""
    return f"venice-{kind}-{store}-v{version}"
