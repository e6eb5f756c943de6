"""``python -m transformer.train ...``: train a model from the command line."""

import sys

from .loop import main

sys.exit(main())
