"""``pipeline report``: one self-contained HTML page from the rollup (and replay)."""
