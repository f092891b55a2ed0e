"""Whole machines' CPU from their /proc/stat: the load generator and each database node.

Each reading takes every machine at once: the nodes' reads (`cat /proc/stat` over SSH, one
round trip each over a connection kept open for the row) start before the load generator's is
taken and run in parallel. A node's figure is its machine's: everything running there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from ybscale.backends import ssh
from ybscale.backends.base import BackendError
from ybscale.measure.utilisation import STEAL, proc_stat_busy, proc_stat_steal

READ = ("cat", "/proc/stat")
READ_TIMEOUT = 30


class MachineCpu:
    """Busy CPU seconds of the load generator (`client`, its /proc/stat as `client()` reads it;
    several: name -> reader) and of each node (`nodes`: name -> how to reach it over SSH). Use
    as a context manager: the nodes' connections are opened by `open` and closed on exit."""

    def __init__(
        self,
        client: Callable[[], str] | Mapping[str, Callable[[], str]],
        nodes: Mapping[str, ssh.SshHost],
    ):
        self.clients = dict(client) if isinstance(client, Mapping) else {"client": client}
        self.nodes = dict(nodes)
        self.reachable: dict[str, ssh.SshHost] | None = None  # set by open()
        self.cpus: dict[str, int] = {}  # each node's CPUs, from its /proc/stat
        self.record: dict = {}
        self._masters: dict[str, bool] = {}

    def __enter__(self) -> MachineCpu:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> dict:
        """Once, before anything is measured: a connection to every node and a first reading;
        a node that cannot be read is left out, with the reason. Returns what is measured
        (the `cpu_readings` part of measurement.json)."""
        if self.reachable is not None:
            return self.record
        try:
            with ThreadPoolExecutor(max(1, len(self.nodes))) as pool:
                self._masters = dict(zip(self.nodes, pool.map(ssh.start_master,
                                         self.nodes.values()), strict=True))  # fmt: skip
        except BaseException:  # Ctrl-C here: the threads went on connecting; close them all
            self._masters = dict.fromkeys(self.nodes, True)
            self.close()
            raise
        self.reachable = dict(self.nodes)
        started = time.monotonic()
        texts, failed = self._read(self.nodes, client=False)
        seconds = time.monotonic() - started
        for name in failed:
            del self.reachable[name]
        self.record = {
            "source": "/proc/stat of each machine (nodes over SSH)",
            "measured": [*self.clients, *sorted(texts)],
            "not_measured": failed,
            "node_cpus": dict(self.cpus),
            "first_nodes_reading_seconds": seconds,
        }
        return self.record

    def warnings(self) -> list[str]:
        return [
            f"CPU of {name} not measured (its /proc/stat unreadable over SSH): {why}"
            for name, why in self.record.get("not_measured", {}).items()
        ]

    def _read(
        self, nodes: Mapping[str, ssh.SshHost], client: bool = True
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(/proc/stat by name, `client` too if asked; error by name of the nodes that failed)."""

        def parse(text: str) -> tuple[str, int]:
            return text, proc_stat_busy(text)[1]

        clients: dict[str, str] = {}

        def read_clients() -> None:  # while the nodes' reads run, as close to them as it can
            if client:
                clients.update({name: read() for name, read in self.clients.items()})

        read, failed = ssh.on_every_host(
            nodes, dict.fromkeys(nodes, READ), READ_TIMEOUT, parse, (ValueError, IndexError),
            read_clients,
        )  # fmt: skip
        self.cpus |= {name: cpus for name, (_, cpus) in read.items()}
        return {**clients, **{name: text for name, (text, _) in read.items()}}, failed

    def read(self) -> dict[str, str]:
        """/proc/stat of the load generator and of every node that `open` could read;
        BackendError when one of them fails now."""
        self.open()
        texts, failed = self._read(self.reachable)
        if failed:
            raise BackendError("/proc/stat unreadable: " + "; ".join(
                f"{name}: {why}" for name, why in failed.items()))  # fmt: skip
        return texts

    def seconds(self) -> dict[str, float]:
        """Busy CPU seconds since boot by name (`client` and the nodes), and each machine's
        steal time as `steal_<name>` (what the hypervisor gave other guests: interference on
        a VM, read as utilisation is)."""
        texts = self.read()
        busy = {name: proc_stat_busy(text)[0] for name, text in texts.items()}
        return busy | {f"{STEAL}{name}": proc_stat_steal(text) for name, text in texts.items()}

    def capacity(self) -> dict[str, float]:
        """CPUs of each node measured (the CPUs its /proc/stat lists)."""
        self.open()
        return {name: float(self.cpus[name]) for name in self.reachable}

    def close(self) -> None:
        for name, started in self._masters.items():
            ssh.stop_master(self.nodes[name], started)
        self._masters = {}
