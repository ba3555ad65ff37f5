"""The hosts of the hosts profile (`hosts.enabled`): a Linux network namespace per process, each joined to one bridge
by a veth pair, with iproute2's `ip`, as root.

- The bridge holds the gateway's address (`<subnet>.0.1`): the machine's own namespace (the CLI, the tests, a
  browser) reaches every host through it.
- A host's namespace has its loopback (127.0.0.1 is that host alone) and `eth0`, its end of the link, with its
  address in the subnet and no default route: a packet for anywhere else fails inside the host.
- The machine's namespace holds an `unreachable` route for the whole subnet, at a metric past the bridge's own
  route: when the bridge is down (its route gone with it), a packet for a host fails here rather than leaving by the
  default route. Nothing deletes that route to cut a host: a host is cut by setting its `eth0` down inside its
  namespace (`cut`), and joined again by setting it up (`rejoin`).
- `remove` deletes every namespace, link and route made for the bridge, and the bridge."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from venice_core.config import GATEWAY, ClusterConfig, HostsSettings
from venice_core.errors import ComponentError
from venice_core.host.programs import require_program

NETNS_DIR = Path("/run/netns")
HOST_LINK = "eth0"  # a host's end of its link, inside its namespace
UNREACHABLE_METRIC = 4242  # past the bridge's route (metric 0): used only while that route is gone
MARK = "venice-hosts"  # the alias of every link made here (with the subnet): nothing without it is touched


@dataclass(frozen=True)
class HostLink:
    """A host as the machine sees it: its name, address, namespace and link (the machine's end)."""

    name: str
    address: str
    namespace: str
    link: str


def require_root() -> None:
    if os.geteuid() != 0:
        raise ComponentError(
            "the hosts profile makes a network namespace per process, which needs root: run it as root "
            "(or use --profile cluster, every process on this machine's loopback)"
        )


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    ip = require_program("ip", "iproute2 (Debian: apt-get install iproute2)")
    result = subprocess.run([ip, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise ComponentError(f"`ip {' '.join(args)}` failed: {(result.stderr or result.stdout).strip()}")
    return result


def host_link(hosts: HostsSettings, name: str) -> HostLink:
    namespace = hosts.namespace(name)
    if namespace is None:
        raise ComponentError(f"'{name}' is not a host of its own (hosts.enabled is false)")
    return HostLink(name, hosts.address(name), namespace, hosts.link(name))


def _exists(namespace: str) -> bool:
    return (NETNS_DIR / namespace).exists()


def _link(name: str, namespace: str | None = None) -> dict[str, object] | None:
    """`ip -j -d link show` of a link (None: there is none of that name)."""
    where = ("-n", namespace) if namespace else ()
    shown = _ip(*where, "-j", "-d", "link", "show", name, check=False)
    found = json.loads(shown.stdout) if shown.returncode == 0 and shown.stdout.strip() else []
    return found[0] if found else None


def _mark(hosts: HostsSettings) -> str:
    return f"{MARK} {hosts.subnet}"


def _ours(link: dict[str, object] | None, hosts: HostsSettings) -> bool:
    return link is not None and link.get("ifalias") == _mark(hosts)


def _check_subnet_free(hosts: HostsSettings) -> None:
    """No route or address of the machine's already falls in the subnet (a LAN's, a VPN's): a host's packets would
    follow it out of the machine."""
    routes = json.loads(_ip("-j", "-4", "route", "show", "root", hosts.subnet).stdout or "[]")
    theirs = [r["dst"] for r in routes if r.get("metric") != UNREACHABLE_METRIC and r.get("dev") != hosts.bridge]
    addresses = json.loads(_ip("-j", "-4", "addr", "show", "to", hosts.subnet).stdout or "[]")
    theirs += [f"{a['ifname']}'s address" for a in addresses if a.get("ifname") != hosts.bridge]
    if theirs:
        raise ComponentError(
            f"hosts.subnet {hosts.subnet} is in use on this machine ({', '.join(theirs)}): choose another private /16"
        )


def _bridge(hosts: HostsSettings) -> None:
    """The bridge, up, with the gateway's address; the subnet's unreachable route beside its own. A link of the
    bridge's name that this module did not make (a container engine's, say) is refused, never reused."""
    bridge = _link(hosts.bridge)
    if bridge is None:
        _check_subnet_free(hosts)
        _ip("link", "add", hosts.bridge, "type", "bridge")
        _ip("link", "set", hosts.bridge, "alias", _mark(hosts))
    elif not _ours(bridge, hosts):
        raise ComponentError(
            f"a link named {hosts.bridge} exists and is not the platform's bridge for {hosts.subnet}: set hosts.bridge"
        )
    prefix = hosts.network.prefixlen
    addresses = _ip("-o", "-4", "addr", "show", "dev", hosts.bridge).stdout
    if f" {hosts.gateway}/{prefix} " not in addresses:
        _ip("addr", "add", f"{hosts.gateway}/{prefix}", "dev", hosts.bridge)
    _ip("link", "set", hosts.bridge, "up")
    _ip("route", "replace", "unreachable", hosts.subnet, "metric", str(UNREACHABLE_METRIC))


def _host(hosts: HostsSettings, name: str) -> HostLink:
    """The host's namespace and link (what is missing of them), its addresses set and its links up."""
    host = host_link(hosts, name)
    if not _exists(host.namespace):
        _ip("netns", "add", host.namespace)
    if _link(HOST_LINK, host.namespace) is None:
        left = _link(host.link)
        if left is not None:  # the machine's end, its peer gone with a namespace deleted by hand
            if not _ours(left, hosts):
                raise ComponentError(f"a link named {host.link} exists and is not the platform's: set hosts.bridge")
            _ip("link", "del", host.link)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", HOST_LINK, "netns", host.namespace)
        _ip("link", "set", host.link, "alias", _mark(hosts))
    _ip("link", "set", host.link, "master", hosts.bridge, "up")
    addresses = _ip("-n", host.namespace, "-o", "-4", "addr", "show", "dev", HOST_LINK).stdout
    if f" {host.address}/" not in addresses:
        _ip("-n", host.namespace, "addr", "add", f"{host.address}/{hosts.network.prefixlen}", "dev", HOST_LINK)
    _ip("-n", host.namespace, "link", "set", "lo", "up")
    _ip("-n", host.namespace, "link", "set", HOST_LINK, "up")
    return host


def create(config: ClusterConfig, names: Iterable[str]) -> list[HostLink]:
    """The bridge and a host per name (those missing: a second `venice up` keeps what runs)."""
    require_root()
    hosts = config.hosts
    _bridge(hosts)
    return [_host(hosts, name) for name in names if name != GATEWAY]


def namespaces(config: ClusterConfig) -> list[str]:
    """The namespaces made for the config's bridge (whatever hosts the config has now)."""
    prefix = f"{config.hosts.bridge}-"
    return sorted(p.name for p in NETNS_DIR.glob(f"{prefix}*")) if NETNS_DIR.is_dir() else []


def links() -> list[str]:
    """The names of the links of the machine's namespace (a veth's without its `@peer`)."""
    listed = _ip("-o", "link", "show", check=False).stdout.splitlines()
    return [line.split(":", 2)[1].strip().split("@", 1)[0] for line in listed if line.count(":") >= 2]


def remove(config: ClusterConfig) -> list[str]:
    """Every namespace made for the config's bridge, every link this module made for it (marked with its subnet), the
    subnet's unreachable route, and the bridge: what was removed."""
    require_root()
    hosts = config.hosts
    removed = []
    for namespace in namespaces(config):
        _ip("netns", "del", namespace)  # its eth0 goes with it, and the veth's other end with that
        removed.append(namespace)
    prefix = f"{hosts.bridge[:8]}-"
    for name in links():
        if name.startswith(prefix) and _ours(_link(name), hosts):
            _ip("link", "del", name, check=False)
            removed.append(name)
    if _ours(_link(hosts.bridge), hosts):
        _ip("link", "del", hosts.bridge)
        removed.append(hosts.bridge)
    route = ("route", "del", "unreachable", hosts.subnet, "metric", str(UNREACHABLE_METRIC))
    if _ip(*route, check=False).returncode == 0:
        removed.append(f"unreachable {hosts.subnet}")
    return removed


def cut(config: ClusterConfig, name: str) -> None:
    """Cut a host off the network (its link down inside its namespace): its processes keep running."""
    _ip("-n", host_link(config.hosts, name).namespace, "link", "set", HOST_LINK, "down")


def rejoin(config: ClusterConfig, name: str) -> None:
    _ip("-n", host_link(config.hosts, name).namespace, "link", "set", HOST_LINK, "up")


def is_cut(config: ClusterConfig, name: str) -> bool:
    """Whether the host's link is down (administratively: `cut`)."""
    link = _link(HOST_LINK, host_link(config.hosts, name).namespace)
    return link is None or "UP" not in link.get("flags", [])  # type: ignore[operator]  # ip's JSON: a list of flags


def route_to(address: str) -> str:
    """`ip route get` for an address, as the machine's namespace answers it (its error when there is no route)."""
    result = _ip("route", "get", address, check=False)
    return (result.stdout if result.returncode == 0 else result.stderr).strip()
