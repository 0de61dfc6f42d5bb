"""A run over a secured listener: `kconform run --security sasl_plaintext|sasl_ssl` (issue 22,
docs/security.md).

Why one process-wide setting: a run has one security protocol for every target, client driver
and internal question it asks, and those are many places (the targets' readiness questions in
wire.py, CreateTopics in admin.py, every driver process the runner starts). Each of them reads
``current()`` instead of taking a parameter through every layer; ``use(security)`` sets it for
the run (a context manager, so a test can scope it).

What the run does with it:
- the target starts with one SASL listener (SCRAM-SHA-512) and one user whose name and password
  are generated here, for this run only (``Security.generate``);
- over SASL_SSL the listener speaks TLS too: a CA and a certificate for 127.0.0.1 / localhost are
  made for the run with trustme into the cache (``certificates``; never in the repository, the
  results or a driver's request line), the brokers serve the certificate, every client trusts the
  CA and verifies the host name;
- every driver process gets the settings in its environment (``ENV``, read by each driver and
  translated into its library's options: conformance/clients/README.md), never in a request line,
  so they do not appear in results or transcripts;
- wire.py authenticates its raw connections with SCRAM (kafka-python's ScramClient), admin.py's
  AdminClient with librdkafka's options.

The password must never be written by a run: ``Security`` does not show it in its repr, and
tests/integration/runner/test_security_run.py greps a run's output for it.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import buildcache

#: The environment variable a driver process reads its security settings from (JSON).
ENV = "KCONFORM_CLIENT_SECURITY"

#: `--security` values: Kafka's security.protocol names, lower case.
PROTOCOLS = ("plaintext", "sasl_plaintext", "sasl_ssl")
MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class Security:
    """The security protocol of a run and the one user every client authenticates as."""

    protocol: str = "PLAINTEXT"        # Kafka's security.protocol
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    #: over TLS: the CA every client trusts (PEM) and the brokers' private key (PKCS#8, the only
    #: form Kafka reads) with its certificate chain (PEM): files of ``certificates``.
    ca_file: str = ""
    keystore_file: str = ""

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @classmethod
    def generate(cls, protocol: str) -> "Security":
        """``protocol`` as `--security` spells it; a SASL one gets a new user and password, a TLS
        one a new CA and broker certificate."""
        proto = protocol.upper()
        if protocol.lower() not in PROTOCOLS:
            raise ValueError(f"--security {protocol!r}: one of {', '.join(PROTOCOLS)}")
        if not proto.startswith("SASL_"):
            return cls(proto)
        ca_file = keystore_file = ""
        if proto == "SASL_SSL":
            ca_file, keystore_file = (str(p) for p in certificates())
        return cls(proto, MECHANISM, f"kconform-{secrets.token_hex(3)}", secrets.token_urlsafe(18),
                   ca_file, keystore_file)

    # -- clients -------------------------------------------------------------------------------
    def client_properties(self) -> dict[str, str]:
        """Java client properties (what the Java driver and Kafka's CLI tools take)."""
        if not self.sasl:
            return {}
        props = {"security.protocol": self.protocol, "sasl.mechanism": self.mechanism,
                 "sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required username="{self.username}" '
                                     f'password="{self.password}";'}
        if self.tls:   # Kafka's PEM truststore (KIP-651); host names verified (https, the default)
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file})
        return props

    def librdkafka_config(self) -> dict[str, str]:
        if not self.sasl:
            return {}
        config = {"security.protocol": self.protocol, "sasl.mechanisms": self.mechanism,
                  "sasl.username": self.username, "sasl.password": self.password}
        if self.tls:
            config["ssl.ca.location"] = self.ca_file
        return config

    def python_kwargs(self) -> dict[str, Any]:
        """kafka-python's and aiokafka's keyword arguments (their names are the same)."""
        if not self.sasl:
            return {}
        kw: dict[str, Any] = {"security_protocol": self.protocol, "sasl_mechanism": self.mechanism,
                              "sasl_plain_username": self.username, "sasl_plain_password": self.password}
        if self.tls:
            kw["ssl_context"] = self.client_ssl_context()
        return kw

    def client_ssl_context(self):
        """A client's TLS context: the run's CA only, host names checked (what every driver does)."""
        import ssl
        return ssl.create_default_context(cafile=self.ca_file)

    def wrap(self, sock, host: str):
        """``sock``, a connection to a broker at ``host``, as the run speaks on it: over TLS the
        handshake done (the CA checked, the host name verified), else as it is."""
        if not self.tls:
            return sock
        try:
            return self.client_ssl_context().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise

    def to_env(self) -> dict[str, str]:
        if not self.sasl:
            return {}
        d = {"protocol": self.protocol, "mechanism": self.mechanism,
             "username": self.username, "password": self.password}
        if self.tls:
            d["ca_file"] = self.ca_file
        return {ENV: json.dumps(d)}

    @classmethod
    def from_env(cls, environ: "os._Environ[str] | dict[str, str] | None" = None) -> "Security":
        """What a driver process was started with (PLAINTEXT without the variable)."""
        raw = (os.environ if environ is None else environ).get(ENV)
        if not raw:
            return cls()
        d = json.loads(raw)
        return cls(d["protocol"], d["mechanism"], d["username"], d["password"], d.get("ca_file", ""))

    # -- brokers -------------------------------------------------------------------------------
    def embedded_broker_configs(self, listen: str) -> dict[str, str]:
        """The embedded broker's configs (docs/security.md): one listener, on ``listen``
        (HOST:PORT, the address the target picked), the one the clients use."""
        if not self.sasl:
            return {}
        configs = {"listeners": f"{self.protocol}://{listen}", "sasl.enabled.mechanisms": self.mechanism,
                   "kconform.sasl.users": f"{self.username}:{self.password}"}
        return {**configs, **self.broker_tls_configs()}

    def broker_tls_configs(self) -> dict[str, str]:
        """Kafka's PEM keystore and truststore configs (the embedded broker reads the same names):
        the brokers serve the run's certificate and trust its CA (Kafka's brokers dial each other)."""
        if not self.tls:
            return {}
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.keystore_file,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file}


def certificates(directory: Path | None = None) -> tuple[Path, Path]:
    """A new CA and a certificate it signed for 127.0.0.1 and localhost (trustme), written as
    ``ca.pem`` and ``broker.pem`` (the private key as PKCS#8, then the certificate chain) into
    ``directory`` -- by default a new directory under the cache's ``tls/``, removed when this
    process exits. Made per run: no key is ever committed or reused."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    if directory is None:
        root = buildcache.cache_root() / "tls"
        root.mkdir(parents=True, exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix="run-", dir=root))
        atexit.register(shutil.rmtree, directory, True)
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    ca_file, keystore = directory / "ca.pem", directory / "broker.pem"
    ca_file.write_bytes(ca.cert_pem.bytes())
    keystore.write_bytes(pkcs8 + b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    keystore.chmod(0o600)
    return ca_file, keystore


_current = Security()


def current() -> Security:
    """The run's security (PLAINTEXT unless ``use`` set another)."""
    return _current


@contextlib.contextmanager
def use(security: Security) -> Iterator[Security]:
    global _current
    previous, _current = _current, security
    try:
        yield security
    finally:
        _current = previous
