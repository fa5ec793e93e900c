"""What bounds the gateway's resources: connection quotas and the request-bytes pool."""
