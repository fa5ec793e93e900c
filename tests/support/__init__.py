"""Test support shared by several test packages."""
