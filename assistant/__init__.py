"""torchhelp: a grounded debugging assistant for PyTorch failures.

    >>> from assistant import diagnose
    >>> diagnose(traceback_text).to_dict()
"""

from assistant.errors import TorchhelpError
from assistant.pipeline import diagnose
from assistant.types import Diagnosis

__version__ = "0.1.0"
__all__ = ["Diagnosis", "TorchhelpError", "__version__", "diagnose"]
