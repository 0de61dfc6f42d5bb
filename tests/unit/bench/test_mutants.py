"""bench/mutants: every seeded bug has its patch, each patch applies to the code it mutates, and
names cases that exist -- so `bench/mutants/run.py` measures what the manifest says."""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from conformance.dsl import load_cases

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("kconform_bench_mutants", REPO / "bench/mutants/run.py")
mutants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutants)


def test_manifest_patches_and_cases():
    manifest = mutants.load_manifest()
    assert len(manifest) >= 20
    patches = {p.stem for p in (REPO / "bench/mutants/patches").glob("*.patch")}
    assert patches == set(manifest)
    ids = {c.id for c in load_cases()}
    for name, m in manifest.items():
        assert m["cases"] and set(m["cases"]) <= ids, name
        assert m["area"] in ("transactions", "idempotence", "groups", "storage", "replication", "fetch", "metadata", "security"), name
        assert m.get("security") in (None, "sasl_plaintext", "sasl_ssl"), name
    assert {m["area"] for m in manifest.values()} >= {"idempotence", "groups", "storage"}


def test_every_patch_applies_to_the_tree():
    for patch in sorted((REPO / "bench/mutants/patches").glob("*.patch")):
        out = subprocess.run(["git", "apply", "--check", str(patch)], cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0, f"{patch.name}: {out.stderr}"
