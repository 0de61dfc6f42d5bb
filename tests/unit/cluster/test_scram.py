"""cluster/scram: Kafka's AlterUserScramCredentials and DescribeUserScramCredentials rules, with
the results in the order Kafka 4.3.1 answered the same requests (measured over SASL_PLAINTEXT,
docs/security.md "SCRAM credentials")."""

from __future__ import annotations

import hashlib

from broker_impl.cluster.scram import ScramCredentials
from broker_impl.protocol.errors import Errors as E
from broker_impl.cluster.scram import ScramCredential

SHA256, SHA512 = 1, 2


def _salted(h: str, password: str, salt: bytes, iterations: int = 4096) -> bytes:
    return hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)


def test_an_upsertion_keeps_what_scram_needs_and_never_the_password():
    creds = ScramCredentials()
    salted = _salted("sha256", "carol-secret", b"carol-salt")
    [r] = creds.alter([], [("carol", SHA256, 4096, b"carol-salt", salted)])
    assert (r.user, r.error, r.message) == ("carol", E.NONE, None)
    # the same credential a server derives from the password itself
    assert creds.get("SCRAM-SHA-256", "carol") == ScramCredential.generate(
        "SCRAM-SHA-256", "carol-secret", 4096, b"carol-salt")
    assert "carol-secret" not in str(creds.changes_to_list()) and salted.hex() not in str(creds.changes_to_list())


def test_the_errors_of_one_request_in_kafkas_order():
    creds = ScramCredentials()
    creds.alter([], [("carol", SHA256, 4096, b"s", b"p")])
    ok = (b"00", b"00")
    results = creds.alter(
        [("nobody", SHA256), ("carol", SHA512), ("hank", 0), ("ivy", SHA256), ("ivy", SHA256)],
        [("dave", 0, 4096, *ok), ("erin", SHA256, 100, *ok), ("frank", SHA512, 20000, *ok), ("", SHA256, 4096, *ok),
         ("gina", SHA256, 4096, *ok), ("gina", SHA512, 4096, *ok), ("gina", SHA512, 4096, *ok),
         ("jack", SHA256, 16384, *ok), ("kim", SHA512, 5000, b"", b""), ("nobody", SHA256, 4096, *ok)])
    # Kafka 4.3.1's answer to this request, user by user
    assert [(r.user, r.error) for r in results] == [
        ("jack", E.NONE), ("frank", E.UNACCEPTABLE_CREDENTIAL), ("", E.UNACCEPTABLE_CREDENTIAL),
        ("carol", E.RESOURCE_NOT_FOUND), ("dave", E.UNSUPPORTED_SASL_MECHANISM), ("gina", E.DUPLICATE_RESOURCE),
        ("hank", E.UNSUPPORTED_SASL_MECHANISM), ("nobody", E.RESOURCE_NOT_FOUND), ("ivy", E.RESOURCE_NOT_FOUND),
        ("erin", E.UNACCEPTABLE_CREDENTIAL), ("kim", E.UNKNOWN_SERVER_ERROR)]
    messages = {r.user: r.message for r in results}
    assert messages["frank"] == "Too many iterations" and messages["erin"] == "Too few iterations"
    assert messages[""] == "Username must not be empty" and messages["dave"] == "Unknown SCRAM mechanism"
    assert messages["gina"] == "A user credential cannot be altered twice in the same request"
    assert messages["nobody"] == "Attempt to delete a user credential that does not exist"
    assert messages["kim"] is None and messages["jack"] is None
    assert creds.get("SCRAM-SHA-256", "jack").iterations == 16384        # the valid ones were applied
    assert creds.get("SCRAM-SHA-512", "kim") is None


def test_a_deletion_and_an_upsertion_of_one_user_is_a_duplicate_and_changes_nothing():
    creds = ScramCredentials()
    creds.alter([], [("carol", SHA256, 4096, b"s", b"p")])
    [r] = creds.alter([("carol", SHA256)], [("carol", SHA512, 4096, b"s", b"p")])
    assert (r.user, r.error) == ("carol", E.DUPLICATE_RESOURCE)
    assert creds.get("SCRAM-SHA-256", "carol") is not None and creds.get("SCRAM-SHA-512", "carol") is None


def test_describe_lists_like_kafka():
    base = {("SCRAM-SHA-512", "kconform-c62b5a"): ScramCredential.generate("SCRAM-SHA-512", "x")}
    creds = ScramCredentials(base)
    creds.alter([], [("carol", SHA256, 4096, b"s", b"p")])
    creds.alter([], [("carol", SHA512, 8192, b"s", b"p"), ("jack", SHA256, 16384, b"s", b"p")])
    assert creds.describe(None) == creds.describe([]) == [
        ("carol", E.NONE, "", [(SHA512, 8192), (SHA256, 4096)]), ("kconform-c62b5a", E.NONE, "", [(SHA512, 4096)]),
        ("jack", E.NONE, "", [(SHA256, 16384)])]
    assert creds.describe(["nobody", "zed", "zed", "amy"]) == [
        ("zed", E.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in a single request: zed", []),
        ("nobody", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody", []),
        ("amy", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: amy", [])]
    creds.alter([("carol", SHA256), ("kconform-c62b5a", SHA512)], [])   # a config user can be deleted too
    assert creds.describe(["carol", "kconform-c62b5a"])[0] == ("carol", E.NONE, "", [(SHA512, 8192)])
    assert creds.describe(["kconform-c62b5a"])[0][1] == E.RESOURCE_NOT_FOUND


def test_changes_survive_their_json_form(tmp_path):
    creds = ScramCredentials({("SCRAM-SHA-512", "alice"): ScramCredential.generate("SCRAM-SHA-512", "a")})
    creds.open_file(tmp_path)
    creds.alter([("alice", SHA512)], [("bob", SHA256, 4096, b"s", b"p")])
    creds.save()
    again = ScramCredentials({("SCRAM-SHA-512", "alice"): ScramCredential.generate("SCRAM-SHA-512", "a")})
    again.open_file(tmp_path)
    assert again.get("SCRAM-SHA-512", "alice") is None
    assert again.get("SCRAM-SHA-256", "bob") == creds.get("SCRAM-SHA-256", "bob")



def test_the_controller_commits_a_change_and_keeps_it(tmp_path):
    from broker_impl.cluster.controller import QuorumController
    from broker_impl.config import BrokerConfig

    c = QuorumController(BrokerConfig({}), tmp_path / "ctl", frozenset({1, 2, 3}))
    assert c.alter_user_scram_credentials([], [("carol", SHA256, 4096, b"s", b"p")], now=0.0) is None  # no quorum
    assert c.image.scram == [] and c.image.offset == -1
    for node in (1, 2):
        c.register_broker(node, f"inc-{node}", "127.0.0.1", 9000 + node, now=0.0)
    offset = c.image.offset
    [r] = c.alter_user_scram_credentials([], [("carol", SHA256, 4096, b"s", b"p")], now=0.0)
    assert (r.user, r.error) == ("carol", E.NONE) and c.image.offset == offset + 1
    [r] = c.alter_user_scram_credentials([("nobody", SHA256)], [], now=0.0)          # nothing to commit
    assert r.error == E.RESOURCE_NOT_FOUND and c.image.offset == offset + 1
    again = QuorumController(BrokerConfig({}), tmp_path / "ctl", frozenset({1, 2, 3}))   # metadata_image.json
    broker = ScramCredentials()
    broker.load_changes(again.image.scram)
    assert broker.get("SCRAM-SHA-256", "carol") == creds_of(c).get("SCRAM-SHA-256", "carol") is not None


def creds_of(controller) -> ScramCredentials:
    out = ScramCredentials()
    out.load_changes(controller.image.scram)
    return out
