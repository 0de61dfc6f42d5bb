"""A real embedded Broker (real logs in a temp dir, real codec) driven through its
handler functions. The group tests run it on trio's MockClock (``group_helpers.mock_clock_test``)
so that session and rebalance timeouts pass instantly and deterministically (autojump: time
advances only when every task is blocked)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio
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

    @asynccontextmanager
    async def running(self):
        """The broker, open with its group coordinator running in a nursery for the block; then
        the nursery is cancelled and the broker closed -- also when the block fails, so a failing
        test leaves no open logs behind. Tasks the test starts go in ``self.nursery``."""
        try:
            async with trio.open_nursery() as nursery:
                yield await self.start(nursery)
                nursery.cancel_scope.cancel()
        finally:
            self.stop()

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
