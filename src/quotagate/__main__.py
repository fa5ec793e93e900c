"""``python -m quotagate``, the ``quotagate`` command's entry point, and a ``.py`` entry point
for ``spark-submit`` (which runs only Python files it can recognise by name): the same CLI.

kio registers hypothesis strategies for its types whenever hypothesis can be imported, and
building its text strategy writes hypothesis's Unicode cache into ``./.hypothesis``: every
command run from a venv with the test dependencies would leave that directory wherever it
was run. The command has no use for hypothesis, so it is made unimportable here, before
anything imports kio; the test suite imports ``quotagate.cli`` directly and keeps it.
Spawned worker processes run this module's imports again, so they are covered too.
"""

import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from quotagate.cli import main  # noqa: E402 - after hypothesis is blocked

if __name__ == "__main__":
    main()
