"""The package's version, read from its installed metadata (one number, in pyproject.toml)."""

from importlib import metadata

try:
    __version__ = metadata.version("rlm_runtime")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
