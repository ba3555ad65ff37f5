"""The rollout DAG's sensor of its own: a DECISION, which asks the hooks and branches on their answer."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator, BranchMixIn, PokeReturnValue

from venice_core.controller.hook_decisions import Decision
from venice_core.rollout.steps import Step
from venice_plugin.rollout_dag.task_inputs import cleared, step_inputs


class DecisionSensor(BaseSensorOperator, BranchMixIn):
    """A DECISION: asks the hooks at each poke (reschedule mode: a WAIT holds no worker slot) and, once they have
    decided, branches itself: PROCEED follows the next step, ABORT or ROLLBACK the step's `_abort` / `_rollback`
    task, and the others are skipped. One task run per decision, where a sensor and a branch task took two."""

    inherits_from_skipmixin = True

    def __init__(self, *, store: str, step: Step, region: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store, self.step, self.region = store, step, region

    def poke(self, context: Any) -> PokeReturnValue:
        with step_inputs(self.store, context, self.region, stopping=True) as inputs:
            # An operator's stop (`venice rollout abort`) takes this decision's abort or rollback way, so the grid
            # shows it; any other stop of the push is raised as it was recorded.
            decision = inputs.rollout.operator_decision()
            if decision is None:
                inputs.rollout.ensure_not_stopped(cleared=cleared(context))
                decision = self.step.run(inputs)
        return PokeReturnValue(is_done=decision is not None, xcom_value=decision.to_json() if decision else None)

    def execute(self, context: Any) -> dict[str, str]:
        decided: dict[str, str] = super().execute(context)
        # Branching ends the task before Airflow keeps its return value: the stops and `create_version` read it.
        context["ti"].xcom_push(key="return_value", value=decided)
        decision = Decision.from_json(decided)
        if decision.stops:
            way = f"{self.task_id}_{decision.outcome.value.lower()}"
            # (An operator's ROLLBACK at a step whose hooks cannot roll back takes its abort's way: applied the same.)
            self.do_branch(context, way if way in self.downstream_task_ids else f"{self.task_id}_abort")
        else:
            self.do_branch(
                context, sorted(self.downstream_task_ids - {f"{self.task_id}_abort", f"{self.task_id}_rollback"})
            )
        return decided
