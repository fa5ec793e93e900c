"""A fleet of gateways: the workers and instances that hold quotas together, coordinated
through topics on the upstream cluster they front (no other moving part)."""
