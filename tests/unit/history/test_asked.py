"""Responses paired with their requests by (connection, correlation id)."""

from conformance.history.asked import Asked


def test_the_same_correlation_id_on_two_connections_is_two_requests():
    asked: Asked[str] = Asked()
    asked.ask({"conn": 1, "correlation_id": 7, "dir": "c2b"}, "g1")
    asked.ask({"conn": 2, "correlation_id": 7, "dir": "c2b"}, "g2")
    assert asked.answered({"conn": 2, "correlation_id": 7, "dir": "b2c"}) == "g2"
    assert asked.answered({"conn": 1, "correlation_id": 7, "dir": "b2c"}) == "g1"
    # answered once: a second response with that id pairs with nothing
    assert asked.answered({"conn": 1, "correlation_id": 7, "dir": "b2c"}, "none") == "none"
