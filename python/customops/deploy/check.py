"""``python -m customops.deploy.check MODEL_OR_FILE``: the command line (customops.deploy.cli).

In Python, ``customops.deploy.check(model, args)`` is the function of
customops.deploy._parity. Importing this module explicitly rebinds the package
attribute ``check`` to the module, so the module is made callable as that
function: the call works either way.
"""

import sys
import types

from ._parity import check as _check
from .cli import main


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return _check(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
