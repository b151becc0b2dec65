"""``python -m crfhead``: the ``crfhead`` command (:func:`crfhead.console.main`) without the installed script."""

from crfhead.console import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
