"""Persistent state of the gateway: credentials, quotas and topic thresholds (SQLite)."""
