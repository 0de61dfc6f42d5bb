"""Mutations of a Kafka request frame: what a broken client, a bad network or an attacker sends.

Each mutation keeps the 4-byte size prefix equal to what follows (so the broker reads exactly the
mutated request and the connection stays in step), except `size`, which lies about it. Which
mutation, where and with what is drawn from a `random.Random`, so frame i of a run is a pure
function of the run's seed and i: a reproducer is the frame's bytes, and a run can be repeated.

- `flip`: 1 to 8 bit flips anywhere after the size prefix;
- `int32` / `int16`: an extreme value (0, 1, -1, the type's min and max) written at a random
  offset, aligned or not -- lengths, counts, ids, versions;
- `truncate`: the frame cut short at a random point (a field or an array ends early);
- `insert`: random bytes, or a copy of a slice of the frame, inserted at a random point;
- `delete`: a slice removed;
- `api`: the API key swapped for another Kafka API (the body is read with the wrong schema),
  at a version that API has;
- `version`: the API version changed (the body is read with another version's schema);
- `size`: the size prefix says more or fewer bytes than follow (the stream loses its framing).
"""
from __future__ import annotations

import random
import struct

from broker_impl.codec import API_BY_KEY

I32 = struct.Struct(">i")
I16 = struct.Struct(">h")
EXTREME_32 = (0, 1, -1, 2**31 - 1, -(2**31), 2**16, 255)
EXTREME_16 = (0, 1, -1, 2**15 - 1, -(2**15), 255)
#: Relative weights: cheap, wide mutations most, the stream-breaking one rarely (its frame waits
#: for bytes that never come, and costs a timeout).
WEIGHTS = {"flip": 30, "int32": 15, "int16": 10, "truncate": 10, "insert": 10, "delete": 8, "api": 7,
           "version": 7, "size": 1, "none": 2}
KINDS = tuple(WEIGHTS)
_CUMULATIVE = tuple(WEIGHTS[k] for k in KINDS)
HEADER = 4 + 8  # size, api key, api version, correlation id


def mutate(frame: bytes, rng: random.Random) -> tuple[str, bytes]:
    """(the mutation's name, the mutated frame) of one request frame (size prefix included)."""
    kind = rng.choices(KINDS, _CUMULATIVE)[0]
    body = bytearray(frame[4:])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif kind in ("int32", "int16"):
        packer, values = (I32, EXTREME_32) if kind == "int32" else (I16, EXTREME_16)
        if len(body) >= packer.size:
            at = rng.randrange(len(body) - packer.size + 1)
            if rng.random() < 0.5:
                at -= at % packer.size
            packer.pack_into(body, at, rng.choice(values))
    elif kind == "truncate":
        del body[rng.randrange(len(body)):]
    elif kind == "insert":
        at = rng.randrange(len(body) + 1)
        if body and rng.random() < 0.5:
            start = rng.randrange(len(body))
            chunk = bytes(body[start:start + rng.randint(1, 64)])
        else:
            chunk = rng.randbytes(rng.randint(1, 16))
        body[at:at] = chunk
    elif kind == "delete" and body:
        start = rng.randrange(len(body))
        del body[start:start + rng.randint(1, 32)]
    elif kind == "api" and len(body) >= 4:
        api = API_BY_KEY[rng.choice(sorted(API_BY_KEY))]
        I16.pack_into(body, 0, api.key)
        I16.pack_into(body, 2, rng.randint(api.min_version, api.max_version))
    elif kind == "version" and len(body) >= 4:
        I16.pack_into(body, 2, rng.choice((-1, 0, 1, 2, 3, 4, 5, 8, 9, 12, 13, 17, 18, 100, 2**15 - 1)))
    out = I32.pack(len(body)) + bytes(body)
    if kind == "size":
        out = I32.pack(len(body) + rng.choice((-3, -1, 1, 16, 2**20))) + bytes(body)
    return kind, out
