"""The deployable worker entry: ``python worker.py [--registry pkg.mod:registry] [--task-queue Q]``.

Same as ``noeta worker``. Configuration comes from the environment (TEMPORAL_ADDRESS, NOETA_HOME,
NOETA_TASK_QUEUE, provider API keys): see README.
"""

import sys

from noeta.cli import main

if __name__ == "__main__":  # the workflow sandbox re-imports modules: never run on import
    main(["worker", *sys.argv[1:]])
