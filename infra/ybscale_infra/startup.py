"""Startup scripts (GCE `metadata_startup_script`) for YugabyteDB and load-generator VMs.

Pure string rendering: no Pulumi, so the flags can be tested directly. Every script is
idempotent (GCE re-runs startup scripts on every boot) and ends by touching READY_MARKER.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

YB_HOME = "/opt/yugabyte"
DATA_DIR = "/mnt/d0"
READY_MARKER = "/var/lib/ybscale/ready"
MASTER_RPC_PORT = 7100
TSERVER_RPC_PORT = 9100
YSQL_PORT = 5433

_ULIMITS = """LimitNOFILE=1048576
LimitNPROC=12000
LimitCORE=infinity"""


def release_of(version: str) -> str:
    """ "2024.2.1.0-b185" -> "2024.2.1.0" (the folder of the release on the download site)."""
    return version.split("-", 1)[0]


def download_url(url_template: str, version: str) -> str:
    """The tarball URL: `{version}` and `{release}` in the template are filled in."""
    return url_template.format(version=version, release=release_of(version))


def master_addresses(master_ips: Sequence[str]) -> str:
    """`ip:7100,ip:7100,...` for --master_addresses / --tserver_master_addrs."""
    return ",".join(f"{ip}:{MASTER_RPC_PORT}" for ip in master_ips)


def prepare_os() -> str:
    """First-boot OS preparation shared by every VM (runs under `set -euo pipefail`).

    Fresh Ubuntu images start apt-daily / unattended-upgrades at boot, which hold the dpkg lock
    (a bare `apt-get` under `set -e` then fails) and take CPU on 2-vCPU nodes: they are stopped
    and disabled. `apt_get` waits for the lock and retries. YugabyteDB's initdb needs the
    en_US.UTF-8 locale, generated when missing.
    """
    return """
systemctl disable --now apt-daily.timer apt-daily-upgrade.timer || true
systemctl disable --now unattended-upgrades.service || true
systemctl stop apt-daily.service apt-daily-upgrade.service || true
apt_get() {
  local try
  for try in 1 2 3 4 5 6; do
    if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y "$@"; then
      return 0
    fi
    echo "ybscale: apt-get $* failed (try $try of 6), retrying" >&2
    sleep $((try * 10))
  done
  echo "ybscale: apt-get $* failed 6 times" >&2
  return 1
}
if ! locale -a 2>/dev/null | grep -ix 'en_US.utf8' >/dev/null; then
  apt_get install locales
  locale-gen en_US.UTF-8
fi
update-locale LANG=en_US.UTF-8 || true
export LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8
"""


def _install_yugabyte(
    version: str, url: str, sha256: str | None = None, home: str = YB_HOME, data: str = DATA_DIR
) -> str:
    """Download, verify (sha256: pinned, else the `<url>.sha` YugabyteDB publishes next to the
    tarball, with the algorithm its length implies: YugabyteDB's instructions check it with
    `shasum --check`, which does the same, and do not name one) and unpack YugabyteDB once per
    version."""
    q = shlex.quote
    pinned = q(sha256 or "")
    return f"""
YB_VERSION={q(version)}
YB_URL={q(url)}
YB_SUM={pinned}
if [ "$(cat {home}/.ybscale-version 2>/dev/null)" != "$YB_VERSION" ]; then
  apt_get update
  apt_get install curl python3 chrony
  tarball=$(mktemp)
  curl -fsSL --retry 5 -o "$tarball" "$YB_URL"
  if [ -z "$YB_SUM" ]; then
    YB_SUM=$(curl -fsSL --retry 5 "$YB_URL.sha" | awk '{{print $1}}')
  fi
  case ${{#YB_SUM}} in
    40) sum=sha1sum ;;
    64) sum=sha256sum ;;
    128) sum=sha512sum ;;
    *) echo "ybscale: no SHA-1, SHA-256 or SHA-512 digest for $YB_URL" \
         "(${{#YB_SUM}} characters: $YB_SUM)" >&2
       exit 1 ;;
  esac
  if ! echo "$YB_SUM  $tarball" | "$sum" -c --status; then
    echo "ybscale: checksum mismatch for $YB_URL (expected $sum $YB_SUM)" >&2
    exit 1
  fi
  rm -rf {home} && mkdir -p {home}
  tar xzf "$tarball" -C {home} --strip-components=1
  rm -f "$tarball"
  {home}/bin/post_install.sh
  echo "$YB_VERSION" > {home}/.ybscale-version
fi
mkdir -p {data} {READY_MARKER.rsplit("/", 1)[0]}
"""


def systemd_word(arg: str) -> str:
    """One ExecStart= argument as systemd reads it back unchanged (systemd.service(5), "Command
    lines"; systemd.syntax(7), "Quoting"): in double quotes, with C escapes for backslash, double
    quote and newline, `%%` for `%` (else a specifier: `%m` is the machine ID, `%p` the unit's
    prefix, an unknown one refuses the unit) and `$$` for `$` (else an environment variable).
    Shell quoting is no use here: systemd does not run a shell."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


def _service(name: str, argv: Sequence[str]) -> str:
    exec_start = " ".join(systemd_word(a) for a in argv)
    return f"""
cat > /etc/systemd/system/{name}.service <<'UNIT'
[Unit]
Description=YugabyteDB {name} (ybscale)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart={exec_start}
Restart=always
RestartSec=5
Environment=LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8
{_ULIMITS}

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now {name}
"""


def _header(role: str) -> str:
    return (
        f"#!/bin/bash\n# ybscale {role} startup script (infra/ybscale_infra/startup.py)\n"
        "set -euxo pipefail\n" + prepare_os()
    )


def _placement(cloud_zone: str) -> list[str]:
    region = cloud_zone.rsplit("-", 1)[0]
    return [
        "--placement_cloud=gcp",
        f"--placement_region={region}",
        f"--placement_zone={cloud_zone}",
    ]


def master_flags(
    ip: str,
    master_ips: Sequence[str],
    replication_factor: int,
    zone: str,
    flags: Mapping[str, str] | None = None,
) -> list[str]:
    """yb-master argv for the master at `ip`, plus the design's server.* knobs that are yb-master
    flags (`flags`, as --name=value)."""
    return [
        f"{YB_HOME}/bin/yb-master",
        f"--master_addresses={master_addresses(master_ips)}",
        f"--rpc_bind_addresses={ip}:{MASTER_RPC_PORT}",
        f"--fs_data_dirs={DATA_DIR}",
        f"--replication_factor={replication_factor}",
        "--enable_ysql=true",
        *_placement(zone),
        *(f"--{name}={value}" for name, value in sorted((flags or {}).items())),
    ]


def tserver_flags(
    ip: str,
    master_ips: Sequence[str],
    zone: str,
    flags: Mapping[str, str] | None = None,
    pg_conf: Mapping[str, str] | None = None,
) -> list[str]:
    """yb-tserver argv for the tserver at `ip` (YSQL on, real READ COMMITTED), plus the design's
    server.* knobs: `flags` as --name=value, `pg_conf` through --ysql_pg_conf_csv."""
    extra = [f"--{name}={value}" for name, value in sorted((flags or {}).items())]
    if pg_conf:
        extra.append(f"--ysql_pg_conf_csv={pg_conf_csv(pg_conf)}")
    return [
        f"{YB_HOME}/bin/yb-tserver",
        f"--tserver_master_addrs={master_addresses(master_ips)}",
        f"--rpc_bind_addresses={ip}:{TSERVER_RPC_PORT}",
        f"--fs_data_dirs={DATA_DIR}",
        "--enable_ysql=true",
        f"--pgsql_proxy_bind_address={ip}:{YSQL_PORT}",
        # Without this flag YugabyteDB silently runs READ COMMITTED as snapshot isolation.
        "--yb_enable_read_committed_isolation=true",
        "--start_cql_proxy=false",
        *_placement(zone),
        *extra,
    ]


# PostgreSQL's configuration-file lexer, as YugabyteDB's PostgreSQL 11.2 fork has it
# (src/postgres/src/backend/utils/misc/guc-file.l, yugabyte/yugabyte-db 57d92f0e; the same rules
# in PostgreSQL 15): a value is one token, an ID, an INTEGER (with unit letters), a REAL, an
# UNQUOTED_STRING or a STRING ('...', '' for a quote, backslash escapes read by GUC_scanstr).
# Bare here only what is a plain identifier or number; everything else becomes a STRING.
_PG_ID = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_PG_INTEGER = re.compile(r"[-+]?([0-9]+|0x[0-9a-fA-F]+)[a-zA-Z]*")
_PG_REAL = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([Ee][-+]?[0-9]+)?")
_PG_STRING = re.compile(r"'([^'\\\n]|\\.|'')*'")


def pg_conf_value(value: object) -> str:
    """A YSQL setting's value as one line of a PostgreSQL configuration file reads it: bare when
    it is a plain identifier or number (`on`, `64MB`, `0.5`), a value already written as a
    PostgreSQL string literal (`'%m [%p] '`) as it is, anything else single-quoted with `'`
    doubled and backslash and newline escaped (GUC_scanstr reads `\\` as a backslash, `\\n`
    as a newline)."""
    text = str(value)
    if any(p.fullmatch(text) for p in (_PG_ID, _PG_INTEGER, _PG_REAL, _PG_STRING)):
        return text
    escaped = text.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n")
    return f"'{escaped}'"


def pg_conf_csv(pg_conf: Mapping[str, object]) -> str:
    """--ysql_pg_conf_csv: one `name=value` item per setting (`pg_conf_value`), each a line of
    the ysql_pg.conf YugabyteDB writes, joined as its pg_wrapper reads the flag (ReadCSVValues,
    src/yb/yql/pgwrapper/pg_wrapper.cc: an unquoted field holds no comma or double quote; a
    quoted one is in double quotes with `""` for a double quote). Items holding a comma, a
    quote or a space are double-quoted, as YugabyteDB's docs write
    `"log_line_prefix='%m [%p]'"`."""
    items = [f"{name}={pg_conf_value(value)}" for name, value in sorted(pg_conf.items())]
    return ",".join(
        '"' + item.replace('"', '""') + '"' if any(c in item for c in ",\"' ") else item
        for item in items
    )


def master_script(
    *,
    ip: str,
    master_ips: Sequence[str],
    replication_factor: int,
    zone: str,
    version: str,
    url: str,
    sha256: str | None = None,
    flags: Mapping[str, str] | None = None,
) -> str:
    """Startup script of a yb-master VM (`flags`: the server.* knobs that are yb-master flags)."""
    argv = master_flags(ip, master_ips, replication_factor, zone, flags)
    return (
        _header("yb-master")
        + _install_yugabyte(version, url, sha256)
        + _service("yb-master", argv)
        + f"touch {READY_MARKER}\n"
    )


def tserver_script(
    *,
    ip: str,
    master_ips: Sequence[str],
    zone: str,
    version: str,
    url: str,
    sha256=None,
    flags: Mapping[str, str] | None = None,
    pg_conf: Mapping[str, str] | None = None,
) -> str:
    """Startup script of a yb-tserver VM."""
    return (
        _header("yb-tserver")
        + _install_yugabyte(version, url, sha256)
        + _service("yb-tserver", tserver_flags(ip, master_ips, zone, flags, pg_conf))
        + f"touch {READY_MARKER}\n"
    )


def loadgen_script(
    pg_version: int = 16, yugabyte: tuple[str, str, str | None] | None = None
) -> str:
    """Startup script of the load generator: PGDG PostgreSQL client + pgbench (>= 15), and with
    `yugabyte` (version, url, sha256) the release's tarball for `yb-admin` (the wait for an idle
    load balancer after each reload), linked as /usr/local/bin/yb-admin.

    pgbench ships in the server package on Debian/Ubuntu; no cluster is created
    (create_main_cluster = false) and /usr/local/bin/pgbench points at the pinned major version.
    """
    if pg_version < 15:
        raise ValueError(f"pgbench >= 15 is needed for --max-tries, got {pg_version}")
    bindir = f"/usr/lib/postgresql/{pg_version}/bin"
    return (
        _header("load generator")
        + f"""
if [ ! -x {bindir}/pgbench ]; then
  apt_get update
  apt_get install curl ca-certificates gnupg lsb-release
  install -d /usr/share/postgresql-common/pgdg
  curl -fsSL --retry 5 -o /usr/share/postgresql-common/pgdg/apt.postgresql.org.asc \\
    https://www.postgresql.org/media/keys/ACCC4CF8.asc
  echo "deb [signed-by=/usr/share/postgresql-common/pgdg/apt.postgresql.org.asc] \\
https://apt.postgresql.org/pub/repos/apt $(lsb_release -cs)-pgdg main" \\
    > /etc/apt/sources.list.d/pgdg.list
  mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/ybscale.conf
  apt_get update
  apt_get install postgresql-client-{pg_version} postgresql-{pg_version}
fi
ln -sf {bindir}/pgbench /usr/local/bin/pgbench
ln -sf {bindir}/psql /usr/local/bin/psql
"""
        + (
            _install_yugabyte(*yugabyte)
            + f"ln -sf {YB_HOME}/bin/yb-admin /usr/local/bin/yb-admin\n"
            if yugabyte
            else ""
        )
        + f"""mkdir -p /var/lib/ybscale
touch {READY_MARKER}
"""
    )
