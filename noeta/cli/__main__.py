"""``python -m noeta.cli``: the same as the ``noeta`` command."""

from noeta.cli import main

main()
