"""``python -m customops.deploy MODEL_OR_FILE``: the same as ``python -m customops.deploy.check``."""

import sys

from .cli import main

sys.exit(main())
