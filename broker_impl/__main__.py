"""``python -m broker_impl``: the embedded broker (same as ``kconform broker``)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
