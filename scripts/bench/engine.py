"""Every crfhead name the benchmark uses, imported here and nowhere else.

The other modules import crfhead through this one, so a change of crfhead's package layout is fixed
in these lines alone.
"""

from crfhead import CRF
from crfhead.engine.backends import resolve, use_backend

__all__ = ["CRF", "resolve", "use_backend"]
