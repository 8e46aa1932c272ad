"""A local Cloud Storage for tests: the gcp-storage-emulator, plus a TLS proxy for TensorFlow.

Beam and google-cloud-storage reach the emulator through `STORAGE_EMULATOR_HOST`. TensorFlow's
gs:// file system has its endpoints compiled in (https://www.googleapis.com,
https://storage.googleapis.com), so it is pointed at an HTTPS proxy on 127.0.0.1 that answers
CONNECT for any host, terminates TLS with a certificate from a test CA, and forwards each HTTP
request to the emulator. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import ipaddress
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

BUCKET = "test-bucket"
_HOSTS = ("storage.googleapis.com", "www.googleapis.com", "oauth2.googleapis.com")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the storage emulator exited with code {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the storage emulator did not listen on port {port} in {timeout} s")


@contextlib.contextmanager
def storage_emulator(data_dir: pathlib.Path | None = None) -> Iterator[str]:
    """Runs gcp-storage-emulator (in memory, or on disk in `data_dir`; bucket BUCKET); yields
    its http://127.0.0.1:P."""
    port = free_port()
    where = ["--data-dir", str(data_dir)] if data_dir else []
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gcp_storage_emulator",
            *where,
            "start",
            "--host=127.0.0.1",
            f"--port={port}",
            *([] if data_dir else ["--in-memory"]),
            f"--default-bucket={BUCKET}",
            "-q",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _certificates(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """A test CA and a server certificate for the Google storage hosts and 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("tfrecord-etl test CA"))
        .issuer_name(name("tfrecord-etl test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(h) for h in _HOSTS] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(_HOSTS[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_path, cert_path, key_path = (folder / n for n in ("ca.pem", "server.pem", "server.key"))
    ca_path.write_bytes(ca.public_bytes(pem))
    cert_path.write_bytes(cert.public_bytes(pem))
    key_path.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_path, cert_path, key_path


def _read_head(stream) -> tuple[str, dict[str, str]] | None:
    line = stream.readline()
    if not line:
        return None
    headers = {}
    while (header := stream.readline()) not in (b"\r\n", b"\n", b""):
        key, _, value = header.decode("latin-1").partition(":")
        headers[key.strip()] = value.strip()
    return line.decode("latin-1").strip(), headers


class TlsProxy:
    """An HTTPS proxy that sends every request it receives to one plain-HTTP upstream."""

    def __init__(self, upstream: str, folder: pathlib.Path) -> None:
        self._upstream = upstream.removeprefix("http://")
        self.ca_file, cert, key = _certificates(folder)
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(cert, key)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()  # the emulator serves one request at a time
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError, ssl.SSLError), conn:
            head = _read_head(conn.makefile("rb"))
            if head is None or not head[0].startswith("CONNECT "):
                conn.sendall(b"HTTP/1.1 405 Only CONNECT\r\nContent-Length: 0\r\n\r\n")
                return
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with self._tls.wrap_socket(conn, server_side=True) as tls:
                stream = tls.makefile("rb")
                while self._forward(stream, tls):
                    pass

    def _forward(self, stream, tls: ssl.SSLSocket) -> bool:
        head = _read_head(stream)
        if head is None:
            return False
        request_line, headers = head
        method, path, _ = request_line.split(" ", 2)
        body = stream.read(int(headers.get("Content-Length", 0) or 0))
        if headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = _read_chunked(stream)
            headers.pop("Transfer-Encoding")
            headers["Content-Length"] = str(len(body))
        with self._lock:
            upstream = http.client.HTTPConnection(self._upstream, timeout=60)
            upstream.request(method, path, body=body or None, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            upstream.close()
        lines = [f"HTTP/1.1 {response.status} {response.reason}"]
        for key, value in response.getheaders():
            if key.lower() in ("transfer-encoding", "connection", "content-length"):
                continue
            if key.lower() == "location":
                value = value.replace("http://", "https://", 1)
            lines.append(f"{key}: {value}")
        lines.append(f"Content-Length: {len(payload)}")
        tls.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
        return True


def _read_chunked(stream) -> bytes:
    parts = []
    while True:
        size = int(stream.readline().split(b";")[0], 16)
        if size == 0:
            stream.readline()
            return b"".join(parts)
        parts.append(stream.read(size))
        stream.readline()


def beam_env(emulator: str) -> dict[str, str]:
    """Environment for a process that reaches the emulator through Beam and google-cloud."""
    return {**os.environ, "STORAGE_EMULATOR_HOST": emulator, "NO_GCE_CHECK": "true"}


def tensorflow_env(proxy: TlsProxy) -> dict[str, str]:
    """Environment for a process whose TensorFlow gs:// goes through the proxy."""
    return {
        **os.environ,
        "HTTPS_PROXY": proxy.url,
        "https_proxy": proxy.url,
        "NO_PROXY": "",
        "no_proxy": "",
        "CURL_CA_BUNDLE": str(proxy.ca_file),
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "dummy",
        "NO_GCE_CHECK": "true",
        "GCS_RETRY_CONFIG_MAX_RETRIES": "0",
    }
