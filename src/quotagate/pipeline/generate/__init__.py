"""``pipeline generate``: synthetic usage events of a seeded population."""
