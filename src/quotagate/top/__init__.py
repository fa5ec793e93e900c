"""``quotagate top``: who is throttled now, read from the gateways' Prometheus endpoints.

``model`` turns exposition texts into rows, ``view`` turns rows into a rich renderable and
``scrape`` fetches the texts; the command (commands/top.py) only loops.
"""
