"""Listeners: where the broker accepts connections and with which security protocol, from Kafka's
``listeners`` and ``listener.security.protocol.map``; TLS from Kafka's PEM ``ssl.*`` configs.

``listeners`` empty (the default here; Kafka's is ``PLAINTEXT://:9092``) keeps the address the
broker was started with (``--listen``), PLAINTEXT. Otherwise it is Kafka's list,
``NAME://HOST:PORT,...``; NAME is a security protocol or a name that
``listener.security.protocol.map`` maps to one. The first listener is the broker's address:
what the CLI announces and what Metadata and FindCoordinator advertise (unless
``advertised.listeners`` says otherwise) -- every listener advertises it, a simplification
over Kafka, which answers each listener with its own endpoints.

TLS (SSL, SASL_SSL) accepts Kafka's PEM keystore and truststore only
(``ssl.keystore.type=PEM``): the key and its chain from one file (``ssl.keystore.location``,
the key encrypted with ``ssl.key.password`` or not) or inline
(``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``); trusted CAs from
``ssl.truststore.location`` or inline ``ssl.truststore.certificates``. ``ssl.client.auth``:
``none``, ``requested``, ``required``, as Kafka's. The principal of an SSL connection is what
Kafka's DefaultKafkaPrincipalBuilder gives with ``ssl.principal.mapping.rules=DEFAULT``: the
client certificate's subject in RFC 2253 form (``User:CN=alice,O=kconform``), or
``User:ANONYMOUS`` when the client sent none.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass

import trio

from ..config import BrokerConfig, ConfigError
from .sasl_mechanisms import SUPPORTED as SUPPORTED_MECHANISMS, CredentialStore

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ANONYMOUS = "User:ANONYMOUS"
#: What Kafka 4.3.1 sends a client that speaks plaintext Kafka to a TLS listener before closing:
#: a TLS 1.2 record, fatal alert internal_error (measured: 15 03 03 00 02 02 50).
PLAINTEXT_ON_TLS_ALERT = bytes.fromhex("15030300020250")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass
class Listener:
    name: str            # "SASL_SSL", or a custom name mapped to a protocol
    protocol: str        # one of PROTOCOLS
    host: str
    port: int
    ssl_context: ssl.SSLContext | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def parse_protocol_map(value: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in value.split(","))):
        name, sep, proto = item.partition(":")
        if not sep or proto.upper() not in PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map entry {item!r}: NAME:PROTOCOL with a protocol of {PROTOCOLS}")
        out[name.upper()] = proto.upper()
    return out


def parse_listeners(config: BrokerConfig, host: str, port: int) -> list[Listener]:
    value = config.str("listeners").strip()
    if not value:
        return [Listener("PLAINTEXT", "PLAINTEXT", host, port)]
    protocols = parse_protocol_map(config.str("listener.security.protocol.map"))
    out: list[Listener] = []
    for item in filter(None, (s.strip() for s in value.split(","))):
        name, sep, hostport = item.partition("://")
        lhost, colon, lport = hostport.rpartition(":")
        if not sep or not colon or not lport.isdigit():
            raise ConfigError(f"listeners entry {item!r}: NAME://HOST:PORT expected")
        lhost = lhost.strip("[]") or host
        if lhost not in _LOOPBACK:
            raise ConfigError(f"listeners entry {item!r}: only loopback addresses may be bound")
        name = name.upper()
        if name not in protocols:
            raise ConfigError(f"listener {name} is not in listener.security.protocol.map")
        out.append(Listener(name, protocols[name], lhost, int(lport)))
    if len({x.name for x in out}) != len(out):
        raise ConfigError(f"listeners {value!r}: each listener name may appear once")
    for listener in out:
        if listener.protocol in ("SSL", "SASL_SSL"):
            listener.ssl_context = server_ssl_context(config)
    if any(x.sasl for x in out):
        enabled = sasl_enabled_mechanisms(config)
        unsupported = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
        if unsupported or not enabled:
            raise ConfigError(f"sasl.enabled.mechanisms={config.str('sasl.enabled.mechanisms')!r}: "
                              f"the embedded broker implements {', '.join(SUPPORTED_MECHANISMS)}")
        try:
            CredentialStore.parse_users(config.str("kconform.sasl.users"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return out


def inter_broker_listener(config: BrokerConfig, listeners: list[Listener]) -> Listener:
    """The listener named by ``inter.broker.listener.name`` (empty: the first). A cluster's
    brokers dial each other there (replica fetches, WriteTxnMarkers, AddPartitionsToTxn
    verification); Kafka's usual secured set-up is a separate internal listener, e.g.
    ``listeners=SASL_SSL://...,REPLICATION://...`` with ``REPLICATION:PLAINTEXT`` in the map."""
    name = config.str("inter.broker.listener.name").strip().upper()
    if not name:
        return listeners[0]
    for listener in listeners:
        if listener.name == name:
            return listener
    raise ConfigError(f"inter.broker.listener.name={name}: no such listener in listeners "
                      f"({', '.join(x.name for x in listeners)})")


def sasl_enabled_mechanisms(config: BrokerConfig) -> list[str]:
    """The enabled mechanisms in the order SaslHandshake lists them: Kafka's
    ``new ArrayList<>(new HashSet<>(enabled))``, so Java's HashSet order, not the config's
    (measured on 4.3.1: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 is listed PLAIN, SCRAM-SHA-512,
    SCRAM-SHA-256)."""
    return java_hash_set_order([m.strip() for m in config.str("sasl.enabled.mechanisms").split(",") if m.strip()])


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_hash_set_order(items: list[str]) -> list[str]:
    """Iteration order of ``new HashSet<>(items)`` in Java: by bucket (the string's hashCode,
    spread as HashMap does, masked to the table size), insertion order within a bucket."""
    unique = list(dict.fromkeys(items))
    capacity = max(int(len(unique) / 0.75) + 1, 16)
    table = 1 << (capacity - 1).bit_length()

    def bucket(s: str) -> int:
        h = _java_string_hash(s)
        return (h ^ (h >> 16)) & (table - 1)

    return sorted(unique, key=bucket)   # sorted() is stable: insertion order within a bucket


def _pem_file(directory: str, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    return path


def server_ssl_context(config: BrokerConfig) -> ssl.SSLContext:
    pem_configs = {"keystore": ("ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key"),
                   "truststore": ("ssl.truststore.location", "ssl.truststore.certificates")}
    for kind, names in pem_configs.items():
        if any(config.str(k) for k in names) and config.str(f"ssl.{kind}.type").upper() != "PEM":
            raise ConfigError(f"ssl.{kind}.type={config.str(f'ssl.{kind}.type')}: the embedded broker reads PEM only")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    password = config.str("ssl.key.password") or None
    location = config.str("ssl.keystore.location")
    chain, key = config.str("ssl.keystore.certificate.chain"), config.str("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key:
            # Python's ssl reads keys from files only: a private directory, gone once loaded
            with tempfile.TemporaryDirectory(prefix="kconform-ssl-") as d:
                ctx.load_cert_chain(_pem_file(d, "chain.pem", chain), _pem_file(d, "key.pem", key), password=password)
        else:
            raise ConfigError("an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain "
                              "and ssl.keystore.key (ssl.keystore.type=PEM)")
        if config.str("ssl.truststore.location"):
            ctx.load_verify_locations(cafile=config.str("ssl.truststore.location"))
        elif config.str("ssl.truststore.certificates"):
            ctx.load_verify_locations(cadata=config.str("ssl.truststore.certificates"))
        else:   # Kafka: the JVM's default trust store
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS configuration: {exc}") from None
    auth = config.str("ssl.client.auth").lower()
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    if auth not in modes:
        raise ConfigError(f"ssl.client.auth={auth!r}: none, requested or required expected")
    ctx.verify_mode = modes[auth]
    if config.str("ssl.principal.mapping.rules").strip() != "DEFAULT":
        raise ConfigError("ssl.principal.mapping.rules: the embedded broker implements DEFAULT only")
    return ctx


#: OpenSSL's attribute names -> the keywords Java's X500Principal.getName(RFC2253) writes.
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}


def _rfc2253_escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def ssl_principal(peer_cert: dict | None) -> str:
    """Kafka's default SSL principal: ``User:`` + the subject in RFC 2253 order (last RDN first),
    multi-valued RDNs joined with ``+``. Attributes outside RFC 2253's keywords keep OpenSSL's
    name (Java writes their OID: a known difference)."""
    if not peer_cert or not peer_cert.get("subject"):
        return ANONYMOUS
    rdns = []
    for rdn in reversed(peer_cert["subject"]):
        rdns.append("+".join(f"{_RFC2253_KEYWORDS.get(k, k)}={_rfc2253_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)


async def secure(listener: Listener | None, stream: trio.SocketStream):
    """The connection's stream and its principal before SASL: TLS on SSL and SASL_SSL listeners
    (the handshake done here, so that a client that fails it never gets further), the client
    certificate's subject when it sent one."""
    if listener is None or listener.ssl_context is None:
        return stream, ANONYMOUS
    tls = trio.SSLStream(stream, listener.ssl_context, server_side=True)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        if getattr(exc.__cause__, "reason", None) == "WRONG_VERSION_NUMBER":
            # a client speaking plaintext Kafka: Kafka's SSLEngine answers with this alert
            with trio.move_on_after(1):
                await stream.send_all(PLAINTEXT_ON_TLS_ALERT)
        raise
    return tls, ssl_principal(tls.getpeercert())
