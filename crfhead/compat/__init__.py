"""Drop-in replacements for other CRF libraries' APIs, on crfhead's engine."""

__all__: list[str] = []
