"""``python -m workbench <command>``: the command line (:mod:`workbench.cli`)."""

import sys

from workbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
