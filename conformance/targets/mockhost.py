"""The process that holds a librdkafka mock cluster for the `librdkafka-mock` target.

Why a process of its own: the mock cluster lives inside a librdkafka handle (rd_kafka_t), and
its brokers are threads of whatever process created it. Run inside the harness, a fault in the
mock would take the harness down, and the harness could not SIGSTOP or SIGKILL it. So this small
host creates the cluster through ctypes on the librdkafka that the confluent-kafka wheel bundles
(`confluent_kafka.libs/librdkafka-*.so.1` -- the mock API is experimental with no ABI promise,
which is why pyproject pins the wheel), prints where it listens, and then obeys commands.

Protocol (one line each way, JSON on stdin, JSON on stdout):
  argv    python -m conformance.targets.mockhost --brokers N [--debug mock]
  stdout  `bootstrap HOST:PORT,HOST:PORT,...` then `ready`; after that one JSON answer per
          command, {"ok": true} or {"ok": false, "error": "NAME: text"}
  stdin   one JSON command per line, {"op": OP, ...}; EOF ends the host
  stderr  librdkafka's log (the target appends it to the node log)
  SIGTERM destroys the cluster and exits 0

Commands (each is one rd_kafka_mock_* call; the names are the C API's):
  topic_create        topic, partitions, replication_factor
  broker_down         broker          (closes its connections; its port refuses new ones)
  broker_up           broker
  partition_leader    topic, partition, broker
  coordinator_set     key_type ("group" | "transaction"), key, broker
  push_request_errors api_key, errors [codes]; broker (optional: only that broker)
  clear_request_errors api_key
  set_apiversion      api_key, min, max   (-1, -1 removes the API)
  set_host_port       broker, host, port  (the address Metadata advertises for it)
  set_rtt             broker, rtt_ms
  group_initial_rebalance_delay_ms  delay_ms
"""
from __future__ import annotations

import argparse
import ctypes
import json
import signal
import sys
from pathlib import Path

from .librdkafka_mock import librdkafka_path

#: rd_kafka_type_t RD_KAFKA_PRODUCER: the handle only owns the cluster, it produces nothing.
RD_KAFKA_PRODUCER = 0


def load(path: Path) -> ctypes.CDLL:
    """The library with the signatures of the functions the host calls."""
    lib = ctypes.CDLL(str(path))
    p, i, i16, i32, s, sz = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int16, ctypes.c_int32,
                             ctypes.c_char_p, ctypes.c_size_t)
    signatures = {
        "rd_kafka_version_str": ([], s),
        "rd_kafka_conf_new": ([], p),
        "rd_kafka_conf_set": ([p, s, s, s, sz], i),
        "rd_kafka_new": ([i, p, s, sz], p),
        "rd_kafka_destroy": ([p], None),
        "rd_kafka_err2name": ([i], s),
        "rd_kafka_err2str": ([i], s),
        "rd_kafka_mock_cluster_new": ([p, i], p),
        "rd_kafka_mock_cluster_destroy": ([p], None),
        "rd_kafka_mock_cluster_bootstraps": ([p], s),
        "rd_kafka_mock_topic_create": ([p, s, i, i], i),
        "rd_kafka_mock_broker_set_down": ([p, i32], i),
        "rd_kafka_mock_broker_set_up": ([p, i32], i),
        "rd_kafka_mock_partition_set_leader": ([p, s, i32, i32], i),
        "rd_kafka_mock_coordinator_set": ([p, s, s, i32], i),
        "rd_kafka_mock_push_request_errors_array": ([p, i16, sz, ctypes.POINTER(i)], None),
        "rd_kafka_mock_clear_request_errors": ([p, i16], None),
        "rd_kafka_mock_set_apiversion": ([p, i16, i16, i16], i),
        "rd_kafka_mock_broker_set_host_port": ([p, i32, s, i], None),
        "rd_kafka_mock_broker_set_rtt": ([p, i32, i], i),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": ([p, i32], None),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    # Variadic: (broker, api_key, count, err0, rtt0, err1, rtt1, ...); only the fixed part is typed.
    lib.rd_kafka_mock_broker_push_request_error_rtts.restype = i
    return lib


class MockError(Exception):
    pass


class MockCluster:
    """A librdkafka mock cluster of N brokers (ids 1..N) and the calls the commands make."""

    def __init__(self, lib: ctypes.CDLL, brokers: int, debug: str | None = None) -> None:
        self.lib = lib
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        settings = {"client.id": "kconform-mockhost"}
        if debug:
            settings["debug"] = debug
        for key, value in settings.items():
            if lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr)) != 0:
                raise MockError(f"conf {key}={value}: {errstr.value.decode()}")
        self.rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))  # takes over conf
        if not self.rk:
            raise MockError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.mc:
            lib.rd_kafka_destroy(self.rk)
            raise MockError("rd_kafka_mock_cluster_new failed (see the log)")

    def bootstraps(self) -> str:
        return self.lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def close(self) -> None:
        if self.mc:
            self.lib.rd_kafka_mock_cluster_destroy(self.mc)
            self.mc = None
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None

    def _check(self, err: int, what: str) -> None:
        if err:
            name = self.lib.rd_kafka_err2name(err).decode()
            raise MockError(f"{name}: {what}: {self.lib.rd_kafka_err2str(err).decode()}")

    def command(self, cmd: dict) -> None:
        """Run one command (module doc); MockError when the mock refuses it."""
        lib, mc, op = self.lib, self.mc, cmd.get("op")
        if op == "topic_create":
            self._check(lib.rd_kafka_mock_topic_create(mc, cmd["topic"].encode(), int(cmd["partitions"]),
                                                       int(cmd["replication_factor"])), op)
        elif op == "broker_down":
            self._check(lib.rd_kafka_mock_broker_set_down(mc, int(cmd["broker"])), op)
        elif op == "broker_up":
            self._check(lib.rd_kafka_mock_broker_set_up(mc, int(cmd["broker"])), op)
        elif op == "partition_leader":
            self._check(lib.rd_kafka_mock_partition_set_leader(mc, cmd["topic"].encode(), int(cmd["partition"]),
                                                               int(cmd["broker"])), op)
        elif op == "coordinator_set":
            self._check(lib.rd_kafka_mock_coordinator_set(mc, cmd["key_type"].encode(), cmd["key"].encode(),
                                                          int(cmd["broker"])), op)
        elif op == "push_request_errors":
            errors = [int(e) for e in cmd["errors"]]
            if cmd.get("broker") is None:
                array = (ctypes.c_int * len(errors))(*errors)
                lib.rd_kafka_mock_push_request_errors_array(mc, int(cmd["api_key"]), len(errors), array)
            else:
                pairs = [ctypes.c_int(v) for e in errors for v in (e, 0)]
                self._check(lib.rd_kafka_mock_broker_push_request_error_rtts(
                    ctypes.c_void_p(mc), ctypes.c_int32(int(cmd["broker"])), ctypes.c_int16(int(cmd["api_key"])),
                    ctypes.c_size_t(len(errors)), *pairs), op)
        elif op == "clear_request_errors":
            lib.rd_kafka_mock_clear_request_errors(mc, int(cmd["api_key"]))
        elif op == "set_apiversion":
            self._check(lib.rd_kafka_mock_set_apiversion(mc, int(cmd["api_key"]), int(cmd["min"]), int(cmd["max"])), op)
        elif op == "set_host_port":
            lib.rd_kafka_mock_broker_set_host_port(mc, int(cmd["broker"]), cmd["host"].encode(), int(cmd["port"]))
        elif op == "set_rtt":
            self._check(lib.rd_kafka_mock_broker_set_rtt(mc, int(cmd["broker"]), int(cmd["rtt_ms"])), op)
        elif op == "group_initial_rebalance_delay_ms":
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, int(cmd["delay_ms"]))
        else:
            raise MockError(f"unknown command {op!r}")


def serve(cluster: MockCluster, stdin, stdout) -> None:
    """Answer commands until stdin closes."""
    for line in stdin:
        line = line.strip()
        if not line:
            continue
        try:
            cluster.command(json.loads(line))
            answer = {"ok": True}
        except (MockError, KeyError, ValueError, TypeError) as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}" if not isinstance(exc, MockError)
                      else str(exc)}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--debug", default=None, help="librdkafka debug contexts, e.g. mock")
    args = parser.parse_args(argv)

    def terminate(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    path = librdkafka_path()
    if path is None:
        print("no librdkafka in the confluent-kafka wheel (pip install confluent-kafka)", file=sys.stderr)
        return 2
    cluster = MockCluster(load(path), args.brokers, args.debug)
    try:
        print(f"bootstrap {cluster.bootstraps()}", flush=True)
        print("ready", flush=True)
        serve(cluster, sys.stdin, sys.stdout)
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
