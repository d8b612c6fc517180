"""``python -m cryptoperf.simulate``: the study simulation's tables (``simulate.study.main``)."""

import sys

from cryptoperf.simulate.study import main

sys.exit(main())
