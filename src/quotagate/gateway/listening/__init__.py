"""Listening and accepting: a listener's sockets and server-side TLS, and the acceptor that
admits connections under the connection quotas before a client connection takes over."""
