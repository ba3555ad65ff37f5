"""The rollout DAG: `rollout.steps.STEPS` rendered as Airflow tasks, one store per DAG.

- An ACTION is a task; a CONDITION (a region's ingestion) a sensor; the Spark push a `SparkSubmitOperator`.
- A DECISION is a sensor in reschedule mode that asks the hooks at each poke (WAIT = poke again after
  `wait.interval.seconds`, no worker slot held, for as long as it is answered; past a `wait.max.seconds` an operator
  set, the poke itself answers ABORT) and is
  its own branch (`DecisionSensor`): it takes the next step on PROCEED, or the step's `<step>_abort` /
  `<step>_rollback` task, which applies the stop and fails the run. The grid shows which way each rollout went.
- Each region is a task group: `admitted` branches past a region that version creation left out (to
  `not_admitted`), and `region_done` joins both ways, so the next region starts after either.
- The Da Vinci ingestion gate is asked for every region at version creation; a region it left WAITing has its
  gate sensor, which runs beside the rest and holds that region's Da Vinci swap.

Deliberate stops (ABORT, ROLLBACK, a WAIT past its maximum, input the push job refuses) fail for good
(AirflowFailException). A step that fails on its own (a broker briefly unreachable, a lost Spark executor,
Airflow's stale-event race on reschedule sensors) is retried `rollout.step.retries` times: every step can run again.
A step that fails keeps why as its XCom `failure`, which `venice rollout status` and `venice push` show (a run that
failed before a version existed has no version to say it).

The package: `factory` (the DAG built from the step list), `operators` (the swap approval, the push job), `sensors`
(the decision), `task_inputs` (what a step works on in its task), `callbacks` (a failed run ends its push); how any
of them fails on a VeniceError is `venice_plugin.error_policy`.
"""

from __future__ import annotations

from venice_plugin.rollout_dag.callbacks import short_error
from venice_plugin.rollout_dag.factory import build_rollout_dag
from venice_plugin.rollout_dag.operators import PushJobOperator, SwapApprovalOperator
from venice_plugin.rollout_dag.sensors import DecisionSensor

__all__ = ["DecisionSensor", "PushJobOperator", "SwapApprovalOperator", "build_rollout_dag", "short_error"]
