"""A run over a secured listener: `kconform run --security sasl_plaintext|sasl_ssl`, or with the
client settings a user already has for a cluster someone else runs: `kconform run --target
external --command-config FILE` (issue 22, docs/security.md).

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
- wire.py authenticates its raw connections with SCRAM (kafka-python's ScramClient) or PLAIN,
  admin.py's AdminClient with librdkafka's options;
- a user's own settings (``Security.from_properties``: the properties file Kafka's CLI tools
  take with --command-config) are the same object, marked ``given``: only target external takes
  them (no target starts a listener for them). Over TLS the proxy in front of that cluster
  speaks TLS with a certificate of a CA made for the run, so the clients trust a bundle of the
  user's CA (or the system's) and the run's.

The password must never be written by a run: ``Security`` does not show it in its repr, and
tests/integration/runner/test_security_run.py greps a run's output for it.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import buildcache
from .properties import read_properties

#: The environment variable a driver process reads its security settings from (JSON).
ENV = "KCONFORM_CLIENT_SECURITY"

#: `--security` values: Kafka's security.protocol names, lower case.
PROTOCOLS = ("plaintext", "sasl_plaintext", "sasl_ssl")
#: What a user's own settings may say (security.protocol), and the SASL mechanisms every driver speaks.
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISM = "SCRAM-SHA-512"
#: The embedded cluster's brokers dial each other on this PLAINTEXT listener on a secured run.
INTER_BROKER_LISTENER = "REPLICATION"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": SCRAM_LOGIN_MODULE, "SCRAM-SHA-512": SCRAM_LOGIN_MODULE}


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
    #: the user's own settings (``from_properties``): a cluster someone else runs takes them.
    given: bool = False

    @property
    def secured(self) -> bool:
        return self.protocol != "PLAINTEXT"

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
        if not self.secured:
            return {}
        props = {"security.protocol": self.protocol}
        if self.sasl:
            props.update({"sasl.mechanism": self.mechanism,
                          "sasl.jaas.config": f'{LOGIN_MODULES[self.mechanism]} required '
                                              f'username="{_jaas_quote(self.username)}" '
                                              f'password="{_jaas_quote(self.password)}";'})
        if self.tls and self.ca_file:   # Kafka's PEM truststore (KIP-651); host names verified (https)
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file})
        return props

    def librdkafka_config(self) -> dict[str, str]:
        if not self.secured:
            return {}
        config = {"security.protocol": self.protocol}
        if self.sasl:
            config.update({"sasl.mechanisms": self.mechanism, "sasl.username": self.username,
                           "sasl.password": self.password})
        if self.tls and self.ca_file:
            config["ssl.ca.location"] = self.ca_file
        return config

    def python_kwargs(self) -> dict[str, Any]:
        """kafka-python's and aiokafka's keyword arguments (their names are the same)."""
        if not self.secured:
            return {}
        kw: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            kw.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.username,
                       "sasl_plain_password": self.password})
        if self.tls:
            kw["ssl_context"] = self.client_ssl_context()
        return kw

    def client_ssl_context(self) -> ssl.SSLContext:
        """A client's TLS context: the run's CA (the system's when there is none), host names
        checked (what every driver does)."""
        return ssl.create_default_context(cafile=self.ca_file or None)

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
        if not self.secured:
            return {}
        d = {"protocol": self.protocol, "mechanism": self.mechanism,
             "username": self.username, "password": self.password}
        if self.tls and self.ca_file:
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

    # -- a user's own settings -----------------------------------------------------------------
    @classmethod
    def from_properties(cls, path: str | Path) -> "Security":
        """The client settings of the properties file Kafka's CLI tools take (--command-config):
        `security.protocol`, `sasl.mechanism` with `sasl.jaas.config` (PlainLoginModule or
        ScramLoginModule with username and password), `ssl.truststore.*` (PEM, JKS or PKCS12:
        keytool lists a store's certificates) -- or librdkafka's names (`sasl.mechanisms`,
        `sasl.username`, `sasl.password`, `ssl.ca.location`). ValueError names the file, the key
        and what was expected, for what kconform's drivers cannot do alike (GSSAPI, OAUTHBEARER,
        client certificates, host names unchecked)."""
        path = Path(path)
        try:
            props = read_properties(path)
        except OSError as exc:
            raise ValueError(f"{path}: cannot read it: {exc}") from None

        def bad(key: str, expected: str) -> ValueError:
            got = props.get(key)
            return ValueError(f"{path}: {key}: expected {expected}, got "
                              f"{'nothing' if got is None else repr(got if 'password' not in key else '***')}")

        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in KAFKA_PROTOCOLS:
            raise bad("security.protocol", f"one of {', '.join(KAFKA_PROTOCOLS)}")
        mechanism = username = password = ""
        if protocol.startswith("SASL_"):
            key = "sasl.mechanism" if "sasl.mechanism" in props or "sasl.mechanisms" not in props else "sasl.mechanisms"
            mechanism = props.get(key, "GSSAPI").strip().upper()   # Kafka's default mechanism
            if mechanism not in LOGIN_MODULES:
                raise bad(key, f"one of {', '.join(LOGIN_MODULES)} (the mechanisms every driver speaks)")
            if "sasl.jaas.config" in props:
                found = {k: _jaas_value(props["sasl.jaas.config"], k) for k in ("username", "password")}
                if None in found.values():
                    raise ValueError(f"{path}: sasl.jaas.config: expected a login module with "
                                     f'username="..." password="...", got none of {"/".join(k for k, v in found.items() if v is None)}')
                username, password = found["username"], found["password"]
            elif "sasl.username" in props and "sasl.password" in props:
                username, password = props["sasl.username"], props["sasl.password"]
            else:
                raise bad("sasl.jaas.config", 'a login module with username="..." password="..." '
                                              "(or librdkafka's sasl.username and sasl.password)")
        ca_file = ""
        if protocol in ("SSL", "SASL_SSL"):
            for key in ("ssl.keystore.location", "ssl.keystore.key", "ssl.certificate.location", "ssl.key.location"):
                if props.get(key):
                    raise bad(key, "nothing: client certificates (mutual TLS) are not supported yet")
            if props.get("ssl.endpoint.identification.algorithm", "https").strip().lower() != "https":
                raise bad("ssl.endpoint.identification.algorithm", "https (every driver verifies the host name)")
            ca_file = _trusted_pem(props, path, bad)
        return cls(protocol, mechanism, username, password, ca_file, given=True)

    def behind_proxy(self) -> "Security":
        """A user's TLS settings with kconform's proxy in front: the proxy serves a certificate
        of a CA made for the run (``keystore_file``), so clients trust a bundle of the user's CAs
        (the system's when the settings name none) and the run's; the proxy itself, towards the
        cluster, trusts the same bundle."""
        if not (self.given and self.tls) or self.keystore_file:
            return self
        run_ca, keystore = certificates()
        user = Path(self.ca_file) if self.ca_file else _system_cafile()
        bundle = run_ca.parent / "bundle.pem"
        bundle.write_bytes(user.read_bytes().rstrip(b"\n") + b"\n" + run_ca.read_bytes())
        return dataclasses.replace(self, ca_file=str(bundle), keystore_file=str(keystore))

    # -- brokers -------------------------------------------------------------------------------
    def embedded_broker_configs(self, listen: str, cluster: bool = False) -> dict[str, str]:
        """The embedded broker's configs (docs/security.md): the clients' listener on ``listen``
        (HOST:PORT, the address the target picked); a broker of a cluster also a PLAINTEXT
        listener of its own for the other brokers (``inter.broker.listener.name``, any port:
        it registers it with the controller), as Kafka's deployments with an internal listener."""
        if not self.sasl:
            return {}
        configs = {"listeners": f"{self.protocol}://{listen}", "sasl.enabled.mechanisms": self.mechanism,
                   "kconform.sasl.users": f"{self.username}:{self.password}"}
        if cluster:
            host = listen.rpartition(":")[0]
            configs.update({"listeners": f"{configs['listeners']},{INTER_BROKER_LISTENER}://{host}:0",
                            "listener.security.protocol.map": f"{self.protocol}:{self.protocol},"
                                                              f"{INTER_BROKER_LISTENER}:PLAINTEXT",
                            "inter.broker.listener.name": INTER_BROKER_LISTENER})
        return {**configs, **self.broker_tls_configs()}

    def broker_tls_configs(self) -> dict[str, str]:
        """Kafka's PEM keystore and truststore configs (the embedded broker reads the same names):
        the brokers serve the run's certificate and trust its CA (Kafka's brokers dial each other)."""
        if not self.tls:
            return {}
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.keystore_file,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_file}


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _jaas_value(jaas: str, option: str) -> str | None:
    """An option of a JAAS login-module line: ``username="a\\"b"`` -> ``a"b`` (quoted or bare)."""
    m = re.search(rf'(?<![\w.]){option}\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))', jaas)
    if m is None:
        return None
    return re.sub(r"\\(.)", r"\1", m.group(1)) if m.group(1) is not None else m.group(2)


def _system_cafile() -> Path:
    """The system's CA bundle (what a client trusts when told nothing), as one file."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ValueError("the settings name no CA and this machine has no CA bundle file: set ssl.truststore.location")


def _tls_dir() -> Path:
    """A directory of the cache for this process's certificates, removed when it exits."""
    root = buildcache.cache_root() / "tls"
    root.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    atexit.register(shutil.rmtree, directory, True)
    return directory


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def _trusted_pem(props: dict[str, str], path: Path, bad) -> str:
    """The CAs a user's settings trust, as one PEM file (what every driver reads); "" for the
    system's. A JKS or PKCS12 truststore is listed by keytool (Java is installed with Kafka's tools)."""
    if props.get("ssl.ca.location"):
        where = Path(props["ssl.ca.location"]).expanduser()
        if not where.is_file():
            raise bad("ssl.ca.location", "a readable PEM file")
        return str(where.resolve())
    if props.get("ssl.truststore.certificates"):
        pems = _PEM_CERT.findall(props["ssl.truststore.certificates"].encode())
        if not pems:
            raise bad("ssl.truststore.certificates", "PEM certificates")
        out = _tls_dir() / "truststore.pem"
        out.write_bytes(b"\n".join(pems) + b"\n")
        return str(out)
    if not props.get("ssl.truststore.location"):
        return ""
    where = Path(props["ssl.truststore.location"]).expanduser()
    if not where.is_file():
        raise bad("ssl.truststore.location", "a readable truststore file")
    kind = props.get("ssl.truststore.type", "JKS").strip().upper()
    if kind == "PEM":
        return str(where.resolve())
    if kind not in ("JKS", "PKCS12"):
        raise bad("ssl.truststore.type", "PEM, JKS or PKCS12")
    argv = ["keytool", "-list", "-rfc", "-keystore", str(where), "-storetype", kind]
    if props.get("ssl.truststore.password"):
        argv += ["-storepass:env", "KCONFORM_STOREPASS"]
    try:
        out = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
                             env={**os.environ, "KCONFORM_STOREPASS": props.get("ssl.truststore.password", "")})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"{path}: ssl.truststore.location: keytool could not list it: {exc}") from None
    pems = _PEM_CERT.findall(out.stdout)
    if out.returncode != 0 or not pems:
        raise ValueError(f"{path}: ssl.truststore.location: keytool found no certificate in {where} "
                         f"({out.stderr.decode(errors='replace').strip() or out.stdout.decode(errors='replace').strip()[:200]})")
    pem = _tls_dir() / "truststore.pem"
    pem.write_bytes(b"\n".join(pems) + b"\n")
    return str(pem)


def certificates(directory: Path | None = None) -> tuple[Path, Path]:
    """A new CA and a certificate it signed for 127.0.0.1 and localhost (trustme), written as
    ``ca.pem`` and ``broker.pem`` (the private key as PKCS#8, then the certificate chain) into
    ``directory`` -- by default a new directory under the cache's ``tls/``, removed when this
    process exits. Made per run: no key is ever committed or reused."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    if directory is None:
        directory = _tls_dir()
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
