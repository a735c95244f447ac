# SPDX-License-Identifier: Apache-2.0
"""A real Milvus server for tests: ``milvus-server`` of the PyPI package ``milvus`` 2.3.5.

That package ships a whole Milvus 2.3.5 standalone (embedded etcd, rocksmq, local storage, every
component in one process) that pymilvus talks to as to any cluster; ``make setup`` installs it.
Started here on free ports (the client port, embedded etcd's client and peer ports and the ports
of the components, so that several test sessions can run side by side) in a data folder, and
ready once pymilvus can create, load, fill and search a collection.

How it is run, and why:

* ``milvus-server --data DIR --proxy-port P ...`` (a Python wrapper) unpacks the ``milvus``
  binary into ``DIR/bin`` (246 MB, about 12 s) and runs ``milvus run standalone``. The unpacked
  binaries are kept in a cache folder and ``DIR/bin`` links to it, so later sessions skip that.
* Embedded etcd ignores the wrapper's ``--etcd-port`` for what it listens on (it keeps
  2379/2380, so a second server on the machine would crash): ``ETCD_CONFIG_PATH`` names an etcd
  config with our ports.
* The wrapper handles SIGINT (it stops the binary), not SIGTERM; it runs in its own process
  group, which is killed after it, in case.
* If the binary dies while starting, the wrapper keeps waiting (180 s): its log is watched
  for a Go panic instead.
* The components listen on all interfaces (Milvus 2.3 has no listen-address setting); they
  advertise and are reached on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MILVUS_VERSION = "2.3.5"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 20.0
COMPONENT_PORTS = (
    "proxy_port", "etcd_port", "root_coord_port", "proxy_internal_port", "query_coord_port",
    "query_node_port", "index_coord_port", "index_node_port", "data_coord_port", "data_node_port",
)
COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexNode", "dataCoord", "dataNode")
LAUNCHER = "import sys, milvus; sys.argv[0] = 'milvus-server'; milvus.main()"


@dataclass(frozen=True)
class MilvusServer:
    """A running Milvus standalone: ``uri`` for ``pymilvus.MilvusClient(uri=...)``."""

    uri: str
    port: int
    data_dir: Path
    pid: int

    def log_tail(self, chars: int = 4000) -> str:
        return log_tail(self.data_dir, chars)

    @contextlib.contextmanager
    def scratch_collection(self, prefix: str) -> Iterator[str]:
        """A new collection name, ``prefix`` and 12 hex digits; the collection, if a test made it,
        is dropped afterwards."""
        from pymilvus import MilvusClient

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        try:
            yield name
        finally:
            client = MilvusClient(uri=self.uri)
            try:
                if client.has_collection(name):
                    client.drop_collection(name)
            finally:
                client.close()


def installed_version() -> str | None:
    """The version of the installed ``milvus`` package (the server), or None."""
    try:
        return importlib.metadata.version("milvus")
    except importlib.metadata.PackageNotFoundError:
        return None


def log_tail(data_dir: Path, chars: int = 4000) -> str:
    parts = []
    for name in ("wrapper.log", "logs/milvus-stderr.log", "logs/milvus-stdout.log"):
        path = data_dir / name
        if path.is_file():
            parts.append(f"--- {name}\n{path.read_text(errors='replace')[-chars:]}")
    return "\n".join(parts) or "(no logs)"


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):  # all open at once, so that they differ
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _cached_binaries(data_dir: Path, cache: Path) -> None:
    """Unpack the server binaries into ``cache`` once (under a lock) and link ``data_dir/bin`` there."""
    import milvus

    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        milvus._initialize_data_files(str(cache))  # skips files whose .md5 matches
    if not (data_dir / "bin").exists():
        (data_dir / "bin").symlink_to(cache / "bin", target_is_directory=True)


def _etcd_config(path: Path, client: int, peer: int) -> None:
    client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    path.write_text(
        f"name: mxrag-test\nlisten-client-urls: {client_url}\nadvertise-client-urls: {client_url}\n"
        f"listen-peer-urls: {peer_url}\ninitial-advertise-peer-urls: {peer_url}\n"
        f"initial-cluster: mxrag-test={peer_url}\n",
        encoding="utf-8",
    )


def _answers(uri: str) -> bool:
    """Whether the server creates, loads, fills and searches a collection (then dropped)."""
    from pymilvus import MilvusClient

    try:
        client = MilvusClient(uri=uri, timeout=5)
    except Exception:  # not listening yet
        return False
    try:
        name = "mxrag_ready_probe"
        if client.has_collection(name):
            client.drop_collection(name)
        client.create_collection(name, dimension=2, consistency_level="Strong")
        client.insert(name, [{"id": 1, "vector": [1.0, 0.0]}])
        hits = client.search(name, data=[[1.0, 0.0]], limit=1)
        client.drop_collection(name)
        return len(hits[0]) == 1
    except Exception:  # components still registering
        return False
    finally:
        client.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # the wrapper stops the binary on SIGINT
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_TIMEOUT_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group we started: the binary, if still there
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(STOP_TIMEOUT_S)


@contextlib.contextmanager
def running_milvus(
    data_dir: Path, bin_cache: Path | None = None, timeout: float = START_TIMEOUT_S
) -> Iterator[MilvusServer]:
    """Start ``milvus-server`` in ``data_dir`` on free ports; yield it once it answers; stop it.

    Raises:
        RuntimeError: the server exited, panicked or did not answer within ``timeout`` (the
            message holds the end of its logs).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    if bin_cache is not None:
        _cached_binaries(data_dir, bin_cache)
    *ports, etcd_peer = _free_ports(len(COMPONENT_PORTS) + 1)
    chosen = dict(zip(COMPONENT_PORTS, ports, strict=True))
    _etcd_config(data_dir / "embed_etcd.yaml", chosen["etcd_port"], etcd_peer)
    command = [sys.executable, "-c", LAUNCHER, "--data", str(data_dir)]
    for key, port in chosen.items():
        command += [f"--{key.replace('_', '-')}", str(port)]
    for component in COMPONENTS:
        command += ["--extra-config", f"{component}.ip=127.0.0.1"]
    env = {**os.environ, "ETCD_CONFIG_PATH": str(data_dir / "embed_etcd.yaml")}
    uri = f"http://127.0.0.1:{chosen['proxy_port']}"
    with (data_dir / "wrapper.log").open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=data_dir, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        stderr_log = data_dir / "logs" / "milvus-stderr.log"
        while not _answers(uri):
            if proc.poll() is not None:
                raise RuntimeError(f"milvus-server exited with {proc.returncode}:\n{log_tail(data_dir)}")
            if stderr_log.is_file() and "panic:" in stderr_log.read_text(errors="replace"):
                raise RuntimeError(f"milvus panicked while starting:\n{log_tail(data_dir)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"milvus-server did not answer on {uri} within {timeout:.0f} s:\n"
                                   f"{log_tail(data_dir)}")
            time.sleep(0.5)
        yield MilvusServer(uri=uri, port=chosen["proxy_port"], data_dir=data_dir, pid=proc.pid)
    finally:
        _stop(proc)
