"""``pipeline replay``: candidate quotas replayed on recorded usage, one engine per slot."""
