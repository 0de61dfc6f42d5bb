"""Helpers shared by the group coordinator tests: the test decorator that runs a coroutine on
trio's MockClock, and the classic-protocol calls (JoinGroup, SyncGroup, Heartbeat,
DescribeGroups) made through the ``harness`` fixture of conftest.py."""

from __future__ import annotations

import functools

import trio
import trio.testing

from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API, DATA

JG = API["JoinGroup"].Request
SUB = DATA["ConsumerProtocolSubscription"]


def mock_clock_test(fn):
    """Turn ``async def test_x(harness, ...)`` into a test pytest can run: the coroutine runs under
    ``trio.run`` on a MockClock with autojump, so timeouts elapse as soon as every task waits.
    Fixtures still resolve from the wrapped signature (``functools.wraps`` sets ``__wrapped__``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return trio.run(functools.partial(fn, *args, **kwargs), clock=trio.testing.MockClock(autojump_threshold=0))
    return wrapper


def subscription(*topics: str) -> bytes:
    return b"\x00\x00" + SUB.encode(0, SUB.cls(topics=list(topics), user_data=None))


def protos(*names: str, topics=("t",)):
    return [JG.JoinGroupRequestProtocol(name=n, metadata=subscription(*topics)) for n in names]


async def join(h, group="g", member_id="", version=5, session=10_000, rebalance=30_000, names=("range",),
               instance=None, client_id="client", protocol_type="consumer", topics=("t",)):
    return await h.call("JoinGroup", version, client_id=client_id, group_id=group, session_timeout_ms=session,
                        rebalance_timeout_ms=rebalance, member_id=member_id, group_instance_id=instance,
                        protocol_type=protocol_type, protocols=protos(*names, topics=topics))


async def sync(h, member_id, generation, assignments=None, group="g", version=3, instance=None):
    A = API["SyncGroup"].Request.SyncGroupRequestAssignment
    return await h.call("SyncGroup", version, group_id=group, generation_id=generation, member_id=member_id,
                        group_instance_id=instance,
                        assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()])


async def heartbeat(h, member_id, generation, group="g", version=3, instance=None):
    r = await h.call("Heartbeat", version, group_id=group, generation_id=generation, member_id=member_id,
                     group_instance_id=instance)
    return r.error_code


async def describe(h, group="g", version=5):
    r = await h.call("DescribeGroups", version, groups=[group], include_authorized_operations=False)
    return r.groups[0]


async def full_join(h, **kw):
    """v4+ two-step join of a new member; returns the second JoinGroup response."""
    first = await join(h, **kw)
    assert first.error_code == Errors.MEMBER_ID_REQUIRED
    return await join(h, member_id=first.member_id, **kw)
