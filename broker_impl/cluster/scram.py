"""SCRAM credentials as Kafka's controller keeps them (ScramControlManager, ScramImage): per
user and mechanism a salt, StoredKey, ServerKey and an iteration count -- never the password.
AlterUserScramCredentials sends the salted password, from which the controller derives the two
keys (UserScramCredentialRecord); DescribeUserScramCredentials lists mechanisms and iterations.

Where they come from here: ``kconform.sasl.users`` (the broker's config, read at start-up as
Kafka's ``kafka-storage format --add-scram`` writes them: ``base``) and the changes
AlterUserScramCredentials made since (``changes``: a credential, or None for a deletion), which
override the config. A one-node broker keeps the changes in ``scram_credentials.json`` in its
data directory; a cluster keeps them in the controller's metadata image, so every broker applies
the same ones (cluster/controller, ``MetadataImage.scram``).

Kafka's answers, read from ScramControlManager.alterCredentials and ScramImage.describe
(apache/kafka 4.x) and measured on 4.3.1 (docs/security.md, "SCRAM credentials"):

- Alter: a user named twice in one request (deletions and upsertions together, whatever the
  mechanism) is DUPLICATE_RESOURCE; an empty name UNACCEPTABLE_CREDENTIAL; a mechanism other
  than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) UNSUPPORTED_SASL_MECHANISM; iterations outside
  4096..16384 UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist
  RESOURCE_NOT_FOUND; an empty salted password UNKNOWN_SERVER_ERROR without a message (Java's
  HMAC refuses an empty key). The others are applied together. Results: the deletions done, the
  upsertions done, then the failures, each group in Java's HashMap order of the user names.
- Describe: no users (null or empty) lists every user; a user named twice is
  DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND; results in HashMap order. A user's
  mechanisms are listed SCRAM-SHA-512 first (measured; Kafka's map of them is keyed by an enum,
  so its order is the JVM's identity hashes).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..protocol.errors import Errors
from .durable_file import replace_durably
from ..coordinators.partitioner import java_string_hash

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
#: Kafka's ScramMechanism: the hash, and the fewest iterations a credential may have.
SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
SCRAM_MIN_ITERATIONS = 4096


def secure_random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: a 130-bit random number in base 36 (nonces, salts)."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while n:
        n, r = divmod(n, 36)
        out.append(digits[r])
    return "".join(reversed(out)) or "0"


# -- SCRAM's formulas (RFC 5802 section 3) --------------------------------------------------
def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def scram_hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def client_key(hash_name: str, salted: bytes) -> bytes:
    return scram_hmac(hash_name, salted, b"Client Key")


def stored_key(hash_name: str, key: bytes) -> bytes:
    return hashlib.new(hash_name, key).digest()


def server_key(hash_name: str, salted: bytes) -> bytes:
    return scram_hmac(hash_name, salted, b"Server Key")


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def generate(cls, mechanism: str, password: str, iterations: int = SCRAM_MIN_ITERATIONS,
                 salt: bytes | None = None) -> "ScramCredential":
        h = SCRAM_HASHES[mechanism]
        salt = secure_random_string().encode("ascii") if salt is None else salt
        salted = salted_password(h, password, salt, iterations)
        return cls(salt, stored_key(h, client_key(h, salted)), server_key(h, salted), iterations)



#: Kafka's ScramMechanism.type() and ScramControlManager.MAX_ITERATIONS
MECHANISM_TYPES = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
TYPE_OF = {v: k for k, v in MECHANISM_TYPES.items()}
MAX_ITERATIONS = 16384
#: the order Kafka 4.3.1 listed a user's mechanisms in (measured)
DESCRIBE_ORDER = (SCRAM_SHA_512, SCRAM_SHA_256)

DUPLICATE_ALTER = "A user credential cannot be altered twice in the same request"
DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
NOT_FOUND_DESCRIBE = "Attempt to describe a user credential that does not exist: "
NOT_FOUND_DELETE = "Attempt to delete a user credential that does not exist"
#: a one-node broker's changes, in its data directory
SCRAM_FILE = "scram_credentials.json"


def java_hash_map_order(keys: list[str], largest_size: int | None = None) -> list[str]:
    """Iteration order of a ``new HashMap<>()`` that got ``keys`` in this order (no removal of a
    key that stays): by bucket of the spread String.hashCode, insertion order within a bucket.
    ``largest_size``: the most entries it ever held (its table never shrinks)."""
    size = max(len(keys), largest_size or 0)
    table = 16
    while size > table * 3 // 4:
        table *= 2

    def bucket(s: str) -> int:
        h = java_string_hash(s) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table - 1)

    return sorted(keys, key=bucket)


def credential_from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """Kafka's finishUpsertion: StoredKey and ServerKey from the client's salted password."""
    if not salted:
        raise ValueError("Empty key")   # Java's SecretKeySpec: UNKNOWN_SERVER_ERROR on the wire
    h = SCRAM_HASHES[mechanism]
    return ScramCredential(bytes(salt), stored_key(h, client_key(h, salted)), server_key(h, salted), iterations)


@dataclass(frozen=True)
class AlterResult:
    user: str
    error: Errors
    message: str | None


class ScramCredentials:
    """The credentials a broker authenticates with: ``base`` (from its config) under ``changes``."""

    def __init__(self, base: dict[tuple[str, str], ScramCredential] | None = None):
        self.base = dict(base or {})                       # (mechanism, user) -> credential
        self.changes: dict[tuple[str, str], ScramCredential | None] = {}

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        key = (mechanism, user)
        return self.changes[key] if key in self.changes else self.base.get(key)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        out: dict[str, dict[str, ScramCredential]] = {}
        for key in sorted(set(self.base) | set(self.changes), key=lambda k: (k[1], k[0])):
            cred = self.get(*key)
            if cred is not None:
                out.setdefault(key[1], {})[key[0]] = cred
        return out

    # -- the JSON form of the changes (the data directory's file, the metadata image) ----------
    def changes_to_list(self) -> list[dict]:
        out = []
        for (mechanism, user), c in sorted(self.changes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            entry = {"name": user, "mechanism": mechanism}
            if c is None:
                entry["deleted"] = True
            else:
                entry.update(salt=c.salt.hex(), stored_key=c.stored_key.hex(), server_key=c.server_key.hex(),
                             iterations=c.iterations)
            out.append(entry)
        return out

    def open_file(self, data_dir: Path) -> None:
        """A one-node broker: the changes are kept in (and read back from) its data directory."""
        self._file = Path(data_dir) / SCRAM_FILE
        if self._file.exists():
            self.load_changes(json.loads(self._file.read_text())["changes"])

    def save(self) -> None:
        if getattr(self, "_file", None) is not None:
            replace_durably(self._file, json.dumps({"changes": self.changes_to_list()}))

    def load_changes(self, entries: list[dict]) -> None:
        self.changes = {}
        for e in entries:
            key = (e["mechanism"], e["name"])
            self.changes[key] = None if e.get("deleted") else ScramCredential(
                bytes.fromhex(e["salt"]), bytes.fromhex(e["stored_key"]), bytes.fromhex(e["server_key"]),
                e["iterations"])

    # -- AlterUserScramCredentials (Kafka's ScramControlManager.alterCredentials) --------------
    def alter(self, deletions, upsertions) -> list[AlterResult]:
        """Apply what is valid of one request (``deletions``: (name, mechanism type) pairs;
        ``upsertions``: (name, mechanism type, iterations, salt, salted password)); the results
        in Kafka's order."""
        to_delete: dict[str, tuple] = {}
        to_upsert: dict[str, tuple] = {}
        errors: dict[str, tuple[Errors, str | None]] = {}
        error_order: list[str] = []
        largest = {"del": 0, "ups": 0}

        def fail(name: str, error: Errors, message: str | None) -> None:
            if name not in errors:
                error_order.append(name)
            errors[name] = (error, message)

        def name_and_mechanism(name: str, mech: int):
            if not name:
                return Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
            if mech not in MECHANISM_TYPES:
                return Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
            return None

        for name, mech in deletions:
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None:
                fail(name, Errors.DUPLICATE_RESOURCE, DUPLICATE_ALTER)
                continue
            why = name_and_mechanism(name, mech)
            if why is None and self.get(MECHANISM_TYPES[mech], name) is None:
                why = Errors.RESOURCE_NOT_FOUND, NOT_FOUND_DELETE
            if why is not None:
                fail(name, *why)
            else:
                to_delete[name] = (name, mech)
                largest["del"] = max(largest["del"], len(to_delete))
        for name, mech, iterations, salt, salted in upsertions:
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None or to_upsert.pop(name, None) is not None:
                fail(name, Errors.DUPLICATE_RESOURCE, DUPLICATE_ALTER)
                continue
            why = name_and_mechanism(name, mech)
            if why is None and iterations < SCRAM_MIN_ITERATIONS:
                why = Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            elif why is None and iterations > MAX_ITERATIONS:
                why = Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            if why is not None:
                fail(name, *why)
            else:
                to_upsert[name] = (name, mech, iterations, salt, salted)
                largest["ups"] = max(largest["ups"], len(to_upsert))

        results: list[AlterResult] = []
        new: dict[tuple[str, str], ScramCredential | None] = {}
        for name in java_hash_map_order(list(to_delete), largest["del"]):
            new[(MECHANISM_TYPES[to_delete[name][1]], name)] = None
            results.append(AlterResult(name, Errors.NONE, None))
        for name in java_hash_map_order(list(to_upsert), largest["ups"]):
            _, mech, iterations, salt, salted = to_upsert[name]
            mechanism = MECHANISM_TYPES[mech]
            try:
                new[(mechanism, name)] = credential_from_salted_password(mechanism, salt, salted, iterations)
            except ValueError:
                fail(name, Errors.UNKNOWN_SERVER_ERROR, None)
                continue
            results.append(AlterResult(name, Errors.NONE, None))
        for name in java_hash_map_order(error_order):
            results.append(AlterResult(name, *errors[name]))
        self.changes.update(new)
        return results

    # -- DescribeUserScramCredentials (Kafka's ScramImage.describe) --------------------------
    def describe(self, names: list[str] | None) -> list[tuple[str, Errors, str, list[tuple[int, int]]]]:
        """(user, error, message, [(mechanism type, iterations)]) per user, in Kafka's order."""
        known = self.users()
        duplicated: dict[str, bool] = {}
        for name in (names or sorted(known)):
            duplicated[name] = name in duplicated
        out = []
        for name in java_hash_map_order(list(duplicated)):
            if duplicated[name]:
                out.append((name, Errors.DUPLICATE_RESOURCE, DUPLICATE_DESCRIBE + name, []))
            elif name not in known:
                out.append((name, Errors.RESOURCE_NOT_FOUND, NOT_FOUND_DESCRIBE + name, []))
            else:
                infos = [(TYPE_OF[m], known[name][m].iterations) for m in DESCRIBE_ORDER if m in known[name]]
                out.append((name, Errors.NONE, "", infos))
        return out
