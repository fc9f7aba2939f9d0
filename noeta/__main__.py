"""``python -m noeta``: the same as the ``noeta`` command (for an install without its script on PATH)."""

from noeta.cli import main

main()
