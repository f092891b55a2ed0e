"""Reaching a gcp cluster over SSH: the load generator (public IP or IAP), the tservers
through it, the masters' health, and the wait until a new cluster is ready."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from ybscale.backends import ssh, yb_catalogue
from ybscale.backends.base import BackendError, Endpoint
from ybscale.backends.loadgen import LoadgenRunner
from ybscale.backends.yb_catalogue import gflags
from ybscale.backends.ysql import YsqlCluster, master_problems
from ybscale.design.row import Row

READY_FILE = "/var/lib/ybscale/ready"  # the load generator's startup script writes it last
# OpenSSH's refusal of the key. While a VM boots, its guest agent may not have written the
# metadata key yet; refused for longer than AUTH_GRACE_S, the key is not coming: most likely an
# organisation policy enforces OS Login (constraints/compute.requireOsLogin), which ignores the
# `ssh-keys` metadata ybscale sets (and its enable-oslogin: FALSE).
AUTH_DENIED = "Permission denied (publickey"
AUTH_GRACE_S = 180


def ssh_host(
    endpoints: Mapping, settings: Mapping, known_hosts: Path, generator: int = 0
) -> ssh.SshHost:
    """How to reach a load generator (the first by default): its public IP, or its name
    through an IAP tunnel."""
    proxy = None
    ips = endpoints.get("loadgen_ips") or [endpoints["loadgen_ip"]]
    host = ips[generator]
    ports = endpoints.get("loadgen_ssh_ports") or [endpoints.get("ssh_port", 22)] * len(ips)
    if endpoints.get("ssh_access", settings["ssh_access"]) == "iap":
        host = (endpoints.get("loadgen_names") or [endpoints["loadgen_name"]])[generator]
        proxy = (
            f"gcloud compute start-iap-tunnel %h %p --listen-on-stdin "
            f"--project={endpoints['project']} --zone={endpoints['zone']} --verbosity=warning"
        )
    return ssh.SshHost(
        host=host,
        port=int(ports[generator]),
        user=endpoints["ssh_user"],
        key=Path(settings["ssh_key"]),
        known_hosts=known_hosts,
        proxy_command=proxy,
        control_path=ssh.control_path(f"lg{generator}" if generator else ""),
    )


def generator_hosts(endpoints: Mapping, settings: Mapping, known_hosts: Path) -> list:
    """Every load generator of the cluster (stack output `loadgen_ips`; one without it)."""
    count = len(endpoints.get("loadgen_ips") or [endpoints["loadgen_ip"]])
    return [ssh_host(endpoints, settings, known_hosts, g) for g in range(count)]


def tserver_endpoints(endpoints: Mapping) -> list[Endpoint]:
    """The YSQL endpoint of every tserver of a cluster."""
    port = int(endpoints["ysql_port"])
    return [
        Endpoint(host=ip, port=port, dbname="yugabyte", user="yugabyte", role=f"tserver{i}")
        for i, ip in enumerate(endpoints["tserver_ips"])
    ]


def node_hosts(
    loadgen: ssh.SshHost, nodes: list[Endpoint], port: int = 22
) -> dict[str, ssh.SshHost]:
    """Each tserver VM by endpoint name, reached over SSH through the load generator (its
    private IP; the cluster's firewall lets the load generator in on port 22)."""
    return {ep.role: ssh.through(loadgen, ep.host, port, tag=ep.role) for ep in nodes}


def masters_health(host: ssh.SshHost, endpoints: Mapping):
    """A check of the yb-master Raft group, asked from the load generator: the first master
    that answers `/api/v1/masters` (web port 7000) must list every master as LEADER or
    FOLLOWER, with exactly one leader."""
    masters = [a.rsplit(":", 1)[0] for a in endpoints["master_addresses"].split(",")]

    def health() -> list[str]:
        errors = []
        for ip in masters:
            url = f"http://{ip}:7000/api/v1/masters"
            try:
                answer = ssh.check_output(host, ["curl", "-fsS", "--max-time", "10", url],
                                          timeout=60)  # fmt: skip
            except BackendError as exc:
                errors.append(f"{url}: {exc}")
                continue
            return master_problems(answer, len(masters))
        return ["no master answers: " + "; ".join(errors)]

    return health


def wait_ready(
    endpoints: Mapping,
    settings: Mapping,
    known_hosts: Path,
    row: Row,
    log=print,
    sleep=time.sleep,
    clock=time.monotonic,
) -> None:
    """Wait until the cluster is ready: the VMs' startup finished (every load generator's),
    every master in the Raft group, every tserver registered (yb_servers()) and answering
    YSQL (YsqlCluster.check). `row`: one row of the combination (the cluster it will measure).
    SSH refusing the key for AUTH_GRACE_S fails at once, naming OS Login as the likely cause,
    instead of waiting out ready_timeout."""
    hosts = generator_hosts(endpoints, settings, known_hosts)
    host = hosts[0]
    cluster = YsqlCluster(
        tserver_endpoints(endpoints), row, LoadgenRunner(host),
        health=masters_health(host, endpoints),
    )  # fmt: skip
    ready_file = endpoints.get("ready_file", READY_FILE)
    deadline = clock() + settings["ready_timeout"]
    last, denied_since = "", None
    while clock() < deadline:
        try:
            for each in hosts:  # every load generator's startup finished
                ssh.check_output(each, ["test", "-f", ready_file], timeout=60)
            cluster.check()
            log(f"{endpoints['stack']}: ready (masters, yb_servers(), YSQL on every tserver)")
            return
        except BackendError as exc:
            last = str(exc)
            if AUTH_DENIED not in last:
                denied_since = None
            elif denied_since is None:
                denied_since = clock()
            elif clock() - denied_since >= AUTH_GRACE_S:
                raise BackendError(
                    f"{endpoints['stack']}: SSH to the load generator refuses the key "
                    f"{settings['ssh_key']} as {host.user} for {AUTH_GRACE_S}s: most likely an "
                    "organisation policy enforces OS Login (constraints/compute.requireOsLogin), "
                    "which ignores the ssh-keys metadata ybscale sets; ask for an exception for "
                    f"the project or run in a project without it. Last: {last}"
                ) from exc
            sleep(15)
    raise BackendError(
        f"{endpoints['stack']}: not ready after {settings['ready_timeout']}s: {last}"
    )


MASTER_WEB_PORT = 7000  # yb-master's web server (--webserver_port's default)
TSERVER_WEB_PORT = 9000  # yb-tserver's


def _same_flag(kind: str | None, asked: str, reported: str) -> bool:
    """Whether a server's value is the one asked for, by the flag's C++ type: gflags prints a
    bool as true/false, an integer in decimal, a double by `%g`-like rules."""
    if kind == "bool":
        return reported in ("true", "false") and (asked.lower() in gflags.TRUE) == (
            reported == "true"
        )
    try:
        if kind in ("int32", "int64", "uint32", "uint64"):
            return int(asked, 16 if asked.lower().startswith("0x") else 10) == int(reported)
        if kind == "double":
            return float(asked) == float(reported)
    except ValueError:
        return False
    return asked == reported


def flags_reported(
    host: ssh.SshHost, endpoints: Mapping, asked: Mapping[str, Mapping[str, str]], series: str
) -> dict[str, dict[str, str]]:
    """Each server's flags as it reports them: `/api/v1/varz` on its web port, asked from the
    load generator (as YugabyteDB Anywhere reads them; the cluster's firewall opens 7000 and
    9000 inside the subnetwork). `asked`: yb-master / yb-tserver -> flag -> the value its
    command line gave. Returns "<server> <address>" -> flag -> the value it reports;
    BackendError naming the server, the flag and both values when one differs, or when a
    server does not answer."""
    masters = [a.rsplit(":", 1)[0] for a in endpoints["master_addresses"].split(",")]
    web = {"yb-master": (masters, int(endpoints.get("master_web_port", MASTER_WEB_PORT))),
           "yb-tserver": (list(endpoints["tserver_ips"]),
                          int(endpoints.get("tserver_web_port", TSERVER_WEB_PORT)))}  # fmt: skip
    reported, wrong = {}, []
    for server, (addresses, port) in web.items():
        for ip in addresses:
            url = f"http://{ip}:{port}/api/v1/varz"
            answer = ssh.check_output(host, ["curl", "-fsS", "--max-time", "10", url], timeout=60)
            try:
                flags = {f["name"]: f["value"] for f in json.loads(answer)["flags"]}
            except (ValueError, KeyError, TypeError) as exc:
                raise BackendError(f"{url}: not YugabyteDB's flag list ({exc}): "
                                   f"{answer[:300]}") from exc  # fmt: skip
            mine = {name: flags.get(name) for name in asked[server]}
            reported[f"{server} {ip}"] = mine
            for name, value in asked[server].items():
                kind = yb_catalogue.flag_type(series, name) if series else None
                if mine[name] is None or not _same_flag(kind, str(value), mine[name]):
                    wrong.append(f"{server} {ip}: --{name} is {mine[name]!r}, asked {value!r}")
    if wrong:
        raise BackendError("the servers do not run with the flags the stack gave them: "
                           + "; ".join(wrong))  # fmt: skip
    return reported
