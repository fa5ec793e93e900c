"""The one exception a pipeline job raises for bad input or configuration."""

from __future__ import annotations


class PipelineError(Exception):
    """A problem the user can fix (bad input, wrong option); shown without a traceback."""
