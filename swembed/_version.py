"""The package's version, in the lowest layer so that any module may read it (``swembed.__version__`` re-exports
it)."""
__version__ = "0.1.0"
