"""Tests of the memory check (a package, so its conftest never shadows tests/conftest.py)."""
