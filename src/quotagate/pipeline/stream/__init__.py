"""``pipeline stream``: the usage topic into the rollup tables, kept current."""
