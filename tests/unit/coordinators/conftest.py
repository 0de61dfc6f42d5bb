"""A real embedded Broker (real logs in a temp dir, real codec) driven through its
handler functions, on trio's MockClock so that session and rebalance timeouts
pass instantly and deterministically (autojump: time advances only when every
task is blocked)."""

from __future__ import annotations

import trio
import trio.testing
import pytest

from broker_impl.config import BrokerConfig
from broker_impl.handlers import HANDLERS
from broker_impl.protocol.messages import API
from broker_impl.server.broker import Broker
from broker_impl.server.context import RequestContext


class Harness:
    def __init__(self, tmp_path, configs: dict[str, str] | None = None):
        self.tmp_path = tmp_path
        self.configs = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
                        **(configs or {})}
        self.broker: Broker | None = None
        self.nursery = None

    async def start(self, nursery) -> Broker:
        self.broker = Broker(BrokerConfig(dict(self.configs)), self.tmp_path / "data")
        self.broker.open()
        self.nursery = nursery
        await self.broker.group_coordinator.start(nursery)
        return self.broker

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None

    @property
    def gc(self):
        return self.broker.group_coordinator

    async def call(self, name: str, version: int, client_id: str = "client", **fields):
        """Encode the request at ``version``, decode it as the connection would, run the
        handler, and round-trip the response through its encoder too."""
        api = API[name]
        data = api.request.encode(version, api.Request(**fields))
        req, _ = api.request.decode(version, data)
        ctx = RequestContext(api, version, 1, client_id, "127.0.0.1:40000", 1)
        resp = await HANDLERS[api.key].fn(self.broker, ctx, req)
        out, _ = api.response.decode(version, api.response.encode(version, resp))
        return out


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def _run(fn, *args, clock=True):
    kw = {"clock": trio.testing.MockClock(autojump_threshold=0)} if clock else {}
    return trio.run(lambda: fn(*args), **kw)


@pytest.fixture
def run():
    """``run(async_fn, *args)``: run under trio, on MockClock with autojump by default."""
    return _run
