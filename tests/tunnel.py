"""A stand-in for the IAP tunnel gcp's SSH goes through (`gcp.ssh_access: iap`): an OpenSSH
ProxyCommand that relays its stdin and stdout to a TCP address, carrying at most RATE bytes a
second towards this machine (the direction Google bills as egress; an IAP TCP forwarding
tunnel is meant for administration, not bulk data) and keeping in COUNTER, a folder, how many
bytes each connection carried that way so far (one file per connection, `carried` sums them;
each chunk is counted before it is passed on, so a copy that has ended is counted whole).

    ProxyCommand python tunnel.py RATE COUNTER %h %p
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path


def relay(host: str, port: int, rate: float, counter: Path) -> None:
    sock = socket.create_connection((host, port))
    mine = counter / str(os.getpid())

    def up() -> None:  # this machine's bytes to the far end, as they come
        while data := os.read(0, 65536):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=up, daemon=True).start()
    total, started = 0, time.monotonic()
    while data := sock.recv(16384):
        ahead = (total + len(data)) / rate - (time.monotonic() - started)
        if ahead > 0:  # at most `rate` bytes a second since the connection opened
            time.sleep(ahead)
        total += len(data)  # counted before it is passed on (ssh may end the relay at once)
        scratch = counter / f".{os.getpid()}"
        scratch.write_text(str(total))
        os.replace(scratch, mine)  # whole: a relay ended mid-write leaves the last total
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]


def carried(counter: Path) -> int:
    """Bytes every connection through the tunnel carried towards this machine so far."""
    return sum(int(p.read_text() or 0) for p in Path(counter).glob("*") if p.name.isdigit())


if __name__ == "__main__":
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):  # ssh closing the connection
        signal.signal(sig, lambda *_: os._exit(0))
    folder = Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    try:
        relay(sys.argv[3], int(sys.argv[4]), float(sys.argv[1]), folder)
    except (BrokenPipeError, ConnectionResetError):
        pass
