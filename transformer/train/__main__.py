"""``python -m transformer.train ...``: train a model from the command line."""

import sys

from .cli import main

sys.exit(main())
