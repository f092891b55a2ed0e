"""Wait until YugabyteDB's load balancer is idle after a reload, asked from the load generator.

After DROP + CREATE + load the masters move tablet replicas and leaders for a while; a
repetition started then measures the moves. `yb-admin -master_addresses <masters>
get_is_load_balancer_idle` prints `Idle = 1` or `Idle = 0` (yugabyte-db
src/yb/tools/yb-admin_client.cc, ClusterAdminClient::GetIsLoadBalancerIdle: `cout << "Idle = "
<< is_idle`; the command is documented in docs/content/stable/admin/yb-admin.md). The load
generator has yb-admin from the release's tarball (infra/ybscale_infra/startup.py); the stack
output `yb_admin` may name another one (a rehearsal's stand-in).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping

from ybscale.backends import ssh
from ybscale.backends.base import BackendError

YB_ADMIN = "yb-admin"  # on the load generator's PATH (/usr/local/bin/yb-admin)
ANSWER = re.compile(r"^Idle = ([01])\s*$", re.MULTILINE)
POLL_SECONDS = 5


def idle_answer(out: str) -> bool:
    """Whether `yb-admin get_is_load_balancer_idle` said idle; BackendError when unreadable."""
    found = ANSWER.findall(out)
    if not found:
        raise BackendError(f"yb-admin get_is_load_balancer_idle: unreadable answer {out[-300:]!r}")
    return found[-1] == "1"


def load_balancer_idle(
    host: ssh.SshHost, endpoints: Mapping, timeout: float, sleep=time.sleep
) -> Callable[[], dict]:
    """A wait (YsqlCluster's `settle` hook) until the load balancer is idle, at most `timeout`
    seconds; it returns what was waited (recorded in measurement.json). A load generator without
    yb-admin is a BackendError that says so."""
    yb_admin = endpoints.get("yb_admin") or YB_ADMIN
    argv = [yb_admin, "-master_addresses", endpoints["master_addresses"],
            "get_is_load_balancer_idle"]  # fmt: skip

    def wait() -> dict:
        started, polls = time.monotonic(), 0
        while True:
            try:
                out = ssh.check_output(host, argv, timeout=60)
            except BackendError as exc:
                if " exited 127:" in str(exc):
                    raise BackendError(
                        f"{yb_admin} not found on the load generator ({host.login}): it comes "
                        "with the YugabyteDB tarball its startup script installs; set "
                        f"gcp.balancer_timeout: 0 to measure without waiting ({exc})"
                    ) from exc
                raise
            polls += 1
            waited = time.monotonic() - started
            if idle_answer(out):
                return {"load_balancer_idle_after_s": round(waited, 1), "polls": polls,
                        "command": " ".join(argv)}  # fmt: skip
            if waited >= timeout:
                raise BackendError(
                    f"load balancer not idle {waited:.0f} s after the reload "
                    f"(gcp.balancer_timeout {timeout:g}): {' '.join(argv)} still says Idle = 0"
                )
            sleep(POLL_SECONDS)

    return wait


# `yb-admin flush_table <namespace> <table_name> [<timeout_in_seconds>] [ADD_INDEXES]`
# (src/yb/tools/yb-admin_cli.cc, flush_table_args; the namespace `ysql.<database>`): the
# table's memtables written to SST files on every tserver, waited for at most the timeout.
FLUSH_TIMEOUT = 600


def flush_table(
    host: ssh.SshHost, endpoints: Mapping, database: str, table: str, timeout: int = FLUSH_TIMEOUT
) -> Callable[[], dict]:
    """A flush of `table` (YsqlCluster's `flush` hook), asked from the load generator; it
    returns what it took (recorded in measurement.json). BackendError when yb-admin fails."""
    yb_admin = endpoints.get("yb_admin") or YB_ADMIN
    argv = [yb_admin, "-master_addresses", endpoints["master_addresses"], "flush_table",
            f"ysql.{database}", table, str(timeout)]  # fmt: skip

    def flush() -> dict:
        started = time.monotonic()
        try:
            ssh.check_output(host, argv, timeout=timeout + 60)
        except BackendError as exc:
            raise BackendError(f"{' '.join(argv)}: {exc}") from exc
        return {"flushed_in_s": round(time.monotonic() - started, 1), "command": " ".join(argv)}

    return flush
