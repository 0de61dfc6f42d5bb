"""A run over a secured listener: `kconform run --security sasl_plaintext` (issue 22, docs/security.md).

Why one process-wide setting: a run has one security protocol for every target, client driver
and internal question it asks, and those are many places (the targets' readiness questions in
wire.py, CreateTopics in admin.py, every driver process the runner starts). Each of them reads
``current()`` instead of taking a parameter through every layer; ``use(security)`` sets it for
the run (a context manager, so a test can scope it).

What the run does with it:
- the target starts with one SASL listener (SCRAM-SHA-512) and one user whose name and password
  are generated here, for this run only (``Security.generate``);
- every driver process gets the settings in its environment (``ENV``, read by each driver and
  translated into its library's options: conformance/clients/README.md), never in a request line,
  so they do not appear in results or transcripts;
- wire.py authenticates its raw connections with SCRAM (kafka-python's ScramClient), admin.py's
  AdminClient with librdkafka's options.

The password must never be written by a run: ``Security`` does not show it in its repr, and
tests/integration/runner/test_security_run.py greps a run's output for it.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass, field
from typing import Iterator

#: The environment variable a driver process reads its security settings from (JSON).
ENV = "KCONFORM_CLIENT_SECURITY"

#: `--security` values: Kafka's security.protocol names, lower case. Only SASL_PLAINTEXT is built.
PROTOCOLS = ("plaintext", "sasl_plaintext")
MECHANISM = "SCRAM-SHA-512"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class Security:
    """The security protocol of a run and the one user every client authenticates as."""

    protocol: str = "PLAINTEXT"        # Kafka's security.protocol
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @classmethod
    def generate(cls, protocol: str) -> "Security":
        """``protocol`` as `--security` spells it; a SASL one gets a new user and password."""
        proto = protocol.upper()
        if protocol.lower() not in PROTOCOLS:
            raise ValueError(f"--security {protocol!r}: one of {', '.join(PROTOCOLS)}")
        if not proto.startswith("SASL_"):
            return cls(proto)
        return cls(proto, MECHANISM, f"kconform-{secrets.token_hex(3)}", secrets.token_urlsafe(18))

    # -- clients -------------------------------------------------------------------------------
    def client_properties(self) -> dict[str, str]:
        """Java client properties (what the Java driver and Kafka's CLI tools take)."""
        if not self.sasl:
            return {}
        return {"security.protocol": self.protocol, "sasl.mechanism": self.mechanism,
                "sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required username="{self.username}" '
                                    f'password="{self.password}";'}

    def librdkafka_config(self) -> dict[str, str]:
        if not self.sasl:
            return {}
        return {"security.protocol": self.protocol, "sasl.mechanisms": self.mechanism,
                "sasl.username": self.username, "sasl.password": self.password}

    def python_kwargs(self) -> dict[str, str]:
        """kafka-python's and aiokafka's keyword arguments (their names are the same)."""
        if not self.sasl:
            return {}
        return {"security_protocol": self.protocol, "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username, "sasl_plain_password": self.password}

    def to_env(self) -> dict[str, str]:
        if not self.sasl:
            return {}
        return {ENV: json.dumps({"protocol": self.protocol, "mechanism": self.mechanism,
                                 "username": self.username, "password": self.password})}

    @classmethod
    def from_env(cls, environ: "os._Environ[str] | dict[str, str] | None" = None) -> "Security":
        """What a driver process was started with (PLAINTEXT without the variable)."""
        raw = (os.environ if environ is None else environ).get(ENV)
        if not raw:
            return cls()
        d = json.loads(raw)
        return cls(d["protocol"], d["mechanism"], d["username"], d["password"])

    # -- brokers -------------------------------------------------------------------------------
    def embedded_broker_configs(self, listen: str) -> dict[str, str]:
        """The embedded broker's configs (docs/security.md): one listener, on ``listen``
        (HOST:PORT, the address the target picked), the one the clients use."""
        if not self.sasl:
            return {}
        return {"listeners": f"{self.protocol}://{listen}", "sasl.enabled.mechanisms": self.mechanism,
                "kconform.sasl.users": f"{self.username}:{self.password}"}


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
