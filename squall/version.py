"""squall's version, in a module of its own: the slots compare theirs with the driver's without
importing the whole package facade (squall/__init__.py)."""

__version__ = "0.1.0"
