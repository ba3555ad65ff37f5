"""The embedded Kafka's nodes without starting one: a single broker as it always was, a KRaft cluster of three
(static quorum, internal topics replicated, the topics' defaults from `kafka.topic.*`), and the platform's topics
created with the regions' replication settings."""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path

import pytest

from tests.support.topics import InMemoryTopics
from venice_core.config import ClusterConfig, load_config
from venice_core.controller import stores, versions
from venice_core.embedded import kafka
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ConfigError
from venice_core.meta import MetadataStore

CLUSTER = """\
kafka.embedded.brokers=3
kafka.embedded.port=9492
kafka.embedded.controller.port=9592
kafka.topic.replication.factor=3
kafka.topic.min.insync.replicas=2
"""


def _config(tmp_path: Path, text: str = "") -> ClusterConfig:
    path = tmp_path / "venice.properties"
    path.write_text(f"data.dir={tmp_path / 'home'}\n{text}")
    return load_config({"VENICE_CONFIG": str(path)})


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_a_single_broker_is_configured_as_it_always_was(tmp_path: Path) -> None:
    config = _config(tmp_path)
    home = config.data_dir
    assert kafka.server_properties(config) == (
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
        "metadata.max.idle.interval.ms=0\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        "advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
        f"log.dirs={home / 'kafka' / 'data'}\n"
        "num.partitions=1\n"
        "num.network.threads=2\n"
        "num.io.threads=2\n"
        "offsets.topic.replication.factor=1\n"
        "offsets.topic.num.partitions=4\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "share.coordinator.state.topic.replication.factor=1\n"
        "share.coordinator.state.topic.min.isr=1\n"
        "group.initial.rebalance.delay.ms=0\n"
        "log.retention.ms=-1\n"
        "auto.create.topics.enable=false\n"
    )
    assert kafka.processes(config) == [ManagedProcess("kafka", home / "run")]
    assert kafka.process(config).pid_file == home / "run" / "kafka.pid"
    assert (kafka.name(config), kafka.node_dir(config), kafka.address(config)) == (
        "kafka",
        home / "kafka",
        "127.0.0.1:9092",
    )
    assert "--standalone" in kafka._format_command(["java"], Path("p"), "id", standalone=True)


def test_three_nodes_form_one_quorum_each_on_ports_and_a_folder_of_its_own(tmp_path: Path) -> None:
    config = _config(tmp_path, CLUSTER)
    home = config.data_dir
    assert config.kafka.bootstrap == "127.0.0.1:9492,127.0.0.1:9493,127.0.0.1:9494"
    nodes = [_properties(kafka.server_properties(config, n)) for n in range(3)]
    for n, props in enumerate(nodes):
        assert props["node.id"] == str(n + 1)
        assert props["controller.quorum.voters"] == "1@127.0.0.1:9592,2@127.0.0.1:9593,3@127.0.0.1:9594"
        assert "controller.quorum.bootstrap.servers" not in props
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{9492 + n},CONTROLLER://127.0.0.1:{9592 + n}"
        assert props["advertised.listeners"] == props["listeners"]
        assert props["log.dirs"] == str(home / "kafka" / f"node-{n}" / "data")
        assert props["process.roles"] == "broker,controller"
        # Internal topics on three replicas, two in sync; the platform's topics' defaults from kafka.topic.*.
        for topic in ("offsets.topic", "transaction.state.log", "share.coordinator.state.topic"):
            assert props[f"{topic}.replication.factor"] == "3"
        assert props["transaction.state.log.min.isr"] == props["share.coordinator.state.topic.min.isr"] == "2"
        assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("3", "2")
        assert (props["log.retention.ms"], props["auto.create.topics.enable"]) == ("-1", "false")
    assert [p.name for p in kafka.processes(config)] == ["kafka-0", "kafka-1", "kafka-2"]
    assert kafka.process(config, 2).log_file == home / "run" / "kafka-2.log"
    assert kafka.node_dir(config, 1) == home / "kafka" / "node-1"
    assert kafka.address(config, 2) == "127.0.0.1:9494"
    assert "--standalone" not in kafka._format_command(["java"], Path("p"), "id", standalone=False)
    with pytest.raises(ConfigError, match=r"node 3 is out of range 0..2"):
        kafka.process(config, 3)


def test_two_nodes_replicate_internal_topics_twice(tmp_path: Path) -> None:
    props = _properties(kafka.server_properties(_config(tmp_path, "kafka.embedded.brokers=2\n"), 1))
    assert props["offsets.topic.replication.factor"] == "2" and props["transaction.state.log.min.isr"] == "2"
    assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("1", "1")


def test_every_node_shares_the_cluster_id_kept_beside_them(tmp_path: Path) -> None:
    config = _config(tmp_path, CLUSTER)
    first = kafka._cluster_id(config)
    assert (config.data_dir / "kafka" / "cluster.id").read_text().strip() == first
    assert kafka._cluster_id(config) == first
    (config.data_dir / "kafka" / "cluster.id").unlink()  # lost: taken back from a formatted node
    meta = config.data_dir / "kafka" / "node-1" / "data" / "meta.properties"
    meta.parent.mkdir(parents=True)
    meta.write_text("version=1\ncluster.id=abcdefghijklmnopqrstuv\nnode.id=2\n")
    assert kafka._cluster_id(config) == "abcdefghijklmnopqrstuv"


def test_nodes_the_config_no_longer_has_are_found(tmp_path: Path) -> None:
    config = _config(tmp_path, CLUSTER)
    config.run_dir.mkdir(parents=True)
    for name in ("kafka", "kafka-1", "kafka-5", "kafka-extra", "server-dc-0"):
        (config.run_dir / f"{name}.pid").write_text(str(os.getpid()))  # "running": this process
    assert sorted(p.name for p in kafka.unconfigured(config)) == ["kafka", "kafka-5"]


def test_the_platform_creates_its_topics_with_the_regions_replication(tmp_path: Path, meta: MetadataStore) -> None:
    config = _config(tmp_path, CLUSTER)
    assert {(r.replication_factor, r.min_insync_replicas) for r in config.regions} == {(3, 2)}
    config = dataclasses.replace(
        config,
        regions=tuple(dataclasses.replace(r, min_insync_replicas=1) if r.name == "dc-2" else r for r in config.regions),
    )
    topics = InMemoryTopics()
    store = f"rf_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, store, '"string"', '"string"', partitions=2)
    versions.create_version(meta, config, store, "job-1", topics=topics)
    stores.update_store(meta, config, store, hybrid_rewind_seconds=60, topics=topics)
    expected = {}
    for region in config.regions:
        replication = (3, 1 if region.name == "dc-2" else 2)
        expected[(region.kafka_bootstrap, region.real_time_topic(store))] = replication
        expected[(region.kafka_bootstrap, region.version_topic(store, 1))] = replication
    assert topics.replication == expected
