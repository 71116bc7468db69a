"""Helpers for the psdb Python tests: the built binaries and real ps-server
processes (the Python side of tests/testing/child_process.h)."""

import os
import signal
import socket
import subprocess
import threading
import time


def built_binary(relative):
    """Path of a binary of the build under test (PSDB_BINARY_DIR, set by
    ctest), e.g. built_binary("tools/ps-server")."""
    root = os.environ.get("PSDB_BINARY_DIR")
    if not root:
        raise RuntimeError("PSDB_BINARY_DIR is not set (run the tests through ctest)")
    return os.path.join(root, relative)


class ReservedPort:
    """A loopback port held bound until close(), so nothing else takes it
    before the server that is told it binds it: tools/common/reserved_port.h
    in Python. Bound first, then marked SO_REUSEADDR, which the server's
    bind (gRPC's) sets too."""

    def __init__(self):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = self._sock.getsockname()[1]

    def close(self):
        self._sock.close()


class Cluster:
    """n ps-server processes with a static server list, each with its own
    data directory under `root`; `url` is the servers: URL for psdb.open."""

    def __init__(self, root, n, timeout_s=120):
        ports = [ReservedPort() for _ in range(n)]
        addresses = ",".join(f"127.0.0.1:{p.port}" for p in ports)
        self.url = f"servers:{addresses}"
        self.processes = []
        try:
            for i, port in enumerate(ports):
                self.processes.append(subprocess.Popen(
                    [built_binary("tools/ps-server"),
                     f"--data_dir={root}/s{i}", f"--port={port.port}",
                     f"--servers={addresses}", f"--shard_id={i}", "--threads=2"],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
            deadline = time.monotonic() + timeout_s
            for process in self.processes:
                # ps-server prints "listening on HOST:PORT" once it serves.
                while True:
                    line = process.stdout.readline()
                    if line.startswith("listening on "):
                        break
                    if not line or time.monotonic() > deadline:
                        raise RuntimeError(f"ps-server did not start (exit {process.poll()})")
                # Keep reading, so a chatty server never blocks on a full pipe.
                threading.Thread(target=process.stdout.read, daemon=True).start()
        except BaseException:
            self.stop()
            raise
        finally:
            for port in ports:
                port.close()

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = []


class Replica:
    """A read-only serving replica: ps-server --serve_from=`root` on a free
    loopback port; `address` is its host:port."""

    def __init__(self, root, *args, timeout_s=120):
        self.process = subprocess.Popen(
            [built_binary("tools/ps-server"), f"--serve_from={root}", "--port=0",
             "--threads=2", "--memory_budget_mb=16", *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + timeout_s
        while True:
            line = self.process.stdout.readline()
            if line.startswith("listening on "):
                self.address = line[len("listening on "):].strip()
                break
            if not line or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"replica did not start (exit {self.process.poll()})")
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
