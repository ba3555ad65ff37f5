"""What every benchmark shares: a throwaway platform, a dataset, and a printed comparison."""

from __future__ import annotations

import os
import resource
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.sandbox import write_cluster_config, write_sandbox_config
from venice_core.config import ENV_CONFIG, ClusterConfig, load_config
from venice_core.embedded import network, platform
from venice_core.embedded.process import ManagedProcess
from venice_core.meta import MetadataStore
from venice_core.security import principals

SCHEMAS = Path(__file__).parents[1] / "examples" / "schemas"


# The hosts profile's layout for a benchmark (apart from a user's `make demo-hosts` on 10.213.0.0/16).
HOSTS_SANDBOX = {"hosts.enabled": "true", "hosts.subnet": "10.217.0.0/16", "hosts.bridge": "vnbhosts"}


@contextmanager
def sandbox_platform(
    extra: dict[str, str] | None = None, profile: str = "embedded"
) -> Iterator[tuple[ClusterConfig, MetadataStore, Path]]:
    """A platform of its own (`profile`: the embedded one, or the cluster profile on free ports, or that profile with
    a host per process on a subnet and bridge of the benchmarks' own: `hosts`, root only), up for the block."""
    if profile == "hosts":
        network.require_root()
        extra = {**HOSTS_SANDBOX, **(extra or {})}
    with tempfile.TemporaryDirectory(prefix="venice-bench-") as tmp:
        home = Path(tmp)
        home.chmod(0o755)  # the cluster profile's PostgreSQL runs as its own user, in a folder of this one
        write = write_cluster_config if profile in ("cluster", "hosts") else write_sandbox_config
        properties = write(home / "home", extra)
        os.environ[ENV_CONFIG] = str(properties)  # the processes the platform starts load the same config
        config = load_config()
        # A benchmark stopped with SIGTERM (`kill`, a timeout) unwinds like an interrupt: the platform goes down.
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm(os.getpid()))
        try:
            platform.up(config, report=lambda line: print(f"  {line}"))
            meta = MetadataStore(config.metadata_db_url)
            try:
                with principals.acting_as(config, principals.ADMIN):  # the benchmark drives the controller
                    yield config, meta, home
            finally:
                meta.dispose()
        finally:
            platform.down(config, report=lambda _line: None)
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(owner: int) -> Callable[[int, object], None]:
    """The handler: in `owner`, unwind (once: a second SIGTERM, as `timeout` sends to the group, must not cut the
    platform's stop short); in a child it forked (an echo server), just exit."""

    def handle(signum: int, _frame: object) -> None:
        if os.getpid() != owner:
            os._exit(128 + signum)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    return handle


def cpu_now(who: int = resource.RUSAGE_SELF) -> float:
    """CPU seconds of this process (or, with RUSAGE_CHILDREN, of its waited-for children) so far."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def running_pid(process: ManagedProcess) -> int:
    """The pid of a process of the platform that must be running (its CPU and memory are read from /proc)."""
    pid = process.pid()
    if pid is None:
        raise RuntimeError(f"{process.name} is not running")
    return pid


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a running process has used (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a running process, its reaped children's, and its descendants' still running."""
    from venice_core.embedded.process import members

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for member in members(pid):
        if member != pid:
            try:
                total += cpu_seconds(member)
            except OSError:  # ended meanwhile: its parent's reaped-children figures have it
                continue
    return total


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def report(title: str, rows: list[tuple[str, str, str]]) -> None:
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    for name, project, baseline in rows:
        print(f"  {name:<{width}}  project {project:>16}   baseline {baseline:>16}")


def print_timeline(what: str, started: float, marks: list[tuple[float, str]]) -> None:
    """The progress lines of a run, each with the seconds since the one before: where its time went."""
    print(f"  where the {what}'s time went:")
    previous = started
    for at, line in marks:
        print(f"    +{at - previous:6.1f}s  {line}")
        previous = at
