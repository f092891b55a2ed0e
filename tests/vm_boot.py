"""A VM's boot on this machine: the startup script the Pulumi program renders, run as written.

`boot(script, vm)` runs one VM's `metadata_startup_script` under bash, in a mount namespace of
its own where the paths the script writes (/opt, /mnt, /etc/systemd/system, /var/lib) are
folders of the VM (`vm.root`): nothing outside them changes. What a fresh Ubuntu image would
do is stood in for only where this machine cannot do it: `apt-get`, `locale-gen`,
`update-locale` log their arguments and succeed; `locale -a` lists en_US.utf8; `systemctl`
(this module's `systemctl`) reads the unit file the script wrote and starts its ExecStart=,
split and unescaped by systemd's own rules (`systemd_exec_argv`), with the unit's
Environment=. Everything else is real: curl fetches the tarball and its `.sha` from a loopback
HTTP server laid out as YugabyteDB's download host (`release_host`), sha256sum checks it, tar
unpacks it, bin/post_install.sh runs.

The tarball's yb-master and yb-tserver are stand-ins built on the real gflags
(`stand_in_server`): every flag the release catalogue gives the server, of the catalogue's
C++ type (a string where the catalogue records none), so gflags itself refuses an unknown
flag or a value its type does not take, and the server exits 1 as the real one does. Past
gflags they run `serve`: each answers its web port as YugabyteDB's servers do
(`/api/v1/varz`: every flag, value and type, as src/yb/server/default-path-handlers.cc
writes them; a master also `/api/v1/masters`), and the tserver first writes ysql_pg.conf as
pg_wrapper does (the default postgresql.conf, then each --ysql_pg_conf_csv item as
ReadCSVValues reads it, one line each) and has the real PostgreSQL parse it (`postgres -C`
for each setting): a file PostgreSQL refuses stops the tserver, with PostgreSQL's message in
its log. A server stops when its VM's stack is gone (`vm.alive`, the stack's state file) or
on SIGTERM.

What this cannot stand for (the first paid run checks it): the real binaries' behaviour past
their flags (the shared_preload_libraries line pg_wrapper adds names YugabyteDB's own
libraries, which a stock PostgreSQL does not have: it is left out here), apt and the image,
systemd itself (Restart=, ordering), Compute Engine's metadata server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve()
VM_ENV = "YBSCALE_VM"  # the VM description a stand-in server reads (its address, ports, ...)

# ------------------------------------------------------------- systemd's reading of ExecStart=

_C_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "s": " ", "r": "\r"}


def systemd_exec_argv(line: str) -> list[str]:
    """The argv systemd runs for an ExecStart= value, by its documented rules (systemd.syntax(7)
    "Quoting", systemd.unit(5) "Specifiers", systemd.service(5) "Command lines"): words split on
    whitespace, '...' and "..." quoting with C escapes, then specifiers (`%%` is `%`) and
    environment variables (`$$` is `$`). A specifier or variable that would be replaced is an
    error (ValueError): the value would not arrive as written."""
    words, i = [], 0
    while i < len(line):
        if line[i].isspace():
            i += 1
            continue
        word, quote = [], None
        while i < len(line) and (quote or not line[i].isspace()):
            ch = line[i]
            if ch == "\\":
                escape = line[i + 1 : i + 2]
                if escape not in _C_ESCAPES:
                    raise ValueError(f"systemd reads \\{escape} in {line!r} as an escape")
                word.append(_C_ESCAPES[escape])
                i += 2
                continue
            if ch in "\"'" and quote in (None, ch):
                quote = None if quote else ch
            else:
                word.append(ch)
            i += 1
        if quote is not None:
            raise ValueError(f"unterminated quote in {line!r}")
        words.append("".join(word))
    return [_resolve(word) for word in words]


def _resolve(word: str) -> str:
    """`%%` -> `%`, `$$` -> `$`; any other `%x` (a specifier) or `$x` (a variable) fails."""
    out, i = [], 0
    while i < len(word):
        ch = word[i]
        if ch in "%$":
            pair = word[i : i + 2]
            if pair != ch * 2:
                raise ValueError(f"systemd would replace {pair!r} in {word!r}")
            i += 1
        out.append(ch)
        i += 1
    return "".join(out)


def unit_file(script: str) -> str:
    """The unit file a startup script writes (its `cat > ... <<'UNIT'` heredoc)."""
    return script.split("<<'UNIT'\n", 1)[1].split("\nUNIT\n", 1)[0] + "\n"


# -------------------------------------------------- pg_wrapper's reading of --ysql_pg_conf_csv

# YugabyteDB's pg_wrapper reads --ysql_pg_conf_csv with this expression (ReadCSVValues,
# src/yb/yql/pgwrapper/pg_wrapper.cc, yugabyte/yugabyte-db 8147600a; the same in
# src/yb/util/csv_util.cc later): a field is either unquoted (no comma, no double quote) or
# double-quoted with "" for a double quote, followed by a comma or the end.
_YB_CSV_FIELD = re.compile(r'^(?:([^,"]+)|(?:"((?:[^"]|(?:""))*)\"))(?:(?:,)|(?:$))')


def yb_read_csv_values(csv: str) -> list[str]:
    """ReadCSVValues as YugabyteDB's C++ runs it: each match's quoted group (`""` -> `"`) when
    it is not empty, else its unquoted group; ValueError ("Malformed CSV") when the matches do
    not reach the end; a trailing comma adds an empty line."""
    lines, i = [], 0
    while i < len(csv):
        match = _YB_CSV_FIELD.search(csv[i:])
        if not match:
            break
        quoted, plain = match[2], match[1]
        lines.append(quoted.replace('""', '"') if quoted else (plain or ""))
        i += len(match[0])
    if i != len(csv):
        raise ValueError(f"Malformed CSV '{csv}'")
    if csv.endswith(","):
        lines.append("")
    return lines


def postgres_reads(postgres: str, conf: Path, name: str) -> str:
    """What PostgreSQL's own configuration-file parser makes of setting `name` in the file
    `conf` (`postgres -C`, first, so root may ask; no server started); ValueError with
    PostgreSQL's complaint when it refuses the file."""
    done = subprocess.run(
        [postgres, "-C", name, "-D", str(conf.parent), "-c", f"config_file={conf}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if done.returncode != 0:
        raise ValueError(done.stderr.strip())
    return done.stdout.rstrip("\n")


# ------------------------------------------------------------------ stand-in servers (gflags)


def stand_in_server(series: str, server: str, folder: Path, compiler: str) -> Path:
    """A stand-in yb-master or yb-tserver built on the real gflags (the system's libgflags),
    compiled once per catalogue into `folder`: it defines every flag the catalogue gives
    `server` with the catalogue's C++ type (a string where none is recorded: gflags then
    takes any value, as the real type may), parses its argv as the real binary's
    ParseCommandLineFlags does (exit 1 on an unknown flag or a value its type refuses),
    writes every flag's name, value and default to a file and runs `serve` on it (this
    module, under this Python). Run with `--print-flags-only`, it prints that file and exits."""
    from ybscale.backends import yb_catalogue

    names = (yb_catalogue.master_flags if server == "yb-master" else yb_catalogue.tserver_flags)(
        series
    )
    defines = {"bool": 'DEFINE_bool({}, false, "");', "string": 'DEFINE_string({}, "", "");',
               "double": 'DEFINE_double({}, 0, "");'}  # fmt: skip
    lines = ["#include <cstdio>", "#include <cstdlib>", "#include <cstring>", "#include <vector>",
             "#include <string>", "#include <unistd.h>", "#include <gflags/gflags.h>"]  # fmt: skip
    for name in sorted(names):
        kind = yb_catalogue.flag_type(series, name) or "string"
        lines.append(defines.get(kind, f'DEFINE_{kind}({{}}, 0, "");').format(name))
    lines.append(
        "int main(int argc, char** argv) {\n"
        '  bool only = argc > 1 && std::strcmp(argv[argc - 1], "--print-flags-only") == 0;\n'
        "  if (only) argc--;\n"
        "  gflags::ParseCommandLineFlags(&argc, &argv, true);\n"
        "  std::vector<gflags::CommandLineFlagInfo> all;\n"
        "  gflags::GetAllFlags(&all);\n"
        '  char path[] = "/tmp/yb-standin-flags-XXXXXX";\n'
        "  int fd = only ? 1 : mkstemp(path);\n"
        '  if (fd < 0) { std::perror("mkstemp"); return 1; }\n'
        '  FILE* out = fdopen(fd, "w");\n'
        "  for (const auto& f : all)\n"
        '    std::fprintf(out, "%s%c%s%c%s%c", f.name.c_str(), 0, f.current_value.c_str(), 0,\n'
        "                 f.default_value.c_str(), 0);\n"
        "  std::fclose(out);\n"
        "  if (only) return 0;\n"
        f'  const char* py = "{sys.executable}";\n'
        f'  execl(py, py, "{HERE}", "serve", "{server}", path, (char*)nullptr);\n'
        '  std::perror("execl");\n  return 1;\n}\n'
    )
    source = "\n".join(lines)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    program = folder / f"{server}-{digest}"
    if not program.exists():
        folder.mkdir(parents=True, exist_ok=True)
        src = folder / f"{server}-{digest}.{os.getpid()}.cc"
        src.write_text(source)
        partial = Path(f"{program}.{os.getpid()}")
        subprocess.run([compiler, "-O0", "-o", str(partial), str(src), "-lgflags"],
                       check=True, capture_output=True, timeout=600)  # fmt: skip
        partial.replace(program)  # whole or not at all: workers may compile side by side
        src.unlink()
    return program


def read_flags(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (value, default) from a stand-in's flag file."""
    parts = path.read_bytes().split(b"\0")[:-1]
    return {
        parts[i].decode(): (parts[i + 1].decode(), parts[i + 2].decode())
        for i in range(0, len(parts), 3)
    }


# src/yb/server/default-path-handlers.cc, GetFlagInfos: these are NodeInfo, a flag whose value
# is not its default Custom, the others Default (Auto flags aside); sorted by type, then name
NODE_INFO = ("log_filename", "rpc_bind_addresses", "webserver_interface", "webserver_port",
             "placement_cloud", "placement_region", "placement_zone")  # fmt: skip
TYPE_ORDER = {"NodeInfo": 1, "Custom": 2, "Auto": 3, "Default": 4}


def varz(flags: dict[str, tuple[str, str]]) -> dict:
    """/api/v1/varz as YugabyteDB writes it (ConvertFlagsToJson): {"flags": [{name, value,
    type}]}."""
    rows = []
    for name, (value, default) in flags.items():
        kind = "NodeInfo" if name in NODE_INFO else "Custom" if value != default else "Default"
        rows.append({"name": name, "value": value, "type": kind})
    rows.sort(key=lambda r: (TYPE_ORDER[r["type"]], r["name"].lower()))
    return {"flags": rows}


def ysql_pg_conf(flags: dict[str, tuple[str, str]], sample: Path) -> tuple[Path, list[str]]:
    """The tserver's ysql_pg.conf, written as pg_wrapper's WritePostgresConfig writes it: the
    default postgresql.conf's lines, then each --ysql_pg_conf_csv item (ReadCSVValues) as one
    line (shared_preload_libraries merged there is left out: see the module's note). Returns
    the file and the settings the items name."""
    data = Path(flags["fs_data_dirs"][0].split(",")[0]) / "pg_data"
    data.mkdir(parents=True, exist_ok=True)
    lines = sample.read_text().splitlines()
    csv = flags.get("ysql_pg_conf_csv", ("", ""))[0]
    items = yb_read_csv_values(csv) if csv else []
    conf = data / "ysql_pg.conf"
    conf.write_text("\n".join([*lines, *items]) + "\n")
    return conf, [item.split("=", 1)[0].strip() for item in items if "=" in item]


# What a yb-tserver's /prometheus-metrics says of its tables, as its PrometheusWriter writes it
# (src/yb/util/metrics_writer.cc at yugabyte-db 026f043d: each entry `name{attr="value",...}
# value timestamp_ms`, preceded by `# HELP name <description>` and `# TYPE name <type>` when
# --export_help_and_type_in_prometheus_metrics is true, its default (docs, yb-tserver.md),
# again before every entry; tablet metrics rolled up per table). The RocksDB tickers
# (src/yb/rocksdb/statistics.h, TickersNameMap; src/yb/rocksdb/util/statistics.cc: gauges
# described "Per-tablet Regular Rocksdb Ticker for <name>", "Per-tablet Intents Rocksdb Ticker
# for intentsdb_<name>") split the block cache into data, index and filter blocks, the
# totals their sum. A histogram is written as <name>_sum and <name>_count (counters) and one
# gauge per quantile (src/yb/util/metrics.cc, Histogram::WriteForPrometheus). The stand-in's
# tables are its one database's user tables: a table's data blocks hit and read are its
# pg_statio_user_tables heap blocks, its index blocks its indexes' (a stand-in has no bloom
# filters: 0); its SST files' size is what the last `yb-admin flush_table` of it flushed
# (`flush_table`: its pg_total_relation_size then), 0 until one did, as a tserver's rows stay
# in its memtables until they flush; its intents RocksDB's are 0. Every tserver also reports
# server-entity metrics (the real one has hundreds).
STATS_SQL = (
    "SELECT s.relid, s.relname, coalesce(s.heap_blks_hit, 0), coalesce(s.heap_blks_read, 0), "
    "coalesce(s.idx_blks_hit, 0), coalesce(s.idx_blks_read, 0) "
    "FROM pg_statio_user_tables s ORDER BY s.relid"
)
HISTOGRAM = "handler_latency_yb_tserver_TabletServerService_Read"  # a server histogram
QUANTILES = ("p50", "p95", "p99", "mean", "max")


def _entry(name: str, kind: str, description: str, labels: str, value, stamp: int) -> list[str]:
    return [f"# HELP {name} {description}", f"# TYPE {name} {kind}",
            f"{name}{labels} {value} {stamp}"]  # fmt: skip


def _ticker(name: str, labels: str, value, stamp: int) -> list[str]:
    rocksdb = "Intents" if name.startswith("intentsdb_") else "Regular"
    return _entry(name, "gauge", f"Per-tablet {rocksdb} Rocksdb Ticker for {name}", labels,
                  value, stamp)  # fmt: skip


def flushed_sizes(vm: dict) -> dict[str, int]:
    """What the cluster's flushes left in SST files: table oid -> bytes (`flush_table`)."""
    path = Path(vm.get("flushed") or "/nonexistent")
    return json.loads(path.read_text()) if path.exists() else {}


def prometheus_metrics(vm: dict, instance: str) -> str:
    """The stand-in tserver's /prometheus-metrics, read now."""
    stamp = int(time.time() * 1000)
    server = f'{{metric_type="server",exported_instance="{instance}"}}'
    lines = _entry("threads_running", "gauge", "Current number of running threads", server,
                   threading.active_count(), stamp)  # fmt: skip
    what = "Microseconds spent handling yb.tserver.TabletServerService.Read() RPC requests"
    for suffix in ("_sum", "_count"):
        lines += _entry(HISTOGRAM + suffix, "counter", what, server, 0, stamp)
    for quantile in QUANTILES:
        labels = f'{{quantile="{quantile}",metric_type="server",exported_instance="{instance}"}}'
        lines += _entry(HISTOGRAM, "gauge", what, labels, 0, stamp)
    if vm.get("ysql"):
        host, port = vm["ysql"].rsplit(":", 1)
        psql = str(Path(vm["postgres"]).with_name("psql"))
        out = subprocess.run(
            [psql, "-X", "-A", "-t", "-h", host, "-p", port, "-U", "yugabyte", "-d", "yugabyte",
             "-c", STATS_SQL], capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        flushed = flushed_sizes(vm)
        for line in out.split():
            oid, name, data_hit, data_read, index_hit, index_read = line.split("|")
            table = (f'{{table_id="000033e800003000800000000000{int(oid):04x}",'
                     f'table_name="{name}",table_type="PGSQL_TABLE_TYPE",'
                     f'namespace_name="yugabyte",metric_type="tablet",'
                     f'exported_instance="{instance}"}}')  # fmt: skip
            hits = {"data": int(data_hit), "index": int(index_hit), "filter": 0}
            misses = {"data": int(data_read), "index": int(index_read), "filter": 0}
            values = {"rocksdb_block_cache_hit": sum(hits.values()),
                      "rocksdb_block_cache_miss": sum(misses.values()),
                      **{f"rocksdb_block_cache_{k}_hit": v for k, v in hits.items()},
                      **{f"rocksdb_block_cache_{k}_miss": v for k, v in misses.items()},
                      "rocksdb_current_version_sst_files_size": flushed.get(oid, 0)}  # fmt: skip
            for metric, value in values.items():
                lines += _ticker(metric, table, value, stamp)
                lines += _ticker(f"intentsdb_{metric}", table, 0, stamp)
    return "\n".join(lines) + "\n"


# yb-admin's `flush_table` (src/yb/tools/yb-admin_cli.cc, flush_table_args: "<table>
# [<timeout_in_seconds>] (default 20) [ADD_INDEXES] (default false)", the table
# `<namespace> <table_name>`, the namespace `[(ycql|ysql).]<namespace_name>`).
def flush_table(boot_folder: str, psql: str, argv: list[str]) -> int:
    """The yb-admin stand-in's flush_table: `-master_addresses <masters> flush_table
    ysql.<database> <table> [timeout] [ADD_INDEXES]`. The cluster is the booted one whose
    masters these are (its addresses.json); the table must exist in its database (exit 1 as
    yb-admin does otherwise); what it holds now (pg_total_relation_size) is what its tservers'
    SST files hold from now on (`prometheus_metrics`), until the next flush."""
    if len(argv) < 5 or argv[0] != "-master_addresses" or argv[2] != "flush_table":
        print(f"Invalid arguments for operation: {argv}", file=sys.stderr)
        return 1
    masters, namespace, table, rest = argv[1], argv[3], argv[4], argv[5:]
    timeouts = [r for r in rest if r.upper() != "ADD_INDEXES"]
    if len(timeouts) > 1 or any(not t.isdigit() for t in timeouts):
        print(f"Invalid arguments for operation: {rest}", file=sys.stderr)
        return 1
    if not namespace.startswith("ysql."):
        print(f"flush_table: {namespace}: not a YSQL database (ysql.<name>)", file=sys.stderr)
        return 1
    clusters = [p for p in Path(boot_folder).glob("*/addresses.json")
                if ",".join(f"{ip}:7100" for ip in json.loads(p.read_text())["masters"])
                == masters]  # fmt: skip
    if len(clusters) != 1:
        print(f"flush_table: no cluster has the masters {masters}", file=sys.stderr)
        return 1
    host, port = json.loads(clusters[0].read_text())["ysql"].rsplit(":", 1)
    sql = (f"SELECT c.oid, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
           f"ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname = '{table}' "
           "AND c.relkind = 'r'")  # fmt: skip
    out = subprocess.run(
        [psql, "-X", "-A", "-t", "-h", host, "-p", port, "-U", "yugabyte",
         "-d", namespace.removeprefix("ysql."), "-c", sql],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if out.returncode != 0 or not out.stdout.strip():
        print(f"Error running flush_table: Not found: table {namespace}.{table} "
              f"{out.stderr.strip()}", file=sys.stderr)  # fmt: skip
        return 1
    oid, size = out.stdout.strip().split("|")
    path = clusters[0].with_name("flushed.json")
    sizes = json.loads(path.read_text()) if path.exists() else {}
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_text(json.dumps({**sizes, oid: int(size)}))
    partial.replace(path)
    return 0


def serve(server: str, flags_file: str) -> int:
    """A stand-in server past gflags: its web endpoints on the VM's address until the VM is
    gone. The tserver first has PostgreSQL parse its ysql_pg.conf (exit 1 when it refuses)."""
    vm = json.loads(Path(os.environ[VM_ENV]).read_text())
    flags = read_flags(Path(flags_file))
    Path(flags_file).unlink()
    answers = {"/api/v1/varz": varz(flags)}
    if server == "yb-master":
        masters = flags["master_addresses"][0].split(",")
        answers["/api/v1/masters"] = {
            "masters": [{"role": "LEADER" if i == 0 else "FOLLOWER"} for i in range(len(masters))]
        }
    else:
        conf, names = ysql_pg_conf(flags, Path(vm["postgresql_conf_sample"]))
        shown = {}
        for name in names:
            try:
                shown[name] = postgres_reads(vm["postgres"], conf, name)
            except ValueError as exc:
                print(f"yb-tserver: PostgreSQL refuses {conf}: {exc}", file=sys.stderr)
                return 1
        (Path(vm["root"]) / "ysql_settings.json").write_text(json.dumps(shown, indent=1))

    instance = f"{vm['address']}:{vm['web_port'][server]}"

    class Web(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if server == "yb-tserver" and path == "/prometheus-metrics":
                try:
                    body, kind = prometheus_metrics(vm, instance).encode(), "text/plain"
                except (OSError, ValueError, subprocess.SubprocessError) as exc:
                    self.send_error(500, str(exc)[:200])
                    return
                self.send_response(200)
            else:
                answer = answers.get(path)
                body, kind = json.dumps(answer).encode(), "application/json"
                self.send_response(200 if answer is not None else 404)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    web = ThreadingHTTPServer((vm["address"], int(vm["web_port"][server])), Web)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set() and Path(vm["alive"]).exists():
        stop.wait(0.5)
    web.shutdown()
    return 0


# ------------------------------------------------------------------------ the VM and its boot


@dataclass(frozen=True)
class Vm:
    """One stand-in VM: its folder (what it keeps on its disks), the loopback address it
    answers on, its servers' web ports, and the file whose existence is its life (its stack's
    state file)."""

    name: str
    root: str
    address: str
    web_port: dict  # server -> port
    alive: str
    postgres: str
    postgresql_conf_sample: str
    # host:port of the PostgreSQL standing in for the cluster's data when this tserver holds
    # it (its pg_stat_database is this tserver's block cache: `prometheus_metrics`); "" none
    ysql: str = ""
    # the cluster's flushes (`flush_table`): table oid -> bytes its SST files hold; "" none
    flushed: str = ""

    def write(self) -> Path:
        path = Path(self.root) / "vm.json"
        path.write_text(json.dumps(asdict(self)))
        return path


STUBS = {  # what a fresh image does that this machine may not: logged, and done
    "apt-get": 'echo "apt-get $*" >> "$YBSCALE_VM_LOG"\n',
    "locale-gen": 'echo "locale-gen $*" >> "$YBSCALE_VM_LOG"\n',
    "update-locale": 'echo "update-locale $*" >> "$YBSCALE_VM_LOG"\n',
    "locale": "echo C\necho C.utf8\necho en_US.utf8\necho POSIX\n",
}
MOUNTED = ("opt", "mnt", "etc/systemd/system", "var/lib")  # the VM's own, over this machine's


def boot(script: str, vm: Vm, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `script` as the VM's startup script (bash, as root, in a mount namespace whose
    MOUNTED paths are the VM's folders); its output in <root>/startup.log."""
    root = Path(vm.root)
    stubs = root / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    # only `enable --now` starts anything (`systemctl`): the other verbs are logged here, as
    # `systemctl` logs them, without starting Python (a boot calls systemctl five times)
    systemctl_stub = ('case "$1 $2" in "enable --now") ;; *) echo "systemctl $*" >> '
                      f'"$YBSCALE_VM_LOG"; exit 0;; esac\nexec {sys.executable} {HERE} '
                      'systemctl "$@"\n')  # fmt: skip
    for name, body in {**STUBS, "systemctl": systemctl_stub}.items():
        (stubs / name).write_text("#!/bin/sh\n" + body)
        (stubs / name).chmod(0o755)
    mounts = []
    for path in MOUNTED:
        (root / path).mkdir(parents=True, exist_ok=True)
        mounts.append(f"mount --bind {root / path} /{path}")
    (root / "startup-script").write_text(script)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", VM_ENV: str(vm.write()),
           "YBSCALE_VM_LOG": str(root / "stubs.log")}  # fmt: skip
    with open(root / "startup.log", "ab") as log:
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             " && ".join(mounts) + ' && exec bash "$0"', str(root / "startup-script")],
            env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
        )  # fmt: skip


def systemctl(args: list[str]) -> int:
    """systemctl as the startup scripts use it: `enable --now <unit>` starts the unit's
    ExecStart= (once: a unit already running is left alone) with its Environment= and the VM's
    description, its output in /var/log of the VM; anything else is logged and done."""
    vm = json.loads(Path(os.environ[VM_ENV]).read_text())
    root = Path(vm["root"])
    with open(root / "stubs.log", "a") as log:
        log.write("systemctl " + " ".join(args) + "\n")
    if args[:2] != ["enable", "--now"]:
        return 0
    name = args[2]
    unit = Path(f"/etc/systemd/system/{name}.service").read_text()
    [line] = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    argv = systemd_exec_argv(line.removeprefix("ExecStart="))
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", VM_ENV: os.environ[VM_ENV]}
    for ln in unit.splitlines():
        if ln.startswith("Environment="):
            env.update(word.split("=", 1) for word in ln.removeprefix("Environment=").split())
    pid_file = root / f"{name}.pid"
    if unit_pid(pid_file) is not None:
        return 0
    status = root / f"{name}.status"  # its exit status once it ends (systemd's Result=)
    status.unlink(missing_ok=True)
    watch = ["sh", "-c", '"$@"; echo $? > "$0"', str(status), *argv]
    with open(root / f"{name}.log", "ab") as out:
        proc = subprocess.Popen(watch, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    from ybscale.backends.base import start_time

    pid_file.write_text(f"{proc.pid} {start_time(proc.pid)}")  # a pid is reused: and its start
    return 0


def unit_pid(pid_file: Path) -> int | None:
    """The pid of the unit `pid_file` names while that very process lives (not a zombie, and
    started when the pid file says: the suite starts more processes than pid_max, so a dead
    unit's pid soon names another process), else None."""
    from ybscale.backends.base import alive, start_time

    try:
        pid, started = pid_file.read_text().split()
    except (OSError, ValueError):
        return None
    return int(pid) if start_time(int(pid)) == started and alive(int(pid)) else None


def unit_exited(vm: Vm, name: str) -> int | None:
    """The exit status of the VM's unit `name` once it has ended (None: running; -1: never
    started)."""
    root = Path(vm.root)
    if not (root / f"{name}.pid").exists():
        return -1
    status = root / f"{name}.status"
    text = status.read_text().strip() if status.exists() else ""
    return int(text) if text else None


def running(folder: Path) -> list[str]:
    """The units still running on the VMs under `folder` (their pid files' live processes)."""
    found = []
    for pid_file in folder.rglob("*.pid") if folder.exists() else []:
        if unit_pid(pid_file) is not None:
            found.append(f"{pid_file.parent.name} {pid_file.stem}")
    return found


def stop_vms(folder: Path) -> None:
    """SIGTERM to every unit the VMs under `folder` started, then SIGKILL to any left after 10 s
    (the site's teardown; a VM's servers stop by themselves when its stack is destroyed)."""
    pids = [pid for p in folder.rglob("*.pid") if (pid := unit_pid(p)) is not None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while (
            sig == signal.SIGTERM
            and time.monotonic() < deadline
            and any(Path(f"/proc/{pid}").exists() for pid in pids)
        ):
            time.sleep(0.2)


# --------------------------------------------------------------------- the download host


@dataclass(frozen=True)
class Release:
    """A release on the loopback download host: its URL template (as gcp.yugabyte.url) and
    the tarball's SHA-256."""

    url: str
    sha256: str


def release_host(folder: Path, version: str, series: str, compiler: str, address: str):
    """An HTTP server on `address` laid out as YugabyteDB's download host
    (/releases/<release>/yugabyte-<version>-linux-x86_64.tar.gz and its .sha): a tarball of
    the stand-in servers and a post_install.sh. Returns (server, Release); the caller serves
    and stops it."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler

    release = version.split("-", 1)[0]
    top = folder / "build" / f"yugabyte-{release}"
    (top / "bin").mkdir(parents=True, exist_ok=True)
    for server in ("yb-master", "yb-tserver"):
        shutil.copy(stand_in_server(series, server, folder / "compiled", compiler),
                    top / "bin" / server)  # fmt: skip
    post = top / "bin" / "post_install.sh"
    post.write_text('#!/bin/sh\ntouch "$(dirname "$0")/../.post_install_done"\n')
    post.chmod(0o755)
    site = folder / "site" / "releases" / release
    site.mkdir(parents=True, exist_ok=True)
    tarball = site / f"yugabyte-{version}-linux-x86_64.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    Path(f"{tarball}.sha").write_text(f"{digest}  {tarball.name}\n")

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer((address, 0), partial(Quiet, directory=str(folder / "site")))
    host, port = httpd.server_address[:2]
    url = f"http://{host}:{port}/releases/{{release}}/yugabyte-{{version}}-linux-x86_64.tar.gz"
    return httpd, Release(url=url, sha256=digest)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        sys.exit(serve(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "systemctl":
        sys.exit(systemctl(sys.argv[2:]))
    if sys.argv[1] == "flush_table":  # the yb-admin stand-in's (tests/loopback.py)
        sys.exit(flush_table(sys.argv[2], sys.argv[3], sys.argv[4:]))
    sys.exit(f"{sys.argv[0]}: serve, systemctl or flush_table, not {sys.argv[1]!r}")
