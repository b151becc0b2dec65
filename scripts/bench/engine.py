"""Every crfhead name the benchmark uses, imported here and nowhere else.

The other modules import crfhead through this one, so a change of crfhead's package layout is fixed
in these lines alone.
"""

from crfhead import CRF
from crfhead.engine.backends import available, resolve, use_backend
from crfhead.engine.backends.cpu import native, threads_for

__all__ = ["CRF", "available", "native", "resolve", "threads_for", "use_backend"]
