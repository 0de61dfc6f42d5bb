"""Small state files the broker must never lose or see half-written: the topic registry, the
producer id block, the transaction coordinator epoch.

Why all four steps: the temp file is fsynced so the new content is on disk before it gets the
real name, the rename is atomic so a crash leaves the old content or the new one, and the
directory is fsynced because until then the rename itself may be lost (the old content would
come back after a power cut: a reused producer id or coordinator epoch).
"""

from __future__ import annotations

import os
from pathlib import Path


def replace_durably(path: Path, text: str) -> None:
    """Make ``text`` the durable content of ``path``."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
