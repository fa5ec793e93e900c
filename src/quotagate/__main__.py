"""``python -m quotagate``, and a ``.py`` entry point for ``spark-submit`` (which runs only
Python files it can recognise by name): the same CLI as the ``quotagate`` command."""

from quotagate.cli import main

if __name__ == "__main__":
    main()
