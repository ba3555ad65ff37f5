"""Where each process of the platform runs: one address for all (`127.0.0.1`, the embedded and cluster profiles), or,
with `hosts.enabled`, a host of its own per process (the hosts profile: a network namespace each, `embedded.network`),
at a fixed address of `hosts.subnet` chosen by its role, so that docker-compose.yaml can give its containers the same.

A host is named as the process `venice up` runs in it (`kafka-1`, `server-dc-0.2`, `airflow-scheduler`); the machine's
own namespace is the host `gateway` (the bridge's address: the CLI, the tests, a browser, a job submitted from the
command line). A process learns its own host from `$VENICE_HOST`, which the launcher sets."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass

from venice_core.errors import ConfigError

LOOPBACK = "127.0.0.1"
ENV_HOST = "VENICE_HOST"  # the host a process runs in (unset: the machine's own namespace)
GATEWAY = "gateway"

# (third octet, fourth octet) in the subnet, by role: a host keeps its address when others are added.
_FIXED: dict[str, tuple[int, int]] = {
    GATEWAY: (0, 1),
    "postgres": (1, 1),
    "redis": (1, 2),
    "kafka": (2, 1),
    "spark-master": (3, 1),
    "airflow-api-server": (4, 1),
    "airflow-scheduler": (4, 2),
    "airflow-dag-processor": (4, 3),
    "airflow-store-dag-processor": (4, 4),
    "airflow-triggerer": (4, 5),
}
_NUMBERED: tuple[tuple[re.Pattern[str], int, int], ...] = (  # pattern, third octet, first fourth octet
    (re.compile(r"^kafka-(\d+)$"), 2, 1),
    (re.compile(r"^spark-worker-(\d+)$"), 3, 11),
    (re.compile(r"^airflow-celery-worker-(\d+)$"), 4, 11),
    (re.compile(r"^intruder-(\d+)$"), 200, 1),  # hosts a test adds on the same bridge
)
_SERVER = re.compile(r"^server-(?P<region>[a-z0-9-]+?)(?:\.(?P<instance>\d+))?$")
FIRST_REGION_OCTET = 10  # region i's instances on <subnet>.(10 + i).(n + 1)


def server_host(region: str, instance: int = 0) -> str:
    """A region-server instance's process and host name: `server-<region>` for instance 0, `server-<region>.<n>`
    for the others."""
    return f"server-{region}" if instance == 0 else f"server-{region}.{instance}"


@dataclass(frozen=True)
class HostsSettings:
    """The hosts layout (`hosts.*`). Disabled, every host is `LOOPBACK` (or the address a component is told to bind:
    its own key's)."""

    enabled: bool
    subnet: str
    bridge: str
    regions: tuple[str, ...] = ()

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    def address(self, host: str) -> str:
        """The host's address: its role's place in the subnet (LOOPBACK when hosts are off)."""
        if not self.enabled:
            return LOOPBACK
        third, fourth = self._place(host)
        return str(self.network.network_address + third * 256 + fourth)

    def _place(self, host: str) -> tuple[int, int]:
        third, fourth = self._role_place(host)
        if not (0 <= third <= 255 and 1 <= fourth <= 254):  # one role's block, never another's
            raise ConfigError(f"host '{host}' is past its role's block of 254 addresses in the hosts layout")
        return third, fourth

    def _role_place(self, host: str) -> tuple[int, int]:
        if host in _FIXED:
            return _FIXED[host]
        for pattern, third, first in _NUMBERED:
            match = pattern.match(host)
            if match:
                return third, first + int(match.group(1))
        server = _SERVER.match(host)
        if server and server.group("region") in self.regions:
            index = self.regions.index(server.group("region"))
            return FIRST_REGION_OCTET + index, 1 + int(server.group("instance") or 0)
        raise ConfigError(f"no host '{host}' in the hosts layout (hosts.subnet {self.subnet})")

    @property
    def gateway(self) -> str:
        """The machine's own namespace on the bridge."""
        return self.address(GATEWAY)

    def namespace(self, host: str) -> str | None:
        """The network namespace the host's process runs in (None: the machine's own)."""
        return f"{self.bridge}-{host}" if self.enabled and host != GATEWAY else None

    def link(self, host: str) -> str:
        """The name of the machine's end of the host's link (a veth on the bridge), unique per bridge and short enough
        for Linux: the bridge's name and the host's place."""
        third, fourth = self._place(host)
        return f"{self.bridge[:8]}-{third:02x}{fourth:02x}"

    def local_address(self) -> str:
        """The address of the host this process runs on (`$VENICE_HOST`; the gateway in the machine's own
        namespace)."""
        return self.address(os.environ.get(ENV_HOST) or GATEWAY)

    def check(self, where: str, bridge_where: str) -> None:
        """The subnet (set at `where`) and the bridge's name (set at `bridge_where`): one error naming each."""
        try:
            network = self.network
        except ValueError as exc:
            raise ConfigError(f"{where}: hosts.subnet {self.subnet!r} is not a network: {exc}") from None
        if network.prefixlen != 16:
            raise ConfigError(f"{where}: hosts.subnet {self.subnet} is not a /16: the layout is one /16, no more")
        if not network.is_private:
            raise ConfigError(f"{where}: hosts.subnet {self.subnet} is not a private range")
        if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", self.bridge):
            raise ConfigError(f"{bridge_where}: hosts.bridge '{self.bridge}' must be 1-8 lower-case letters and digits")
