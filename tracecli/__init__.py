"""tracecli: gradient readiness, all-reduce bucket planning and replay from a step trace.

>>> import tracecli
>>> trace = tracecli.load_trace("sample_traces/vgg19_chainer.txt")
>>> tracecli.readiness(trace).gradients[0].name
'/predictor/fc8/W'
"""

__version__ = "0.1.0"

from .analysis import readiness, size_report  # noqa: E402
from .errors import TraceCliError  # noqa: E402
from .model import Trace  # noqa: E402
from .parsers import LoadOptions, load as load_trace  # noqa: E402

__all__ = ["__version__", "load_trace", "LoadOptions", "Trace", "TraceCliError",
           "readiness", "size_report"]
