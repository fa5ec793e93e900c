"""``pipeline recommend``: a quota file from the rollup's percentiles."""
