"""`kconform fuzz`: mutated requests at a target, many connections at once, until it breaks or N frames.

How a run goes:
1. the target starts (one node, a data topic); the seeds are gathered (seeds.py: a real client's
   session through the proxy, earlier runs' transcripts, schema-generated requests);
2. `connections` connections send frames: frame i is seed number r(i) mutated by r(i) (mutate.py),
   where r(i) is a random generator seeded with the run's seed and i -- so a frame is known by
   its index, and a run can be repeated. A connection sends a frame and waits for the answer (at
   most `timeout_s`: a request the broker parks -- a Fetch long poll, a JoinGroup -- is given up
   and its connection closed); a connection the broker closed is opened again;
3. every `health_every` frames, and whenever no frame finished for a while, the target is asked
   whether it lives (Target.health) and its logs are read (watch.py). A dead target is a *crash*,
   a live one that does not answer a *hang*: the frames in flight and the last ones sent are saved
   as reproducer files, the one that does it alone is looked for by replaying them one by one on
   the restarted target, and the run goes on (up to `max_incidents`, where the target restarts);
4. at the end: a last health check and log scan, then the same real-client session once more,
   straight at the target (a *round trip*: what was produced is read back).

Over SASL (`--security sasl_plaintext|sasl_ssl`: the target starts with the run's listener and
user, conformance/security.py) every connection speaks TLS where the run does and authenticates
before its frames -- except one connection in ``PREAUTH_EVERY``, which sends each frame as the
first request of a fresh connection that never authenticated: no such frame may be answered but
ApiVersions and SaslHandshake (Kafka closes the connection on any other, so an answer means the
request reached a handler unauthenticated: ``preauth_answered``). A login with a wrong password
is tried before and after the fuzzing and must be refused.

Results: DIR/fuzz.json (counts, incidents, internal errors with the frames that caused them, log
growth, the target's resident memory, the round trip), DIR/reproducers/, and a results row in
DIR/results.jsonl (case `fuzz/<target>`) so Allure and Spark show the run.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import trio

from broker_impl.codec import API_BY_KEY, FrameBuffer, FrameError, request_info

from .. import security
from ..results import Check, NotApplicable, ResultsFile, Row
from ..runner import new_run_id
from ..runner.row import now_iso
from ..targets import TopicSpec, Topology, make_target, wire
from ..wirediff.generate import Names
from ..wirediff.recipes import client_versions
from ..wirediff.run import DATA_TOPIC, DIFF_BROKER_CONFIGS, Side, prepare
from .mutate import mutate
from .seeds import by_api, client_frames, generated_frames, transcript_frames
from .session import client_session
from .watch import LogWatch

FUZZ_TOPIC = "fz-data"
#: The most a connection may read for one answer (a Fetch of the data topic is far smaller).
MAX_ANSWER = 64 * 1024 * 1024
#: Seconds without a finished frame after which the target is checked even between health checks.
STALL_S = 20.0
#: Frames kept by index (a frame is recomputed from its index) for a crash's reproducers.
RECENT = 200
#: Candidates replayed one by one to find the frame that alone crashes or hangs the target.
MAX_REPLAY = 30
#: Over SASL, one connection in this many fuzzes before authenticating (module doc).
PREAUTH_EVERY = 8
#: What a connection that has not authenticated may be answered: ApiVersions and SaslHandshake.
PREAUTH_ANSWERABLE = {k for k, api in API_BY_KEY.items() if api.name in ("ApiVersions", "SaslHandshake")}


@dataclass
class FuzzOptions:
    target: str
    frames: int
    results_dir: Path
    seeds: list[Path] = field(default_factory=list)
    connections: int = 32
    timeout_s: float = 1.0
    health_every: int = 2000
    seed: int = 0
    max_incidents: int = 10
    generated: bool = True
    #: Send no frame whose API key the target does not advertise: to fuzz past a target that
    #: dies of any unknown key (kfake), once that finding is known.
    advertised_keys_only: bool = False
    target_options: dict = field(default_factory=dict)
    #: The run's security (``kconform fuzz --security``): the target's listener and user.
    security: security.Security = field(default_factory=security.Security)


@dataclass
class Counts:
    sent: int = 0
    answered: int = 0
    closed: int = 0          # the broker closed the connection (what Kafka does to a malformed request)
    timed_out: int = 0       # no answer within timeout_s (a parked request, or a broken size prefix)
    reset: int = 0           # the connection failed while sending or reading
    unanswered: int = 0      # acks=0 Produce: no answer expected
    connect_failures: int = 0
    skipped: int = 0         # not sent: an API key the target does not advertise (advertised_keys_only)
    preauth_sent: int = 0    # over SASL: frames sent as the first request of an unauthenticated connection
    preauth_answered: int = 0  # ... and answered, though not ApiVersions or SaslHandshake: must stay 0
    by_mutation: dict = field(default_factory=dict)


class Frames:
    """Frame i of the run, from the seeds and the run's seed (module doc). Half the frames start
    from real clients' requests (a session's, earlier runs'), half from generated ones: there are
    far more generated seeds, and the clients' are what a broker meets first."""

    def __init__(self, real: list[bytes], generated: list[bytes], seed: int) -> None:
        self.groups = [g for g in (real, generated) if g]
        self.seed = seed

    def __call__(self, i: int) -> tuple[str, bytes]:
        rng = random.Random(self.seed * 1_000_003 + i)
        group = self.groups[rng.randrange(len(self.groups))]
        return mutate(group[rng.randrange(len(group))], rng)


class Segment:
    """The state of the senders between two incidents."""

    def __init__(self, start: int, end: int) -> None:
        self.next = start
        self.end = end
        self.inflight: dict[int, tuple[int, int]] = {}        # worker -> (frame index, local port)
        self.recent: collections.deque = collections.deque(maxlen=RECENT)
        self.ports: collections.OrderedDict = collections.OrderedDict()  # local port -> last frame index
        self.last_progress = time.monotonic()
        self.incident: tuple[str, str] | None = None           # (crash | hang, what health said)
        self.unsent: list[int] = []   # frames a worker could not send (no connection): sent later
        self.suspect = False          # a connection was refused: check the target now

    def take(self) -> int | None:
        if self.incident is not None:
            return None
        if self.unsent:
            return self.unsent.pop()
        if self.next >= self.end:
            return None
        i = self.next
        self.next += 1
        return i


def start_target(opts: FuzzOptions, n: int):
    """A started instance of the run's target (the n-th: a target that cannot restart a node is
    replaced by a fresh one after an incident)."""
    target = make_target(opts.target, **opts.target_options)
    target.start(Topology(nodes=1, topics=[TopicSpec(DATA_TOPIC, 1), TopicSpec(FUZZ_TOPIC, 3)]),
                 dict(DIFF_BROKER_CONFIGS), opts.results_dir / "work" / f"instance-{n}")
    return target


class Fuzzer:
    def __init__(self, opts: FuzzOptions, target, frames: Frames, log: Callable[[str], None]) -> None:
        self.opts = opts
        self.target = target
        self.instances = [target]
        self.frames = frames
        self.log = log
        self.counts = Counts()
        self.watches = [LogWatch(target)]
        self.incidents: list[dict] = []
        self.internal: list[dict] = []
        self.internal_count = 0
        self.max_rss = 0
        self.health_checks = 0
        self.repro = opts.results_dir / "reproducers"
        self.preauth_samples: list[dict] = []   # frames answered before authentication (saved)

    # ------------------------------------------------------------------ senders
    async def _connect(self, address: tuple[str, int], authenticate: bool):
        """A connection as the run speaks: TLS where it does, SASL first unless ``authenticate``
        is False (a pre-authentication worker)."""
        sec = security.current()
        stream = await trio.open_tcp_stream(*address)
        try:
            if sec.tls:
                stream = trio.SSLStream(stream, sec.client_ssl_context(), server_hostname=address[0])
                await stream.do_handshake()
            if sec.sasl and authenticate:
                await wire.authenticate_stream(stream, address, sec)
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return stream

    async def _worker(self, seg: Segment, wid: int, address: tuple[str, int]) -> None:
        stream = None
        buf = FrameBuffer(MAX_ANSWER)
        port = 0
        preauth = security.current().sasl and wid % PREAUTH_EVERY == PREAUTH_EVERY - 1
        try:
            while True:
                i = seg.take()
                if i is None:
                    return
                kind, frame = self.frames(i)
                if self.opts.advertised_keys_only and request_info(frame).api_key not in self.target.api_ranges:
                    self.counts.skipped += 1
                    continue
                if stream is None:
                    try:
                        with trio.fail_after(5):
                            stream = await self._connect(address, authenticate=not preauth)
                        port = getattr(stream, "transport_stream", stream).socket.getsockname()[1]
                        buf = FrameBuffer(MAX_ANSWER)
                    except (OSError, trio.TooSlowError, trio.BrokenResourceError, wire.WireError):
                        self.counts.connect_failures += 1  # the monitor looks why; the frame waits
                        seg.unsent.append(i)
                        seg.suspect = True
                        await trio.sleep(0.2)
                        continue
                seg.inflight[wid] = (i, port)
                seg.recent.append(i)
                seg.ports[port] = i
                if len(seg.ports) > 20000:
                    seg.ports.popitem(last=False)
                self.counts.sent += 1
                self.counts.by_mutation[kind] = self.counts.by_mutation.get(kind, 0) + 1
                outcome = await self._exchange(stream, buf, frame)
                seg.inflight.pop(wid, None)
                seg.last_progress = time.monotonic()
                setattr(self.counts, outcome, getattr(self.counts, outcome) + 1)
                if preauth:
                    self._preauth(i, frame, outcome)
                if outcome != "answered" or preauth:   # a pre-auth frame is always a first request
                    await stream.aclose()
                    stream = None
        finally:
            if stream is not None:
                with trio.CancelScope(shield=True):
                    await stream.aclose()

    def _preauth(self, i: int, frame: bytes, outcome: str) -> None:
        """A frame sent before authenticating: answered only if ApiVersions or SaslHandshake."""
        self.counts.preauth_sent += 1
        key = request_info(frame).api_key
        if outcome == "answered" and key not in PREAUTH_ANSWERABLE:
            self.counts.preauth_answered += 1
            if len(self.preauth_samples) < 20:
                self.preauth_samples.append({"frame": i, "api_key": key, "file": str(self._save(f"preauth/frame-{i}.bin", i))})

    async def _exchange(self, stream, buf: FrameBuffer, frame: bytes) -> str:
        """Send one frame, read one answer: answered, closed, timed_out, reset or unanswered."""
        expects = request_info(frame).expects_response
        try:
            await stream.send_all(frame)
            with trio.move_on_after(self.opts.timeout_s if expects else 0.05):
                while buf.next_frame() is None:
                    data = await stream.receive_some(1 << 16)
                    if not data:
                        return "closed"
                    buf.feed(data)
                return "answered"
            return "timed_out" if expects else "unanswered"
        except FrameError:
            return "reset"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return "reset"

    # ------------------------------------------------------------------ watching
    async def _monitor(self, seg: Segment, nursery) -> None:
        next_check = seg.next + self.opts.health_every
        while seg.next < seg.end or seg.inflight or seg.unsent:
            await trio.sleep(0.2)
            stalled = time.monotonic() - seg.last_progress > STALL_S
            if seg.next >= next_check or stalled or seg.suspect:
                seg.suspect = False
                next_check = seg.next + self.opts.health_every
                if not await self._check(seg):
                    nursery.cancel_scope.cancel()
                    return
                seg.last_progress = time.monotonic()
        await self._check(seg)
        nursery.cancel_scope.cancel()

    async def _check(self, seg: Segment) -> bool:
        """Health and logs; False (and seg.incident set) when the target is dead or does not answer."""
        self.health_checks += 1
        why = await trio.to_thread.run_sync(self.target.health)
        await trio.to_thread.run_sync(self._scan_logs, seg)
        rss = sum(self.target.rss_bytes().values())
        self.max_rss = max(self.max_rss, rss)
        self.log(f"{seg.next} frames: {self.counts.answered} answered, {self.counts.closed} closed, "
                 f"{self.counts.timed_out} timed out, {self.internal_count} internal errors, "
                 f"rss {rss / 2**20:.0f} MiB" + (f" -- {why}" if why else ""))
        if why:
            seg.incident = ("crash" if "exited" in why else "hang", why)
            return False
        return True

    def _scan_logs(self, seg: Segment) -> None:
        scan = self.watches[-1].scan()
        if not scan.internal_errors:
            return
        self.internal_count += scan.internal_errors
        for n, line in enumerate(scan.lines):
            entry = {"log": line}
            port = scan.peer_ports[n] if n < len(scan.peer_ports) else None
            i = seg.ports.get(port) if port is not None else None
            if i is not None and len(self.internal) < 50:
                entry.update(frame=i, file=str(self._save(f"internal-{i}.bin", i)))
            if len(self.internal) < 200:
                self.internal.append(entry)

    def _save(self, name: str, i: int) -> Path:
        kind, frame = self.frames(i)
        path = self.repro / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(frame)
        return path.relative_to(self.opts.results_dir)

    # ------------------------------------------------------------------ the run
    def run(self) -> None:
        start = 0
        while start < self.opts.frames:
            seg = Segment(start, self.opts.frames)
            address = self.target.live_addresses()[0][1]
            trio.run(self._segment, seg, address)
            if seg.incident is None:
                return
            self._incident(seg)
            if len(self.incidents) >= self.opts.max_incidents or not self.restart():
                return
            start = seg.next

    async def _segment(self, seg: Segment, address) -> None:
        async with trio.open_nursery() as nursery:
            for w in range(self.opts.connections):
                nursery.start_soon(self._worker, seg, w, address)
            nursery.start_soon(self._monitor, seg, nursery)

    def _incident(self, seg: Segment) -> None:
        kind, why = seg.incident
        n = len(self.incidents) + 1
        inflight = sorted(i for i, _ in seg.inflight.values())
        candidates = inflight + [i for i in reversed(seg.recent) if i not in inflight]
        folder = f"{kind}-{n}"
        files = [str(self._save(f"{folder}/{i}-{self.frames(i)[0]}.bin", i)) for i in candidates]
        entry = {"kind": kind, "reason": why, "after_frames": seg.next, "in_flight": inflight,
                 "candidates": files, "last_words": self.target.last_words(30)}
        self.log(f"{kind} after frame {seg.next}: {why}")
        culprit = self._replay(candidates[:MAX_REPLAY])
        if culprit is not None:
            entry["frame"] = culprit
            entry["reproducer"] = str(self._save(f"{kind}-{n}.bin", culprit))
        elif self._replay_sequence(sorted(candidates)):
            # no frame does it alone, the candidates in the order they were sent do: the
            # reproducer is the directory, its files in index order
            entry["reproducer"] = f"{folder}/ (every frame, in index order)"
        self.incidents.append(entry)

    def restart(self) -> bool:
        """Every node restarted; where the target cannot restart a node (Tansu keeps its data in
        memory), a fresh instance in its place. False when neither works."""
        try:
            for node in self.target.node_ids():
                self.target.restart(node)
            return True
        except NotApplicable:
            pass
        except (TimeoutError, RuntimeError) as exc:
            self.log(f"the target does not come back ({exc}): the run stops here")
            return False
        self.target.stop()
        try:
            self.target = start_target(self.opts, len(self.instances))
        except Exception as exc:  # noqa: BLE001 - a target that no longer starts ends the run, with why
            self.log(f"a fresh instance does not start ({exc}): the run stops here")
            return False
        self.instances.append(self.target)
        self.watches.append(LogWatch(self.target))
        return True

    def stop(self) -> None:
        for t in self.instances:
            t.stop()

    @property
    def log_bytes(self) -> int:
        return sum(w.log_bytes() for w in self.watches)

    @property
    def logs_readable(self) -> bool:
        return self.watches[-1].readable

    def _replay(self, candidates: list[int]) -> int | None:
        """The first candidate that alone kills or wedges a restarted target (None: none does, or
        the target cannot restart)."""
        for i in candidates:
            if not self.restart():
                return None
            self._send_alone(i)
            time.sleep(0.3)
            if self.target.health():
                return i
        return None

    def _replay_sequence(self, frames: list[int]) -> bool:
        """Whether these frames, one after the other on a restarted target, kill or wedge it."""
        if not frames or not self.restart():
            return False
        for i in frames:
            self._send_alone(i, wait_s=0.5)
        time.sleep(0.3)
        return self.target.health() is not None

    def _send_alone(self, i: int, wait_s: float = 2.0) -> None:
        """Frame i on a connection of its own; its answer (if any) read and dropped."""
        _, frame = self.frames(i)
        address = self.target.live_addresses()[0][1]
        try:
            with wire.open_connection(address, wait_s) as s:
                s.sendall(frame)
                s.settimeout(wait_s)
                try:
                    s.recv(1 << 16)
                except OSError:
                    pass
        except (OSError, wire.WireError):
            pass


def wrong_password_refused(target) -> bool | None:
    """Over SASL: a login with a wrong password is refused (None on a run without SASL)."""
    sec = security.current()
    if not sec.sasl:
        return None
    address = target.live_addresses()[0][1]
    try:
        with wire.open_connection(address, 10, dataclasses.replace(sec, password=sec.password + "-wrong")):
            pass
    except wire.AuthenticationFailed:
        return True
    except (OSError, wire.WireError):
        return True    # closed or failed otherwise: not let in either
    return False


def run_fuzz(opts: FuzzOptions, log: Callable[[str], None] = lambda s: None) -> dict:
    """The whole run (module doc); returns what DIR/fuzz.json holds."""
    with security.use(opts.security):
        return _run_fuzz(opts, log)


def _run_fuzz(opts: FuzzOptions, log: Callable[[str], None]) -> dict:
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(opts.results_dir / "reproducers", ignore_errors=True)
    work = opts.results_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    started_at = now_iso()
    t0 = time.monotonic()
    target = start_target(opts, 0)
    fz = None
    try:
        side = Side(target.name, target, target.live_addresses()[0][1])
        prepare(side, client_versions([target.api_ranges]))
        real, session_error = client_frames(target, FUZZ_TOPIC, "fz-seed")
        from_client = len(real)
        real += transcript_frames(opts.seeds)
        from_runs = len(real) - from_client
        generated = []
        if opts.generated:
            names = Names(DATA_TOPIC, FUZZ_TOPIC, "fz-group", "fz-txn", "fz-unknown")
            generated = generated_frames(target.api_ranges, names, side.ctx["topic_id"])
        seeds = real + generated
        if not seeds:
            raise RuntimeError("no seed frames: the client session sent nothing and no transcript was given")
        log(f"{len(seeds)} seeds ({from_client} from a client session, {from_runs} from transcripts, "
            f"{len(generated)} generated); {opts.frames} frames on {opts.connections} connections")
        fz = Fuzzer(opts, target, Frames(real, generated, opts.seed), log)
        refused_before = wrong_password_refused(target)
        t1 = time.monotonic()
        fz.run()
        fuzz_s = time.monotonic() - t1
        restarted = fz.target.health() is not None and fz.restart()  # the last incident ended the run
        topics = _topic_count(fz.target)
        refused_after = wrong_password_refused(fz.target) if fz.target.health() is None else None
        if fz.target.health() is None:
            round_trip = asdict(client_session(fz.target._live_bootstrap(), FUZZ_TOPIC, "fz-final",
                                               transactions="transactions" in fz.target.capabilities))
            round_trip.pop("values", None)
            round_trip["after_restart"] = restarted
        else:
            round_trip = {"error": "the target is down and cannot be restarted"}
        report = {
            "run_id": new_run_id(), "started_at": started_at, "target": target.name,
            "target_version": target.version, "frames": opts.frames, "seed": opts.seed,
            "connections": opts.connections, "timeout_s": opts.timeout_s,
            "seeds": {"total": len(seeds), "client_session": from_client, "transcripts": from_runs,
                      "by_api": by_api(seeds), "session_error": session_error},
            "counts": asdict(fz.counts), "seconds": round(fuzz_s, 1),
            "frames_per_second": round(fz.counts.sent / fuzz_s, 1) if fuzz_s else None,
            "health_checks": fz.health_checks, "instances": len(fz.instances),
            "crashes": sum(1 for x in fz.incidents if x["kind"] == "crash"),
            "hangs": sum(1 for x in fz.incidents if x["kind"] == "hang"),
            "incidents": fz.incidents,
            "internal_errors": fz.internal_count if fz.logs_readable else None,
            "internal_error_samples": fz.internal,
            "log_bytes": fz.log_bytes, "max_rss_bytes": fz.max_rss, "topics_at_end": topics,
            "round_trip": round_trip, "total_seconds": round(time.monotonic() - t0, 1),
            "security_protocol": security.current().protocol,
            "preauth_answered_samples": fz.preauth_samples,
            "wrong_password_refused": (None if refused_before is None
                                       else bool(refused_before and refused_after is not False)),
        }
    finally:
        if fz is not None:
            fz.stop()
        target.stop()
        if not os.environ.get("KCONFORM_KEEP_WORK"):
            shutil.rmtree(work, ignore_errors=True)
    (opts.results_dir / "fuzz.json").write_text(json.dumps(report, indent=1, default=str))
    ResultsFile(opts.results_dir).write([result_row(report)])
    return report


def _topic_count(target) -> int | None:
    """How many topics the target has (fuzzed CreateTopics and auto-creating Metadata add some)."""
    try:
        return len(wire.metadata(target.live_addresses()[0][1], None).topics)
    except (wire.WireError, IndexError):
        return None


def result_row(report: dict) -> Row:
    """The run as one results row (docs/results-schema.md): a check per kind of finding."""
    ie = report["internal_errors"]
    rt = report["round_trip"]
    checks = [
        Check("no crash", report["crashes"] == 0,
              "; ".join(f"{x['reason']} (reproducer {x.get('reproducer', 'not isolated')})"
                        for x in report["incidents"] if x["kind"] == "crash")),
        Check("no hang", report["hangs"] == 0,
              "; ".join(x["reason"] for x in report["incidents"] if x["kind"] == "hang")),
        Check("no internal error", not ie,
              "the target's log is not readable here" if ie is None else
              f"{ie} internal errors" + (f", e.g. {report['internal_error_samples'][0]['log']}" if ie else "")),
        Check("a real client's round trip after the fuzzing", rt.get("error") is None,
              rt.get("error") or f"{rt.get('consumed')} of {rt.get('produced')} records read back"),
        Check("broker log grew less than 5 MB", report["log_bytes"] < 5 * 2**20,
              f"{report['log_bytes'] / 2**20:.1f} MB"),
    ]
    if report.get("wrong_password_refused") is not None:   # a run over SASL
        c = report["counts"]
        checks += [
            Check("no request answered before authentication", c["preauth_answered"] == 0,
                  f"{c['preauth_answered']} of {c['preauth_sent']} frames sent unauthenticated were answered"
                  + "".join(f"; frame {x['frame']} (API key {x['api_key']}): {x['file']}"
                            for x in report["preauth_answered_samples"][:3])),
            Check("a wrong password is refused", report["wrong_password_refused"],
                  "refused before and after the fuzzing" if report["wrong_password_refused"]
                  else "a login with a wrong password was let in"),
        ]
    row = Row(run_id=report["run_id"], started_at=report["started_at"], case=f"fuzz/{report['target']}",
              case_title=f"{report['frames']} mutated frames at {report['target']}", tags=["fuzz"],
              target=report["target"], target_version=report["target_version"], client="raw",
              client_version="kconform fuzz", outcome={"counts": report["counts"], "seeds": report["seeds"]},
              duration_s=report["total_seconds"], artifacts={"fuzz": "fuzz.json"},
              security_protocol=report.get("security_protocol") if report.get("security_protocol") != "PLAINTEXT"
              else None)
    row.judge(checks)
    return row


