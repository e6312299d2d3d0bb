"""A private RabbitMQ node for tests that kill the broker (the shared one is never touched).

Usage::

    with PrivateRabbit() as rabbit:
        url = rabbit.url          # rabbit://guest:guest@127.0.0.1:PORT/
        ...
        rabbit.kill()             # SIGKILL, as a crash

    with PrivateRabbit(tls=True) as rabbit:   # TLS only: no clear-text listener at all
        rabbit.ca_file            # the CA that signed its certificate (for localhost)
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

from tests.support import services
from tests.support.services_procs import free_port


class PrivateRabbit:
    """A RabbitMQ node of its own name, ports and data directory."""

    def __init__(self, start_timeout: float = 90.0, tls: bool = False) -> None:
        self.node = f"pxetest{uuid.uuid4().hex[:8]}@localhost"
        self.port = free_port()
        self.start_timeout = start_timeout
        self.tls = tls
        self.pid: int | None = None
        self.base = ""
        self.ca_file = ""
        self.url = f"rabbit://guest:guest@{'localhost' if tls else '127.0.0.1'}:{self.port}/"

    def _listeners(self) -> str:
        if not self.tls:
            return f"listeners.tcp.local = 127.0.0.1:{self.port}\n"
        self.ca_file, cert, key = make_certificates(self.base, "localhost")
        # guest may log in from loopback only, which 127.0.0.1 is.
        return (f"listeners.tcp = none\nlisteners.ssl.default = 127.0.0.1:{self.port}\n"
                f"ssl_options.cacertfile = {self.ca_file}\nssl_options.certfile = {cert}\n"
                f"ssl_options.keyfile = {key}\nssl_options.verify = verify_none\n"
                f"ssl_options.fail_if_no_peer_cert = false\n")

    def _ctl(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(["rabbitmqctl", "-n", self.node, *args], capture_output=True,
                              text=True, timeout=timeout)

    def start(self) -> "PrivateRabbit":
        """Start the node and wait until it accepts clients."""
        if shutil.which("rabbitmq-server") is None:
            services.unavailable("RabbitMQ", "rabbitmq-server not found")
        # The server runs as user rabbitmq: its directories must be reachable by it.
        self.base = tempfile.mkdtemp(prefix="pxetest-rabbit-")
        os.chmod(self.base, 0o777)
        # Our own configuration file: the system one names the shared broker's port.
        with open(f"{self.base}/rabbitmq.conf", "w") as conf:
            conf.write(self._listeners())
        # RABBITMQ_NODE_PORT would add a clear-text listener beside the TLS one.
        port_env = {} if self.tls else {"RABBITMQ_NODE_PORT": str(self.port)}
        env = dict(os.environ, RABBITMQ_NODENAME=self.node, **port_env,
                   RABBITMQ_CONFIG_FILE=f"{self.base}/rabbitmq.conf",
                   RABBITMQ_DIST_PORT=str(free_port()),
                   RABBITMQ_MNESIA_BASE=f"{self.base}/mnesia",
                   RABBITMQ_LOG_BASE=f"{self.base}/log")
        # Not a pipe: the detached node would die writing to it once it is closed.
        with open(f"{self.base}/start.log", "wb") as log:
            subprocess.run(["rabbitmq-server", "-detached"], env=env, stdout=log,
                           stderr=subprocess.STDOUT, timeout=60, check=True, cwd=self.base)
        deadline = time.monotonic() + self.start_timeout
        while self._ctl("await_startup", "--timeout", "10", timeout=40).returncode != 0:
            if time.monotonic() > deadline:
                self._ctl("stop")  # in case it runs but never answered
                self.stop()
                services.unavailable("private RabbitMQ", f"{self.node} did not start")
            time.sleep(0.5)
        self.pid = int(self._ctl("eval", "os:getpid().").stdout.strip().strip('"'))
        return self

    def kill(self) -> None:
        """SIGKILL the broker (queued messages that were not persisted are gone)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and os.path.exists(f"/proc/{self.pid}"):
                time.sleep(0.05)
            self.pid = None

    def stop(self) -> None:
        """Kill the node if it runs and remove its files."""
        self.kill()
        if self.base:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> "PrivateRabbit":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def make_certificates(directory: str, hostname: str) -> tuple[str, str, str]:
    """A CA and a server certificate for ``hostname`` signed by it, made with openssl, in
    files readable by the broker's user; (ca, cert, key) paths."""
    if shutil.which("openssl") is None:
        services.unavailable("RabbitMQ with TLS", "openssl not found")
    ca_key, ca, key, csr, cert = (f"{directory}/{name}" for name in
                                  ("ca.key", "ca.pem", "server.key", "server.csr",
                                   "server.pem"))
    ext = f"{directory}/san.ext"
    with open(ext, "w") as stream:
        stream.write(f"subjectAltName = DNS:{hostname}\n")
    for argv in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
             "-days", "2", "-subj", "/CN=pxe-filter test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
             "-subj", f"/CN={hostname}"],
            ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", "2", "-extfile", ext]):
        subprocess.run(["openssl", *argv], check=True, capture_output=True, timeout=60)
    for path in (ca, key, cert):
        os.chmod(path, 0o644)  # the broker runs as user rabbitmq; the files are throwaway
    return ca, cert, key
