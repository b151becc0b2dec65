"""``python -m crfhead.lab [--model PATH] [--port P] [--no-browser]``: serve the lab (:func:`crfhead.lab.cli.main`)."""

from crfhead.lab.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
