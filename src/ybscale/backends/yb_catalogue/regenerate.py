"""Rebuild a series' catalogue from a yugabyte-db git checkout at the release tag.

    python -m ybscale.backends.yb_catalogue.regenerate --git-dir ~/yugabyte-db/.git \\
        --tag 2024.2.1.0-b185 --series 2024.2 > src/ybscale/backends/yb_catalogue/2024.2.json

Read at the tag (``git show <tag>:<path>``, ``git grep <tag>``), as initdb builds a fresh cluster:
- the functions in OBJECTS from ``src/postgres/src/include/catalog/pg_proc.dat`` (argument and
  OUT column names and types) and the views from ``src/postgres/src/backend/catalog/
  yb_system_views.sql`` (their select lists over those functions);
- every gflag name a ``DEFINE_*`` macro defines under ``src/yb`` and its C++ type (``*_PG_FLAG``
  and ``*_PG_PREVIEW_FLAG`` macros define ``ysql_<name>``, ``DEFINE_test_flag``
  ``TEST_<name>``; a macro's arguments may continue on its next line), test files left out,
  by where it is
  defined: ``src/yb/master`` is yb-master's own code, ``src/yb/tserver`` and ``src/yb/yql``
  (YSQL, YCQL) yb-tserver's, every other directory (common, util, consensus, docdb, rpc, ...)
  is linked into both servers: the master and tserver flag names ``server.*`` knobs are routed
  by (a name of both goes to both);
- every GUC name of YSQL's PostgreSQL (``{"name", PGC_...`` entries of guc.c / guc_tables.c),
  leaving out the entries a release build compiles out (``#ifdef LOCK_DEBUG`` and the other
  debug-only macros) and listing apart those no configuration file can set (PGC_INTERNAL, or
  GUC_DISALLOW_IN_FILE): ``--ysql_pg_conf_csv`` writes the server's configuration file;
- the PostgreSQL version the series is based on (``PACKAGE_VERSION`` in src/postgres/configure).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable

OBJECTS = {  # what ybscale queries: name -> kind
    "yb_local_tablets": "view",
    "yb_servers": "function",
    "yb_table_properties": "function",
    "yb_get_effective_transaction_isolation_level": "function",
    "yb_tablet_metadata": "view",
}
FLAGS_SET = {  # what infra/ybscale_infra/startup.py passes to each server
    "yb-tserver": [
        "tserver_master_addrs", "rpc_bind_addresses", "fs_data_dirs", "enable_ysql",
        "pgsql_proxy_bind_address", "yb_enable_read_committed_isolation", "start_cql_proxy",
        "placement_cloud", "placement_region", "placement_zone", "ysql_pg_conf_csv",
    ],
    "yb-master": [
        "master_addresses", "rpc_bind_addresses", "fs_data_dirs", "replication_factor",
        "enable_ysql", "placement_cloud", "placement_region", "placement_zone",
    ],
}  # fmt: skip
PG_PROC = "src/postgres/src/include/catalog/pg_proc.dat"
VIEWS = "src/postgres/src/backend/catalog/yb_system_views.sql"
GUC_FILES = (
    "src/postgres/src/backend/utils/misc/guc.c",
    "src/postgres/src/backend/utils/misc/guc_tables.c",
)
CONFIGURE = "src/postgres/configure"
# pg_proc.dat type names -> how format_type() prints them
TYPES = {"int8": "bigint", "int4": "integer", "int2": "smallint", "bool": "boolean",
         "float8": "double precision", "_text": "text[]", "_int4": "integer[]"}  # fmt: skip
# DEFINE_<kind>_<type>(name, ...) with the name on the macro's line or the next
_DEFINE = re.compile(
    r"\bDEFINE_(?:[A-Z_]*_)?(bool|int32|uint32|int64|uint64|double|string)\(\s*(\w+)\s*,"
)
_TEST_FLAG = re.compile(r"\bDEFINE_test_flag\(\s*\w+\s*,\s*(\w+)\s*,")
# DEFINE_RUNTIME_PG_FLAG(type, name, ...), ..._AUTO_PG_FLAG, ..._PG_PREVIEW_FLAG: ysql_<name>
_PG_FLAG = re.compile(r"\bDEFINE_[A-Z_]*PG_(?:PREVIEW_)?FLAG\(\s*(\w+)\s*,\s*(\w+)\s*,")
_GUC = re.compile(r'\{\s*"([A-Za-z_][A-Za-z0-9_.]*)",\s*(PGC_[A-Z_]+)')
# macros a release build leaves undefined (pg_config_manual.h defines TRACE_SORT, so trace_sort
# stays): the GUCs inside `#ifdef <macro>` do not exist in the server YugabyteDB ships
DEBUG_ONLY_MACROS = frozenset(
    {"LOCK_DEBUG", "WAL_DEBUG", "BTREE_BUILD_STATS", "TRACE_SYNCSCAN", "DEBUG_BOUNDED_SORT"}
)
_IFDEF = re.compile(r"^\s*#\s*(ifdef|ifndef|if|else|elif|endif)\b\s*(\w*)")
MASTER_DIRS = ("src/yb/master/",)  # yb-master's own code
TSERVER_DIRS = ("src/yb/tserver/", "src/yb/yql/")  # yb-tserver's own code (with YSQL, YCQL)
# under src/yb/tserver but linked into both: both servers' main() calls its memory setup
# (use_memory_defaults_optimized_for_ysql and the other flags it defines)
BOTH_FILES = ("src/yb/tserver/server_main_util.cc",)
_DAT_ENTRY = re.compile(r"\{((?:[^{}']|'(?:[^'\\]|\\.)*')*)\}")  # braces inside quotes kept
_DAT_FIELD = re.compile(r"(\w+) => '((?:[^'\\]|\\.)*)'")


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True
    ).stdout


def show(git_dir: str, tag: str, path: str) -> str | None:
    try:
        return git(git_dir, "show", f"{tag}:{path}")
    except subprocess.CalledProcessError:
        return None


def sql_type(name: str) -> str:
    return TYPES.get(name, name)


def functions(pg_proc_dat: str) -> dict[str, dict]:
    """Functions of OBJECTS defined in pg_proc.dat: arguments, OUT columns, result."""
    found = {}
    for entry in _DAT_ENTRY.findall(pg_proc_dat):
        fields = dict(_DAT_FIELD.findall(entry))
        name = fields.get("proname")
        if name not in OBJECTS and name != "yb_get_tablet_metadata":
            continue
        names = fields.get("proargnames", "{}").strip("{}").split(",")
        modes = fields.get("proargmodes", "{}").strip("{}").split(",")
        if "proallargtypes" in fields:
            types = fields["proallargtypes"].strip("{}").split(",")
        else:
            types = fields.get("proargtypes", "").split()
            modes = ["i"] * len(types)
        pairs = list(zip(names, modes, (sql_type(t) for t in types), strict=False))
        found[name] = {
            "kind": "function",
            "arguments": [[n, t] for n, m, t in pairs if m in ("i", "b")],
            "columns": [[n, t] for n, m, t in pairs if m in ("o", "b", "t")],
            "returns": sql_type(fields.get("prorettype", "void")),
            "returns_set": fields.get("proretset") == "t",
        }
        if not found[name]["columns"]:
            del found[name]["columns"]
    return found


def _split_top(text: str) -> list[str]:
    """Comma-separated items of a select list, commas inside parentheses or CASE kept."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def views(system_views: str, funcs: dict[str, dict]) -> dict[str, dict]:
    """Views of OBJECTS: their columns, typed from the function they select from."""
    found = {}
    for name in (n for n, kind in OBJECTS.items() if kind == "view"):
        match = re.search(
            rf"CREATE (?:OR REPLACE )?VIEW\s+(?:pg_catalog\.)?{name}\b.*?\bAS\s+SELECT\s+(.*?)"
            r"\s+FROM\s+(\w+)\(\)",
            re.sub(r"--[^\n]*", "", system_views),
            re.DOTALL | re.IGNORECASE,
        )
        if not match:
            continue
        select, source = match[1], funcs.get(match[2], {})
        source_types = dict(source.get("columns", []))
        if select.strip() == "*":
            columns = [list(c) for c in source.get("columns", [])]
        else:
            columns = []
            for item in _split_top(select):
                alias = re.search(r"\bAS\s+(\w+)\s*$", item, re.IGNORECASE)
                expr = item[: alias.start()].strip() if alias else item
                column = alias[1] if alias else expr.split(".")[-1]
                cast = re.findall(r"::(\w+)", expr)  # the last cast types a CASE ... END
                ref = expr.split(".")[-1]
                columns.append([column, cast[-1] if cast else source_types.get(ref, "unknown")])
        found[name] = {"kind": "view", "columns": columns}
    return found


def _flag_types(text: str) -> dict[str, str]:
    """Flag name -> C++ type of the DEFINE_* macros in a source file's text (a macro's name
    may sit on the line after it); test flags as TEST_<name>."""
    types = {name: kind for kind, name in _DEFINE.findall(text)}
    types |= {f"ysql_{name}": kind for kind, name in _PG_FLAG.findall(text)}
    return types | {f"TEST_{n}": "test" for n in _TEST_FLAG.findall(text)}


def flag_definitions(git_dir: str, tag: str) -> dict[str, tuple[str, str]]:
    """Flag name -> (C++ type, the file defining it) of every gflag a DEFINE_* macro defines
    under src/yb at `tag`, tests left out: each file with a DEFINE_ read whole, since a
    macro's arguments may continue on its next lines."""
    out = git(git_dir, "grep", "-l", "-E", "DEFINE_[A-Za-z0-9_]*\\(", tag, "--", "src/yb/*.cc",
              ":(exclude)*-test.cc", ":(exclude)*_test.cc", ":(exclude)*-itest.cc")  # fmt: skip
    found: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        path = line.split(":", 1)[1]  # `git grep -l <tag>` prints <tag>:<path>
        for name, kind in _flag_types(show(git_dir, tag, path) or "").items():
            found.setdefault(name, (kind, path))
    return found


def flag_names(git_dir: str, tag: str, defined: dict | None = None) -> dict[str, list[str]]:
    """Every gflag a DEFINE_* macro defines under src/yb at `tag`, tests left out, by server:
    {"yb-master": [...], "yb-tserver": [...]}; a flag of shared code is in both."""
    defined = flag_definitions(git_dir, tag) if defined is None else defined
    by_file: dict[str, set[str]] = {}
    for name, (_, path) in defined.items():
        by_file.setdefault(path, set()).add(name)
    master, tserver = set(), set()
    for path, names in by_file.items():
        if not path.startswith(TSERVER_DIRS) or path in BOTH_FILES:
            master |= names
        if not path.startswith(MASTER_DIRS):
            tserver |= names
    return {"yb-master": sorted(master), "yb-tserver": sorted(tserver)}


def guc_entries(source: str) -> dict[str, str]:
    """GUC name -> context (PGC_USERSET, ...) of the entries a release build compiles; a name
    no configuration file can set gets the context "file-disallowed" unless it is internal."""
    found, stack = {}, []  # stack: whether each open #if block is compiled out
    lines = source.splitlines()
    for i, line in enumerate(lines):
        directive = _IFDEF.match(line)
        if directive:
            kind, macro = directive.groups()
            if kind in ("ifdef", "if", "ifndef"):
                stack.append(kind == "ifdef" and macro in DEBUG_ONLY_MACROS)
            elif kind in ("else", "elif") and stack:
                stack[-1] = False
            elif kind == "endif" and stack:
                stack.pop()
            continue
        if any(stack):
            continue
        for match in _GUC.finditer("\n".join(lines[i : i + 2])):
            if match.start() > len(line):  # an entry whose name is on the next line
                continue
            name, context = match.groups()
            head = "\n".join(lines[i : i + 40])
            flags = head[: head.find("}", head.find(name)) + 1]  # up to the end of the header
            found[name] = (
                "file-disallowed"
                if "GUC_DISALLOW_IN_FILE" in flags and context != "PGC_INTERNAL"
                else context
            )
    return found


def guc_names(sources: Iterable[str]) -> list[str]:
    """Settable GUC names (a configuration file can set them) of the sources."""
    return sorted(
        name
        for text in sources
        for name, context in guc_entries(text).items()
        if context not in ("PGC_INTERNAL", "file-disallowed")
    )


def guc_names_not_settable(sources: Iterable[str]) -> list[str]:
    """GUC names the server defines that no configuration file can set."""
    return sorted(
        name
        for text in sources
        for name, context in guc_entries(text).items()
        if context in ("PGC_INTERNAL", "file-disallowed")
    )


def build(git_dir: str, tag: str, series: str) -> dict:
    pg_proc = show(git_dir, tag, PG_PROC) or ""
    funcs = functions(pg_proc)
    objects = {**{n: f for n, f in funcs.items() if n in OBJECTS},
               **views(show(git_dir, tag, VIEWS) or "", funcs)}  # fmt: skip
    for obj in objects.values():
        path = PG_PROC if obj["kind"] == "function" else VIEWS
        obj["sources"] = [{"path": path, "tag": tag}]
    definitions = flag_definitions(git_dir, tag)
    flags = flag_names(git_dir, tag, definitions)
    defined = set(flags["yb-master"]) | set(flags["yb-tserver"])
    missing = [
        (server, f) for server, names in FLAGS_SET.items() for f in names if f not in defined
    ]
    # a server also takes the flags of code it links from another's directory (yb-master takes
    # enable_ysql, defined in src/yb/tserver in recent releases): those ybscale passes are added
    for server, names in FLAGS_SET.items():
        flags[server] = sorted(set(flags[server]) | (set(names) & defined))
    if missing:
        raise SystemExit(f"{tag}: flags ybscale sets are not defined: {missing}")
    configure = show(git_dir, tag, CONFIGURE) or ""
    gucs = [show(git_dir, tag, p) or "" for p in GUC_FILES]
    pg = re.search(r"PACKAGE_VERSION='([\d.]+)", configure)
    release = tag.split("-")[0]
    return {
        "series": series,
        "release": release,
        "tag": tag,
        "postgres_base": pg[1] if pg else None,
        "version_string": f"PostgreSQL {pg[1] if pg else '?'}-YB-{release}-b0",
        "how_read": f"regenerate.py from a yugabyte-db checkout at {tag}",
        "objects": objects,
        "absent_objects": {n: f"not defined at {tag}" for n in OBJECTS if n not in objects},
        "flags_set_by_ybscale": {
            server: {f: {"defined_at": tag} for f in names} for server, names in FLAGS_SET.items()
        },
        "master_flag_names_source": (
            f"every DEFINE_* gflag under src/yb at {tag} (tests excluded) but those of "
            f"{', '.join(TSERVER_DIRS)}, and the flags ybscale passes to yb-master"
        ),
        "master_flag_names": flags["yb-master"],
        "tserver_flag_names_source": (
            f"every DEFINE_* gflag under src/yb at {tag} (tests excluded) but those of "
            f"{', '.join(MASTER_DIRS)}, and the flags ybscale passes to yb-tserver"
        ),
        "tserver_flag_names": flags["yb-tserver"],
        "flag_sources": {
            name: {
                "servers": [s for s in ("yb-master", "yb-tserver") if name in flags[s]],
                **({"defined_in": definitions[name][1], "tag": tag} if name in definitions else {}),
            }
            for name in sorted(defined)
        },
        "flag_types_source": f"the DEFINE_* macro of each flag at {tag} (its C++ type)",
        "flag_types": {
            name: {"type": kind, "defined_in": path, "tag": tag}
            for name, (kind, path) in sorted(definitions.items())
            if name in defined and kind != "test"
        },
        "ysql_setting_names_source": (
            f"GUC tables of src/postgres at {tag}, entries of "
            f"{', '.join(sorted(DEBUG_ONLY_MACROS))} blocks left out"
        ),
        "ysql_setting_names": guc_names(gucs),
        "ysql_setting_names_not_settable": guc_names_not_settable(gucs),
    }


def dump(catalogue: dict) -> str:
    """JSON with one line per column and per source, long name lists wrapped."""
    text = json.dumps(catalogue, indent=1, sort_keys=False)
    # [name, type] pairs on one line each
    return re.sub(r'\[\n\s*("[^"\n]*"),\n\s*("[^"\n]*")\n\s*\]', r"[\1, \2]", text) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--git-dir", required=True, help="a yugabyte-db .git (or bare) directory")
    parser.add_argument("--tag", required=True, help="release tag, e.g. 2024.2.1.0-b185")
    parser.add_argument("--series", required=True, help="release series, e.g. 2024.2")
    args = parser.parse_args(argv)
    sys.stdout.write(dump(build(args.git_dir, args.tag, args.series)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
