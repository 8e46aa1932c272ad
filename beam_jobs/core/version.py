"""The package version, recorded in every manifest."""

__all__ = ["__version__"]

__version__ = "0.1.0"
