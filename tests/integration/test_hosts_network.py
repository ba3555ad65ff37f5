"""The hosts profile's network (issue 44, points 1 and 3), on real namespaces, links and a bridge: a process started on
a host runs in its namespace (127.0.0.1 there is that host alone) and is reached at its host's address; a host is cut
by its link going down inside its namespace; with the bridge down a packet for the subnet fails here (the subnet's
`unreachable` route) instead of leaving by the default route; nothing of it is left after `network.remove`."""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from venice_core.config import ClusterConfig, HostsSettings
from venice_core.embedded import network
from venice_core.embedded.process import ManagedProcess, host_of
from venice_core.errors import ComponentError
from venice_core.utils.waiting import poll_until

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]
PORT = 18555
HOSTS = ("kafka-0", "server-dc-1.2")
# A server that answers its host's name: which namespace it runs in, as its environment says.
SERVER = """
import http.server, os, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.environ.get("VENICE_HOST", "").encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
"""


def _subnet() -> tuple[str, str]:
    """A subnet and bridge of this test worker's own (xdist workers run side by side)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    return f"10.{230 + worker}.0.0/16", f"vnt{worker}"


@pytest.fixture
def config(tmp_path: Path) -> Iterator[ClusterConfig]:
    base = make_platform_env(tmp_path / "home").config
    subnet, bridge = _subnet()
    hosts = HostsSettings(enabled=True, subnet=subnet, bridge=bridge, regions=base.region_names)
    config = dataclasses.replace(base, hosts=hosts)
    network.remove(config)  # what a killed run of this test left
    try:
        yield config
    finally:
        network.remove(config)


def _answer(address: str, port: int = PORT, timeout: float = 1.0) -> str | None:
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return sock.recv(4096).decode().rpartition("\r\n\r\n")[2]
    except OSError:
        return None


def _answer_inside(namespace: str) -> str | None:
    """What the host's own 127.0.0.1 answers, asked from inside its namespace."""
    ask = f"import socket; s = socket.create_connection(('127.0.0.1', {PORT}), 1)"
    ask += "; s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')"
    ask += "; print(s.recv(4096).decode().rpartition('\\r\\n\\r\\n')[2])"
    command = ["nsenter", f"--net=/run/netns/{namespace}", "--", sys.executable, "-c", ask]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    return result.stdout.strip() if result.returncode == 0 else None


def _serve(config: ClusterConfig, host: str, bind: str, name: str) -> ManagedProcess:
    proc = ManagedProcess(name, config.run_dir)
    proc.start([sys.executable, "-c", SERVER, bind, str(PORT)], host=host_of(config, host))
    return proc


def test_hosts_are_namespaces_joined_by_the_bridge_cut_by_their_link_and_removed_whole(config: ClusterConfig) -> None:
    made = network.create(config, HOSTS)
    assert [h.address for h in made] == [config.hosts.address(h) for h in HOSTS]
    kafka, server = made
    assert kafka.address.endswith(".2.1") and server.address.endswith(".11.3")
    on_host = _serve(config, "kafka-0", kafka.address, "on-host")
    on_its_loopback = _serve(config, "server-dc-1.2", "127.0.0.1", "on-loopback")
    try:
        # Reached at its host's address through the bridge; it runs in that host (told its name).
        assert poll_until(lambda: _answer(kafka.address) == "kafka-0", timeout=20, interval=0.1)
        # 127.0.0.1 inside a host is that host alone: it answers there, and neither this machine nor another host
        # reaches it.
        assert poll_until(lambda: _answer_inside(server.namespace) == "server-dc-1.2", timeout=20, interval=0.2)
        assert _answer("127.0.0.1") is None
        assert _answer(server.address) is None
        # A host has no route but the subnet's: nothing it sends can leave the machine.
        inside = os.popen(f"ip -n {server.namespace} route get 192.0.2.1 2>&1").read()
        assert "unreachable" in inside.lower(), inside

        network.cut(config, "kafka-0")  # its process keeps running, off the network
        assert network.is_cut(config, "kafka-0")
        assert _answer(kafka.address, timeout=2.0) is None
        assert on_host.pid() is not None
        network.rejoin(config, "kafka-0")
        assert poll_until(lambda: _answer(kafka.address) == "kafka-0", timeout=20, interval=0.2)

        # The bridge down: a packet for a host fails here, by the subnet's unreachable route, not by the default one.
        assert "unreachable" not in network.route_to(kafka.address)
        os.system(f"ip link set {config.hosts.bridge} down")
        try:
            answer = network.route_to(kafka.address)
            assert "unreachable" in answer.lower() or "no route to host" in answer.lower(), answer
            assert _answer(kafka.address, timeout=2.0) is None
        finally:
            os.system(f"ip link set {config.hosts.bridge} up")
    finally:
        on_host.stop(timeout=5)
        on_its_loopback.stop(timeout=5)

    network.remove(config)
    assert network.namespaces(config) == []
    assert [name for name in network.links() if name.startswith(config.hosts.bridge)] == []
    assert f"unreachable {config.hosts.subnet}" not in os.popen("ip route show").read()
    answer = network.route_to(kafka.address)  # nothing of the subnet is left: the default route's, as before
    assert "10." + config.hosts.subnet.split(".")[1] not in os.popen("ip route show").read(), answer


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux's setpriv runs the command as another user")
def test_the_hosts_profile_without_root_says_so_in_one_line() -> None:
    """`venice up --profile hosts` as a user who cannot make namespaces: one line naming what is needed, exit 1, and
    no process started."""
    with tempfile.TemporaryDirectory(prefix="venice-nonroot-") as folder:  # pytest's tmp_path is root's alone
        Path(folder).chmod(0o755)
        home = Path(folder) / "home"
        home.mkdir()
        os.chown(home, 65534, 65534)
        _up_as_nobody(home)


def _up_as_nobody(home: Path) -> None:
    venice = Path(sys.executable).parent / "venice"
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"}
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(venice), "--profile", "hosts", "up"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: the hosts profile makes a network namespace per process, which needs root: run it as root (or use "
        "--profile cluster, every process on this machine's loopback)"
    ]
    assert not list((home / ".venice-hosts" / "run").glob("*.pid"))


def test_a_bridge_name_or_a_subnet_the_machine_already_uses_is_refused_and_left_as_it_was(
    config: ClusterConfig,
) -> None:
    """A link of the bridge's name that the platform did not make (a container engine's, say) is neither reused nor
    deleted; a subnet the machine already routes is refused before anything is made."""
    bridge, worker = config.hosts.bridge, config.hosts.bridge.removeprefix("vnt")
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)  # a bridge, not ours
    try:
        with pytest.raises(ComponentError, match=f"a link named {bridge} exists and is not the platform's bridge"):
            network.create(config, HOSTS)
        network.remove(config)
        assert bridge in network.links() and network.namespaces(config) == []
    finally:
        subprocess.run(["ip", "link", "del", bridge], check=True)
    theirs, inside = f"vntd{worker}", config.hosts.address("kafka-0").rpartition(".")[0] + ".200/24"
    subprocess.run(["ip", "link", "add", theirs, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", inside, "dev", theirs], check=True)
        subprocess.run(["ip", "link", "set", theirs, "up"], check=True)
        with pytest.raises(ComponentError, match=f"hosts.subnet {config.hosts.subnet} is in use on this machine"):
            network.create(config, HOSTS)
        assert bridge not in network.links() and network.namespaces(config) == []
    finally:
        subprocess.run(["ip", "link", "del", theirs], check=True)
