"""``python -m cryptoperf`` runs the command-line interface."""

from cryptoperf.cli import main

raise SystemExit(main())
