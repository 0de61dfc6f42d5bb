"""ACLs with the semantics of Kafka's StandardAuthorizer (docs/security.md, "ACLs").

Off by default: ``authorizer.class.name`` empty means no authorizer, every request is allowed
and the ACL APIs answer SECURITY_DISABLED, as Kafka without an authorizer. Kafka's value
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` turns it on.

The rules are StandardAuthorizerData's (read from apache/kafka):

- a principal in ``super.users`` (``User:alice;User:bob``) is allowed everything;
- the ACLs of the action's resource are those of its type whose pattern is LITERAL with the same
  name or the name ``*``, or PREFIXED with a prefix of the name;
- one of them matches the request when its principal is the request's or ``User:*``, its host
  is the client's address or ``*``, and its operation is the action's or ALL -- or, for an ALLOW
  ACL only, implies it: DESCRIBE is implied by READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS
  by ALTER_CONFIGS;
- a matching DENY wins; else a matching ALLOW allows; else, when the resource has no ACL at all
  (for anybody), ``allow.everyone.if.no.acl.found`` decides; else denied.

``authorize_by_resource_type`` is Kafka's Authorizer.authorizeByResourceType default (whether the
principal may do the operation on some resource of the type: InitProducerId's "WRITE on any
topic" for idempotent producers).

The broker's own requests, answered in process (server/connection LocalRequests), carry
:data:`BROKER_PRINCIPAL`, a super user always: Kafka's inter-broker principal is one in every
secured deployment (it must be, for WriteTxnMarkers' and the verification's CLUSTER_ACTION).

The ACLs of a one-node broker are kept in ``acls.json`` in its data directory, replaced durably
on every change (Kafka keeps them in the cluster metadata log). A broker of a cluster refuses an
authorizer: its nodes share no ACLs yet and their replication speaks PLAINTEXT as ANONYMOUS.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path

from .durable_file import replace_durably
from ..config import BrokerConfig, ConfigError

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: the principal of the requests a broker answers itself (a super user)
BROKER_PRINCIPAL = "User:kconform-broker"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
ACLS_FILE = "acls.json"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation
Res = ResourceType
_IMPLIES = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
            Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}}


def enum_of(cls, code: int):
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def validation_error(self) -> str | None:
        """Why Kafka refuses to create it (INVALID_REQUEST), as AclControlManager.validateNewAcl and
        KafkaApis' handleCreateAcls check; None if it is valid."""
        if self.resource_type == Res.CLUSTER and self.resource_name != CLUSTER_NAME:   # KafkaApis' own checks
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not self.resource_name:
            return "Invalid empty resource name"
        if self.resource_type in (Res.UNKNOWN, Res.ANY):          # then the controller's

            return f"Invalid resourceType {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {self.pattern_type.name}"
        if self.operation in (Op.UNKNOWN, Op.ANY):
            return f"Invalid operation {self.operation.name}"
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permissionType {self.permission_type.name}"
        if ":" not in self.principal:
            return (f"Could not parse principal from `{self.principal}` (no colon is present separating "
                    "the principal type from the principal name)")
        return None

    def names_any(self) -> bool:
        """A binding no ACL can be (Kafka's ResourcePattern / AccessControlEntry refuse it)."""
        return Res.ANY == self.resource_type or self.pattern_type in (PatternType.ANY, PatternType.MATCH) or \
            Op.ANY == self.operation or AclPermissionType.ANY == self.permission_type

    def covers(self, rtype: ResourceType, name: str) -> bool:
        """Whether this ACL is one of the resource's (its pattern matches the name)."""
        if self.resource_type != rtype:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name == name or self.resource_name == WILDCARD

    def result(self, principal: str, host: str, op: AclOperation) -> bool | None:
        """StandardAuthorizerData.findResult: True (allow), False (deny), None (no match)."""
        if self.principal not in (principal, WILDCARD_PRINCIPAL):
            return None
        if self.host not in (WILDCARD, host):
            return None
        if self.operation != Op.ALL:
            if self.permission_type == AclPermissionType.ALLOW:
                if self.operation not in _IMPLIES.get(op, {op}):
                    return None
            elif self.operation != op:
                return None
        return self.permission_type == AclPermissionType.ALLOW


@dataclass(frozen=True)
class AclBindingFilter:
    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, b: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches and AccessControlEntryFilter.matches."""
        if self.resource_type != Res.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        if self.resource_name is not None:
            if pt in (PatternType.ANY, b.pattern_type):
                if self.resource_name != b.resource_name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:     # MATCH
                if b.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(b.resource_name):
                return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (Op.ANY, b.operation)
                and self.permission_type in (AclPermissionType.ANY, b.permission_type))


class StandardAuthorizer:
    def __init__(self, super_users: set[str], allow_if_no_acl: bool, path: Path | None = None):
        self.super_users = super_users | {BROKER_PRINCIPAL}
        self.allow_if_no_acl = allow_if_no_acl
        self.path = path
        self.acls: dict[AclBinding, None] = {}      # an ordered set, in the order of creation
        if path is not None and path.exists():
            self.load(json.loads(path.read_text()))

    @classmethod
    def from_config(cls, config: BrokerConfig, data_dir: Path, is_cluster: bool) -> StandardAuthorizer | None:
        name = config.str("authorizer.class.name").strip()
        if not name:
            return None
        if name != STANDARD_AUTHORIZER:
            raise ConfigError(f"authorizer.class.name={name!r}: only {STANDARD_AUTHORIZER} is implemented")
        supers = {s.strip() for s in config.str("super.users").split(";") if s.strip()}
        # a broker of a cluster keeps no file: its ACLs come with the controller's metadata image
        return cls(supers, config.bool("allow.everyone.if.no.acl.found"),
                   None if is_cluster else Path(data_dir) / ACLS_FILE)

    # -- decisions ---------------------------------------------------------
    def authorize(self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        allowed = has_resource_acls = False
        for acl in self.acls:
            if not acl.covers(rtype, name):
                continue
            has_resource_acls = True
            r = acl.result(principal, host, op)
            if r is False:
                return False
            allowed = allowed or r is True
        return allowed or (not has_resource_acls and self.allow_if_no_acl)

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType (its default method)."""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for acl in self.acls:
            if acl.resource_type != rtype or acl.principal not in (principal, WILDCARD_PRINCIPAL) \
                    or acl.host not in (host, WILDCARD) or acl.operation not in (op, Op.ALL):
                continue
            (allow if acl.permission_type == AclPermissionType.ALLOW else deny)[acl.pattern_type].add(acl.resource_name)
        if WILDCARD in deny[PatternType.LITERAL]:
            return False
        if WILDCARD in allow[PatternType.LITERAL]:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name.startswith(p) for p in deny[PatternType.PREFIXED])

        if any(n not in deny[PatternType.LITERAL] and not denied_by_prefix(n) for n in allow[PatternType.LITERAL]):
            return True
        return any(not denied_by_prefix(p) for p in allow[PatternType.PREFIXED])

    # -- the ACL APIs ------------------------------------------------------
    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.acls if f.matches(b)]

    def create(self, bindings: list[AclBinding]) -> None:
        for b in bindings:
            self.acls[b] = None
        self._save()

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the ACLs it deleted (an ACL matching two filters is listed by both)."""
        out = [self.describe(f) for f in filters]
        for matched in out:
            for b in matched:
                self.acls.pop(b, None)
        if any(out):
            self._save()
        return out

    # -- the JSON form (acls.json; a cluster's metadata image) -------------
    def load(self, dicts: list[dict]) -> None:
        """Replace every ACL by these (the JSON form of ``as_dicts``, in creation order)."""
        self.acls = {binding_from_dict(AclBinding, d): None for d in dicts}

    def as_dicts(self) -> list[dict]:
        return [binding_dict(b) for b in self.acls]

    def _save(self) -> None:
        if self.path is not None:
            replace_durably(self.path, json.dumps(self.as_dicts(), indent=1))


def binding_dict(b: AclBinding | AclBindingFilter) -> dict:
    """An ACL binding or filter as JSON (enums by code): acls.json, the metadata image, and what
    a broker of a cluster forwards to the controller."""
    return {k: (int(v) if isinstance(v, IntEnum) else v) for k, v in asdict(b).items()}


def binding_from_dict(cls: type, d: dict):
    """``binding_dict``'s inverse, for AclBinding or AclBindingFilter (the same fields)."""
    return cls(Res(d["resource_type"]), d["resource_name"], PatternType(d["pattern_type"]), d["principal"], d["host"],
               Op(d["operation"]), AclPermissionType(d["permission_type"]))


def client_host(ctx) -> str:
    """The client's address, as ACL hosts name it (the peer without its port; IPv6 unbracketed)."""
    return (ctx.peer.rpartition(":")[0] or ctx.peer).strip("[]")


def allowed(broker, ctx, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    """Kafka's AuthHelper.authorize: always true without an authorizer."""
    a = broker.authorizer
    return a is None or a.authorize(ctx.principal, client_host(ctx), op, rtype, name)


def allowed_cluster(broker, ctx, op: AclOperation) -> bool:
    return allowed(broker, ctx, op, Res.CLUSTER, CLUSTER_NAME)


#: Kafka 4.3.1's AclEntry.supportedOperations (measured: a super user's 3576, 8096 and 3400)
TOPIC_OPERATIONS = (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
                    Op.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                      Op.IDEMPOTENT_WRITE)
GROUP_OPERATIONS = (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)


def authorized_operations(broker, ctx, rtype: ResourceType, name: str, supported) -> int:
    """AuthHelper.authorizedOperations: the bit field of the supported operations one may do
    (all of them without an authorizer)."""
    return sum(1 << op for op in supported if allowed(broker, ctx, op, rtype, name))


def allowed_by_resource_type(broker, ctx, op: AclOperation, rtype: ResourceType) -> bool:
    a = broker.authorizer
    return a is None or a.authorize_by_resource_type(ctx.principal, client_host(ctx), op, rtype)
