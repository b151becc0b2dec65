"""``python -m crfhead``: the ``crfhead`` command (:func:`crfhead.cli.main`) without the installed script."""

from crfhead.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
