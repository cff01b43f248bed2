"""The package version, in one place: the API module, the report's generator line and setup read it."""
__version__ = "0.1.0"
