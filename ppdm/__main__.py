"""``python -m ppdm`` runs the command line."""

import sys

from ppdm.cli.main import main

sys.exit(main())
