"""Request handlers, one module per API family (as Kafka's KafkaApis splits them).

A handler is ``async def handle(broker: Broker, ctx, request) -> response | None``
and registers itself with :func:`handles`, naming the versions it implements.
ApiVersions advertises exactly the registered set, so what a client may
negotiate is always what the broker really implements.

A handler may use every part of the :class:`~broker_impl.server.broker.Broker`
(its coordinators are always there, nothing is guarded); handler modules import
the type under ``TYPE_CHECKING`` only, since the broker loads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from ..protocol.errors import Errors
from ..protocol.messages import API, Api


@dataclass
class Handler:
    api: Api
    fn: Callable[..., Awaitable]
    min_version: int
    max_version: int
    advertised_min: int   # what ApiVersions says (Produce advertises 0, see KAFKA-18659)


HANDLERS: dict[int, Handler] = {}


def handles(name: str, min_version: int | None = None, max_version: int | None = None,
            advertised_min: int | None = None):
    api = API[name]
    lo = api.min_version if min_version is None else min_version
    hi = api.max_version if max_version is None else max_version

    def deco(fn):
        HANDLERS[api.key] = Handler(api, fn, lo, hi, lo if advertised_min is None else advertised_min)
        return fn

    return deco


def partition_or_error(topic, index: int, authorized: bool):
    """(partition, None) for a partition a request may act on, else (None, its error): the
    per-partition prologue of the partition APIs -- the topic ACL first
    (TOPIC_AUTHORIZATION_FAILED), then existence (UNKNOWN_TOPIC_OR_PARTITION), as KafkaApis
    checks them."""
    if not authorized:
        return None, Errors.TOPIC_AUTHORIZATION_FAILED
    if topic is None or not 0 <= index < len(topic.partitions):
        return None, Errors.UNKNOWN_TOPIC_OR_PARTITION
    return topic.partitions[index], None


def load_all() -> dict[int, Handler]:
    """Import every handler module so that each registers its APIs."""
    import importlib

    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
    return HANDLERS


#: Every handler module, one per API family.
MODULES = ("acls", "alter_configs", "api_versions", "cluster", "configs", "consumer_groups", "create_partitions",
           "delete_records", "describe_topic_partitions", "elect_leaders", "fetch", "find_coordinator", "groups",
           "init_producer_id", "list_offsets", "log_dirs", "metadata", "offsets", "produce", "sasl", "scram", "topics",
           "transactions")
