"""``python -m workbench.releases check|describe KIND DIR``."""

import sys

from workbench.releases.known import main

sys.exit(main())
