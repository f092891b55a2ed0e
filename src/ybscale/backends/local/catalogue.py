"""The installed PostgreSQL server's own catalogue of settings, read without a running server.

``postgres --describe-config`` lists every setting with its context; ``postgres -C name -c
name=value ...`` on an empty data directory makes the server check each value (type, range,
units, enum members) and exit. Used to check ``server.*`` and ``session.*`` levels before any
cluster starts.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path

# contexts a session may change (ybscale connects as a superuser)
SESSION_CONTEXTS = ("user", "superuser")
FIXED_CONTEXTS = ("internal",)


@cache
def describe(bindir: str) -> dict[str, str]:
    """Setting name -> context (user, superuser, sighup, postmaster, internal, ...)."""
    out = subprocess.run(
        [str(Path(bindir) / "postgres"), "--describe-config"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    table = {}
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) > 1:
            table[parts[0]] = parts[1]
    return table


def _runas(user: str) -> list[str]:
    if os.geteuid() != 0:
        return []
    pwd.getpwnam(user)
    return ["runuser", "-u", user, "--"]


def invalid_value(bindir: str, settings: list[tuple[str, str]], user: str) -> str | None:
    """The server's complaint about the first bad (name, value), or None when all are valid."""
    if not settings:
        return None
    tmp = Path(tempfile.mkdtemp(prefix="ybscale-guc-"))
    try:
        tmp.chmod(0o755)
        (tmp / "postgresql.conf").write_text("")
        if os.geteuid() == 0:
            entry = pwd.getpwnam(user)
            for path in (tmp, tmp / "postgresql.conf"):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        argv = [*_runas(user), str(Path(bindir) / "postgres"), "-D", str(tmp)]
        argv += ["-C", settings[0][0]]
        for name, value in settings:
            argv += ["-c", f"{name}={value}"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out.returncode == 0:
        return None
    lines = [ln for ln in out.stderr.splitlines() if "FATAL" in ln or "HINT" in ln]
    return " ".join(re.sub(r"^.*?(FATAL|HINT):\s*", "", ln) for ln in lines) or out.stderr.strip()


def check_settings(
    bindir: str, server: Mapping[str, dict], session: Mapping[str, dict], user: str
) -> list[str]:
    """Errors for unknown names, settings a session cannot change, and values the server rejects.

    `server` / `session`: setting name -> {value: "file: field" it came from}.
    """
    table = describe(bindir)
    errors = []
    for kind, settings in (("server", server), ("session", session)):
        for name, values in sorted(settings.items()):
            where = next(iter(values.values()))
            context = table.get(name)
            if context is None:
                errors.append(
                    f"{where}: {kind}.{name}: no such setting in PostgreSQL "
                    f"({Path(bindir) / 'postgres'} --describe-config)"
                )
            elif context in FIXED_CONTEXTS:
                errors.append(f"{where}: {kind}.{name}: cannot be set (context {context})")
            elif kind == "session" and context not in SESSION_CONTEXTS:
                errors.append(
                    f"{where}: session.{name}: a session cannot change it (context {context});"
                    f" use server.{name}"
                )
    if errors:
        return errors
    pairs = [
        (name, value)
        for settings in (server, session)
        for name, values in sorted(settings.items())
        for value in values
    ]
    if invalid_value(bindir, pairs, user) is None:  # one server start-up checks them all
        return []
    for kind, settings in (("server", server), ("session", session)):  # find which: one each
        for name, values in sorted(settings.items()):
            for value, where in values.items():
                complaint = invalid_value(bindir, [(name, value)], user)
                if complaint:
                    errors.append(f"{where}: {kind}.{name}: {value!r}: {complaint}")
    return errors
