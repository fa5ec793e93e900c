"""``pipeline ingest``: broker request logs (text and KIP-673 JSON) into usage events."""
