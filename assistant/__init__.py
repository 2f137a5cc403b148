"""torchhelp: a grounded debugging assistant for PyTorch failures.

    >>> from assistant import diagnose
    >>> diagnose(traceback_text).to_dict()

In-process doors: ``assistant.install()`` (excepthook), ``with assistant.watch(): ...`` and, in
IPython/Jupyter, ``%load_ext assistant``.
"""

from assistant.errors import TorchhelpError
from assistant.hooks import install, load_ipython_extension, uninstall, unload_ipython_extension, watch
from assistant.pipeline import diagnose
from assistant.types import Diagnosis

__version__ = "0.1.0"
__all__ = [
    "Diagnosis", "TorchhelpError", "__version__", "diagnose", "install", "load_ipython_extension",
    "uninstall", "unload_ipython_extension", "watch",
]
