"""``python -m cryptoperf.cli`` runs the command line (as ``python -m cryptoperf`` does)."""

import sys

from cryptoperf.cli import main

sys.exit(main())
