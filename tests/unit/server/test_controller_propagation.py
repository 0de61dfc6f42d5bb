"""The controller's metadata images reach each broker after a delay of their own
(``kconform.metadata.propagation.max.ms``, server/controller_server.py): drawn per broker from
the time of publishing -- a burst of images does not add up, and a broker behind a burst gets
the newest image once -- and never ahead of what was queued before them. On trio's MockClock:
no sockets, virtual time."""
from __future__ import annotations

import trio
import trio.testing

from broker_impl.config import BrokerConfig
from broker_impl.server.controller_server import ControllerServer, _Session


class Recorder:
    """A broker's end of the channel: what arrived, and when."""

    def __init__(self) -> None:
        self.got: list[tuple[float, dict]] = []

    async def send(self, msg: dict) -> None:
        self.got.append((trio.current_time(), msg))


def controller(tmp_path, max_ms: int) -> ControllerServer:
    config = BrokerConfig({"process.roles": "controller", "kconform.metadata.propagation.max.ms": str(max_ms)})
    server = ControllerServer(config, tmp_path)
    server._random.seed(20)
    return server


def deliver(server: ControllerServer, queue) -> list[tuple[float, dict]]:
    """Run one session's writer over what `queue(server, session)` put in its outbox."""
    out = Recorder()

    async def main() -> None:
        session = _Session()
        session.broker_id = 1
        server.sessions.add(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server._writer, out, session)
            queue(server, session)
            session.send.close()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return out.got


def test_an_image_waits_its_delay_and_what_follows_waits_behind_it(tmp_path) -> None:
    def queue(server, session):
        server._publish(server.controller.image)
        session.send.send_nowait(({"id": 7, "error": 0}, 0.0))     # a reply queued after the image

    got = deliver(controller(tmp_path, 200), queue)
    assert [m.get("op", m.get("id")) for _, m in got] == ["metadata", 7]
    assert 0.0 <= got[0][0] <= 0.2 and got[1][0] >= got[0][0]


def commit(server) -> None:
    """A metadata change: the next offset, published."""
    server.controller.image.offset += 1
    server._publish(server.controller.image)


def test_a_burst_of_images_arrives_within_one_delay_of_its_start_as_the_newest_image(tmp_path) -> None:
    def queue(server, _session):
        for _ in range(50):
            commit(server)

    got = deliver(controller(tmp_path, 100), queue)
    assert 1 <= len(got) < 50 and 0.0 < got[-1][0] <= 0.1 + 1e-9     # held back, but not 50 times over
    assert got[-1][1]["image"]["offset"] == 49                          # the newest change arrived
    assert [t for t, _ in got] == sorted(t for t, _ in got)


def test_a_mark_an_image_already_sent_covers_is_dropped_but_a_reply_is_not(tmp_path) -> None:
    def queue(server, session):
        commit(server)
        commit(server)
        session.send.send_nowait(({"id": 8, "error": 0}, 0.0))

    got = deliver(controller(tmp_path, 0), queue)
    assert [m.get("op", m.get("id")) for _, m in got] == ["metadata", 8]
    assert got[0][1]["image"]["offset"] == 1


def test_without_a_delay_every_image_goes_at_once(tmp_path) -> None:
    def queue(server, _session):
        for _ in range(5):
            commit(server)

    assert {t for t, _ in deliver(controller(tmp_path, 0), queue)} == {0.0}
