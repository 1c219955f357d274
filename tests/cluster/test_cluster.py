"""Measurement on a real local multi-node Ray cluster (ray.cluster_utils.Cluster).

One cluster per module, small: a head that measures nothing, two nodes of this machine's target
and one of another target, 1 CPU and an 80 MB object store each. conftest.py keeps Ray on the
loopback address.
"""
from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

import autotune  # noqa: E402
from autotune.cluster import ClusterError, ClusterMeasurer, target_resource  # noqa: E402
from autotune.cluster.measurer import NODE_ERROR  # noqa: E402
from autotune.measure import MeasureOptions  # noqa: E402
from autotune.target import Target  # noqa: E402
from autotune.testing import legal_configs  # noqa: E402
from tuning_db import TuningDB  # noqa: E402

pytestmark = pytest.mark.ray
STORE = 80 * 2**20
OPTIONS = MeasureOptions(repeat=2, min_repeat_ms=1.0, build_workers=1)


def _task(cores: int | None = None, k: int = 7) -> autotune.Task:
    """This machine's target, or (cores=) one of another machine that has that many cores."""
    task = autotune.create_task("matmul", M=13, N=11, K=k)
    if cores is None:
        return task
    other = Target.from_key(re.sub(r"-cores=\d+", f"-cores={cores}", task.target_key))
    return autotune.create_task("matmul", M=13, N=11, K=k, target=other)


@pytest.fixture(scope="module")
def cluster():
    host, other = (target_resource(t.target_key) for t in (_task(), _task(cores=64)))
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
    nodes = {name: c.add_node(num_cpus=1, object_store_memory=STORE, resources=res)
             for name, res in (("a", {host: 1}), ("b", {host: 1}), ("other", {other: 1}))}
    c.wait_for_nodes()
    ray.init(address=c.address, namespace="autotune", log_to_driver=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def _node_ids(nodes: dict) -> dict[str, str]:
    return {name: n.node_id for name, n in nodes.items()}


def _records(db: TuningDB, task: autotune.Task) -> dict[int, str]:
    return {r.config_index: r.error_kind for r in db.records(task.workload_key, task.target_key)}


def test_cluster_tune_gives_the_records_of_a_local_tune(cluster, tmp_path):
    task = _task()
    local, remote = TuningDB(str(tmp_path / "local.db")), TuningDB(str(tmp_path / "cluster.db"))
    autotune.tune(task, trials=10, tuner="random", db=local, seed=3, batch_size=4, measure_option=OPTIONS)
    res = autotune.tune(task, trials=10, tuner="random", db=remote, seed=3, batch_size=4, measure_option=OPTIONS,
                        cluster="auto")
    assert _records(remote, task) == _records(local, task)
    assert set(_records(remote, task).values()) == {"ok"}           # built, run and checked against numpy
    assert res.trials == 10 and res.best_config is not None


def test_candidates_run_only_on_nodes_of_their_target(cluster):
    _, nodes = cluster
    ids = _node_ids(nodes)
    task = _task()
    other = _task(cores=64)
    with ClusterMeasurer("auto", OPTIONS) as m:
        results = m.measure(task, legal_configs(task, 5))
        assert all(r.ok for r in results)
        assert set(m.measured_on) <= {ids["a"], ids["b"]} and sum(m.measured_on.values()) == len(results)
        m.measured_on.clear()
        results = m.measure(other, legal_configs(other, 2))
        assert all(r.ok for r in results)
        assert dict(m.measured_on) == {ids["other"]: len(results)}


def test_a_task_whose_target_no_node_has_is_refused(cluster, tmp_path):
    task = _task(cores=3)
    with pytest.raises(ClusterError, match="no node of the cluster measures target"):
        autotune.tune(task, trials=2, tuner="random", db=str(tmp_path / "t.db"), cluster="auto")


def test_a_node_killed_mid_tune_loses_nothing(cluster, tmp_path):
    c, nodes = cluster
    task = autotune.create_task("matmul", M=17, N=13, K=7)
    db = TuningDB(str(tmp_path / "kill.db"))
    killed = []

    def kill_b(progress):
        if not killed:
            c.remove_node(nodes["b"], allow_graceful=False)
            killed.append(progress.trials_done)

    res = autotune.tune(task, trials=12, tuner="random", db=db, seed=1, batch_size=3, measure_option=OPTIONS,
                        cluster="auto", callbacks=[kill_b])
    records = db.records(task.workload_key, task.target_key)
    assert killed and len(records) == res.trials == 12
    assert {r.config_index for r in records} == {i for i, _ in res.history}
    for r in records:          # measured on node a, or a node error after a retry: never lost
        assert r.error_kind == "ok" or r.error_msg.startswith(NODE_ERROR), r.error_msg
    nodes["b"] = c.add_node(num_cpus=1, object_store_memory=STORE,
                            resources={target_resource(task.target_key): 1})


def test_a_hung_actor_is_replaced(cluster):
    task = _task()
    with ClusterMeasurer("auto", OPTIONS, actor_timeout_s=8.0) as m:
        first = m.measure(task, [0])
        assert first[0].ok
        stopped = [a.pid for a in m.runners if a.pid]
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)       # every actor hangs: the candidate outlives its deadline
        t0 = time.monotonic()
        again = m.measure(task, legal_configs(task, 2)[1:])
        assert time.monotonic() - t0 < 60
        assert all(r.ok or r.error_msg.startswith(NODE_ERROR) for r in again)
        assert stopped and not {a.pid for a in m.runners} & set(stopped)


def test_tune_cli_measures_on_the_cluster(cluster, tmp_path, capsys):
    from autotune.cli import run

    db = tmp_path / "cli.db"
    assert run(["tune", "matmul", "--shape", "M=13,N=11,K=3", "--trials", "3", "--tuner", "random",
                "--db", str(db), "--cluster", "auto", "--json"]) == 0
    task = autotune.create_task("matmul", M=13, N=11, K=3)
    records = TuningDB(str(db)).records(task.workload_key, task.target_key)
    summary = json.loads(capsys.readouterr().out)
    assert len(records) == summary["trials"] == 3 and summary["best_config"] is not None


@pytest.mark.parametrize("address", ["127.0.0.1:1", "ray://127.0.0.1:1", "no-port", "auto"])
def test_worker_refuses_a_bad_address_in_one_line(address, capsys):
    from autotune.cli import run

    assert run(["worker", "--cluster", address]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and address in err
