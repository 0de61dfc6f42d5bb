"""Mutations: a frame is a pure function of (seed, index); its size prefix tells the truth except
for the `size` mutation."""
from __future__ import annotations

import random
import struct
from collections import Counter

from broker_impl.codec import API
from conformance.fuzz.mutate import KINDS, mutate
from conformance.fuzz.run import Frames
from conformance.raw import build_request

SEED = build_request("Metadata", 12, {"topics": [{"name": "t", "topic_id": "00" * 16}]})


def test_the_size_prefix_is_true_unless_the_mutation_is_about_it():
    rng = random.Random(7)
    kinds = Counter()
    for _ in range(3000):
        kind, frame = mutate(SEED, rng)
        kinds[kind] += 1
        (size,) = struct.unpack_from(">i", frame)
        assert (size == len(frame) - 4) == (kind != "size")
    assert set(kinds) == set(KINDS)


def test_frame_i_is_the_same_in_every_run():
    seeds = [SEED, build_request("ApiVersions", 3, {"client_software_name": "a", "client_software_version": "1"})]
    a, b = Frames(seeds[:1], seeds[1:], seed=3), Frames(seeds[:1], seeds[1:], seed=3)
    assert [a(i) for i in range(200)] == [b(i) for i in range(200)]
    assert [a(i) for i in range(50)] != [Frames(seeds[:1], seeds[1:], seed=4)(i) for i in range(50)]


def test_an_api_swap_names_a_real_api_at_one_of_its_versions():
    rng = random.Random(1)
    seen = 0
    while seen < 50:
        kind, frame = mutate(SEED, rng)
        if kind != "api":
            continue
        seen += 1
        key, version = struct.unpack_from(">hh", frame, 4)
        api = next(a for a in API.values() if a.key == key)
        assert api.min_version <= version <= api.max_version
