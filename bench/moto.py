"""moto's S3 server on a free port of 127.0.0.1 (``moto[server]``), for the S3 benchmark and the
S3 tests: started as a process of its own, returned once it answers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

#: The credentials the server takes (it checks none).
KEY = "testing"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_moto(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """moto's server on a free port of 127.0.0.1, once it answers; the process and its endpoint."""
    command = shutil.which("moto_server") or os.path.join(os.path.dirname(sys.executable), "moto_server")
    port = free_port()
    output = log.open("wb")
    server = subprocess.Popen([command, "-H", "127.0.0.1", "-p", str(port)], stdout=output, stderr=subprocess.STDOUT)
    output.close()
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError(f"moto's server did not start (see {log})") from None
            time.sleep(0.2)


def s3a_settings(endpoint: str) -> dict[str, str]:
    """S3A's settings (``fs.s3a.`` names) for the server at ``endpoint``: path-style access, no TLS,
    plain credentials."""
    return {
        "fs.s3a.endpoint": endpoint,
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": KEY,
        "fs.s3a.secret.key": KEY,
    }
