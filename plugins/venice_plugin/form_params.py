"""The trigger forms' params of the plugin's DAGs (the rollout's, the streams' upgrade)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

# Airflow validates every task's copy of the DAG's params each time it serialises the DAG (every parse), and
# jsonschema checks the schema itself against its metaschema first: against 2020-12's (the default, $ref-heavy) that
# was most of a parse (0.8 s of a store's DAG, profiled); against draft 7's it is a quarter. The keywords used here
# mean the same in both.
PARAM_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"


def form_param(default: Any, **schema: Any) -> Param:
    """A trigger-form Param whose schema declares draft 7 (see above): the rollout and upgrade DAGs' params."""
    return Param(default, **{"$schema": PARAM_SCHEMA_DRAFT, **schema})
