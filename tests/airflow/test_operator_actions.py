"""What operators do to a rollout from Airflow, through Airflow's REST API as its UI calls it, while `venice push`
follows the run: a run marked failed or success by hand, `venice rollout abort`, a deleted run, a task or a whole run
cleared long after its push ended, a paused DAG and a trigger form that nothing reads. A file of its own: its
Airflow runs beside the two other files' on the third test worker."""

from __future__ import annotations

import getpass
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.support.airflow_runs import Operator, read_line, wait_for_step
from tests.support.inputs import expected_records
from tests.support.jobs import RecordsJob
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import wait_for
from venice_core.controller import stores, versions
from venice_core.orchestration.airflow.api import AirflowRefused
from venice_core.rollout.names import rollout_dag_id

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def _held_at_dc1(env: PlatformEnv, store: str, data: Path) -> tuple[subprocess.Popen[str], str]:
    """`venice push` of `data` through Airflow, held at dc-1's pre swap (the store's hook answers WAIT there): the push,
    and its run."""
    push = env.venice_background("push", store, "--input", str(data))
    run_id = read_line(push, "triggered ").split()[-1]
    wait_for_step(env, store, "dc_1.pre_swap", "up_for_reschedule", push)
    return push, run_id


def _store_held_at_dc1(env: PlatformEnv, prefix: str, tmp_path: Path) -> str:
    """A store whose version 1 is written directly, and whose hook answers WAIT at dc-1's pre swap from then on."""
    store = env.create_user_store(prefix)
    env.push(store, RecordsJob(expected_records(generate(tmp_path / "v1", 40, files=1))))
    env.cli("store", "update", store, "--hook-config", "answer.pre_store_version_swap.dc-1=WAIT", check=True)
    return store


@pytest.mark.timeout(1200)  # two rollouts held at dc-1: minutes each beside the rest of the suite
def test_a_run_marked_failed_or_success_by_hand_ends_its_push_at_once(airflow_env: PlatformEnv, tmp_path: Path) -> None:
    """An operator marks a rollout run failed through Airflow's REST API (the UI's call) while `venice push` follows
    it, held at dc-1's pre swap: the push stops at once with one line saying what the operator did, the version is
    over where it got to (dc-0 keeps it) and the store takes the next push, whose run an operator marks success by
    hand at the same place: said as such, not taken for a rollout that went everywhere."""
    env = airflow_env
    store = _store_held_at_dc1(env, "afmark", tmp_path)
    operator = Operator(env, store)
    for version, state in ((2, "failed"), (3, "success")):
        push, run_id = _held_at_dc1(env, store, generate(tmp_path / f"v{version}", 40, files=1))
        assert env.serving(store)["dc-0"] == version
        operator.mark(run_id, state)
        out, err = push.communicate(timeout=120)
        assert push.returncode == 3, out + err
        said = rf"rollout run {re.escape(run_id)} was marked {state} in Airflow by an operator"
        assert re.fullmatch(rf"error: {said}.*; version {version} is PARTIALLY_ONLINE\n", err), err
        assert env.serving(store) == {"dc-0": version, "dc-1": 1, "dc-2": 1}
        assert versions.version_in_flight(env.meta, store) is None


def test_an_abort_a_deleted_run_and_clears_long_after_keep_the_store_consistent(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """`venice rollout abort --rollback` on a run held at dc-1's pre swap: every region goes back at once and the run
    ends taking dc-1's pre swap rollback way, shown in the grid; a run queued behind it, which an operator deletes,
    is said deleted by the push that follows it. Then, long after, an operator clears the rolled-back run's dc-0 swap,
    then the whole run: neither swaps or pushes anything again (no older version over a newer one), each saying
    why."""
    env = airflow_env
    store = _store_held_at_dc1(env, "afabort", tmp_path)
    operator = Operator(env, store)
    push, run_id = _held_at_dc1(env, store, generate(tmp_path / "v2", 40, files=1))
    queued = env.venice_background("push", store, "--input", str(generate(tmp_path / "v3", 40, files=1)))
    queued_run = read_line(queued, "triggered ").split()[-1]
    operator.delete(queued_run)
    out, err = queued.communicate(timeout=120)
    assert (queued.returncode, err) == (3, f"error: rollout run {queued_run} was deleted in Airflow by an operator\n")
    aborted = env.venice("rollout", "abort", store, "--rollback", timeout=300)
    assert aborted.returncode == 0, aborted.stdout + aborted.stderr
    assert f"version 2 is ROLLED_BACK\nrun {run_id} ended at dc_1.pre_swap_rollback\n" in aborted.stdout
    assert env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    out, err = push.communicate(timeout=120)
    assert push.returncode == 3 and "rolled back by an operator" in err and "dc_1.pre_swap_rollback" in err, err

    refusal = (
        f"run {run_id} was cleared in Airflow after its push ended (rolled back by an operator ({getpass.getuser()}: "
        "`venice rollout abort --rollback`)): a rollout run pushes once; to push again, trigger a new run"
    )
    operator.clear_task(run_id, "dc_0.server_swap")
    assert operator.ended(run_id) == "failed"
    assert operator.failure(run_id, "dc_0.server_swap") == refusal
    operator.clear_run(run_id)
    assert operator.ended(run_id) == "failed"
    assert operator.task_state(run_id, "start_of_push_job") == "failed"
    assert operator.failure(run_id, "start_of_push_job") == refusal
    assert env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    assert versions.version_in_flight(env.meta, store) is None
    assert stores.describe_store(env.meta, store).largest_used_version == 2


def test_a_paused_dag_is_named_and_a_wrong_trigger_form_creates_nothing(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """The store's DAG paused: `venice push` names it at once and triggers nothing. The trigger form (Airflow's REST
    API, as the UI posts it) with a wrong param is refused by Airflow; one with a conf nothing reads fails at its
    first step, creating nothing."""
    env = airflow_env
    store = f"afpause_{uuid.uuid4().hex[:8]}"
    schemas = ("--key-schema", str(SCHEMAS / "user_key.avsc"), "--value-schema", str(SCHEMAS / "user_value_v1.avsc"))
    env.cli("store", "create", store, *schemas, check=True)  # writes the store's DAG file
    operator = Operator(env, store)
    data = generate(tmp_path / "in", 20, files=1)
    wait_for("Airflow to have the store's DAG", lambda: operator.api.has_dag(operator.dag), timeout=300, interval=1)
    runs = operator.runs()
    operator.pause(True)
    try:
        paused = env.venice("push", store, "--input", str(data))
    finally:
        operator.pause(False)
    assert paused.returncode != 0 and paused.stderr == (
        f"error: the DAG {rollout_dag_id(store)} is paused in Airflow: nothing was triggered; unpause it (the Airflow "
        f"UI's toggle, or `venice airflow dags unpause {rollout_dag_id(store)}`)\n"
    )
    assert operator.runs() == runs

    with pytest.raises(AirflowRefused) as refused:
        operator.trigger({"source": "ftp"})
    assert refused.value.status == 400 and "ftp" in str(refused.value)
    bad = operator.trigger({"input": str(data), "conf": {"allow.duplicat.key": "true"}})
    assert operator.ended(bad) == "failed"
    assert operator.failure(bad, "start_of_push_job") == (
        "unknown push conf 'allow.duplicat.key' (did you mean 'allow.duplicate.key'?)"
    )
    assert stores.describe_store(env.meta, store).largest_used_version == 0
