"""``python -m cryptoperf`` runs the command-line interface."""

from cryptoperf.console import main

raise SystemExit(main())
