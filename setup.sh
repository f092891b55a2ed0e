#!/usr/bin/env bash
# Sets up a fresh Debian machine for ybscale: PostgreSQL server binaries (initdb, postgres,
# pgbench ship in postgresql-15, not in the client package), ssh tools, and a virtual
# environment in .venv with the pinned Python dependencies. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

have_pg() {
  local dir
  dir=$(pg_config --bindir 2>/dev/null || true)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pgbench" ] && return 0
  ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1
}

packages=()
have_pg || packages+=(postgresql-15)
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)
[ -x /usr/sbin/sshd ] || packages+=(openssh-server)
command -v ssh-keygen >/dev/null || packages+=(openssh-client)
command -v shellcheck >/dev/null || packages+=(shellcheck)  # tests/backends/test_infra.py: startup scripts
command -v systemd-analyze >/dev/null || packages+=(systemd)  # tests/backends/test_infra.py: unit files
command -v chromium >/dev/null || packages+=(chromium)  # report rendering test (headless)
# tests/backends/test_infra.py, test_yb_catalogue.py: stand-in yb servers on the real gflags
command -v g++ >/dev/null || packages+=(g++)
[ -f /usr/include/gflags/gflags.h ] || packages+=(libgflags-dev)
if [ ${#packages[@]} -gt 0 ]; then
  echo "setup: installing ${packages[*]}" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"
  # Debian starts a default cluster on port 5432 at install time; ybscale does not use it.
  $sudo pg_ctlcluster 15 main stop 2>/dev/null || true
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip
# dev: the tests and linters; gcp: the gcp backend (Pulumi), which the tests rehearse on loopback
.venv/bin/pip install -q -e ".[dev,gcp]"
# pip writes bytecode for what it installs, not for an editable package's sources; with
# PYTHONDONTWRITEBYTECODE set (as on this image) every Snakemake run and job script would
# otherwise compile ybscale's modules again (about 55 ms per process for the Snakefile's imports)
.venv/bin/python -m compileall -q src infra
echo "setup: ready ($(.venv/bin/snakemake --version | head -n1) snakemake, $(.venv/bin/python --version))" >&2
