"""Deprecated: the demo task moved to `hdet_hf.examples.data`; this name re-exports it and warns.

Kept because earlier READMEs showed ``from hdet_hf.data import ...``; ``import hdet_hf`` does not load it.
"""

import warnings

from hdet_hf.examples.data import *  # noqa: F403
from hdet_hf.examples.data import __all__  # noqa: F401

warnings.warn(
    "hdet_hf.data moved to hdet_hf.examples.data (the demo corpus is not part of the library); "
    "import it from there. The old name will be removed in a future release.",
    FutureWarning,
    stacklevel=2,
)
