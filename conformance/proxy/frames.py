"""Which request each response answers, per proxied connection.

A Kafka response carries only its correlation id, so the proxy names it by remembering, per
connection, the requests it forwarded (:class:`PendingRequests`). Naming a frame itself is the
codec's (:func:`broker_impl.codec.request_info` / :func:`~broker_impl.codec.response_info`):
headers only, never a body, since decoding a 1 MiB Produce body per frame would cost more than
forwarding it.
"""

from __future__ import annotations

from collections import OrderedDict

from broker_impl.codec import FrameInfo, response_info


class PendingRequests:
    """Requests forwarded on one connection and not yet answered, in the order they were sent.

    Kafka answers a connection's requests in order, so when the response to correlation id X
    arrives, every request before X that is still pending was never going to be answered
    (an ``acks=0`` Produce we could not recognise, a request the broker chose to drop): they
    are forgotten, which keeps this bounded. A response whose id was never sent (a corrupted
    frame) is named as unknown and forgets nothing.

    Responses the proxy synthesizes (an ``answer`` rule) wait in the same queue, behind the
    requests that were pending when they were made: a client reads its responses in request
    order, so such a response may go out only once everything before it was answered.
    :meth:`take_ready` hands over those whose turn has come.
    """

    def __init__(self) -> None:
        self._pending: OrderedDict[object, object] = OrderedDict()
        self._ready: list[tuple[FrameInfo, bytes, object]] = []
        self._injected = 0

    def sent(self, info: FrameInfo) -> None:
        if info.correlation_id is not None and info.expects_response:
            self._pending[info.correlation_id] = info

    def inject(self, info: FrameInfo, frame: bytes, tag: object = None) -> None:
        """Queue ``frame``, the proxy's own response (named ``info``), behind every pending request;
        ``tag`` comes back with it (the rule that made it)."""
        self._injected += 1
        self._pending[("injected", self._injected)] = (info, frame, tag)

    def answer(self, frame: bytes) -> FrameInfo:
        info = response_info(frame)
        corr = info.correlation_id
        req = self._pending.get(corr) if corr is not None else None
        if not isinstance(req, FrameInfo):
            return info
        while True:
            k, v = self._pending.popitem(last=False)
            if k == corr:
                break
            if not isinstance(v, FrameInfo):
                self._ready.append(v)  # injected before this request: it goes out first
        return response_info(frame, req.api_key, req.api_version, req.client_id)

    def take_passed(self) -> list[tuple[FrameInfo, bytes, object]]:
        """Injected responses the last :meth:`answer` passed over: they go out before its frame."""
        ready, self._ready = self._ready, []
        return ready

    def take_ready(self) -> list[tuple[FrameInfo, bytes, object]]:
        """Injected responses that may go out now, in order: those passed over by :meth:`answer`,
        then those at the head of the queue (nothing still unanswered before them)."""
        while self._pending:
            k, v = next(iter(self._pending.items()))
            if isinstance(v, FrameInfo):
                break
            self._pending.popitem(last=False)
            self._ready.append(v)
        ready, self._ready = self._ready, []
        return ready

    def __len__(self) -> int:
        return len(self._pending)
