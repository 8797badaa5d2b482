"""Python client of gpserve, the Gaussian-process daemon.

``Client`` covers the v1 HTTP API route by route; ``GPServeRegressor`` and
``GPServeClassifier`` are scikit-learn-style estimators that fit on the daemon
and predict from it; ``Study`` and ``Trial`` run a suggest/complete loop
(Bayesian optimisation as a service).  Errors are the typed exceptions of ``gpserve_client.errors``
(each carries the catalogue's ``code``, ``message``, ``field`` and HTTP ``status``).
Standard library only; numpy arrays are accepted and, by the estimators,
returned when numpy is installed.
"""

from . import errors
from .client import DEFAULT_URL, Client
from .errors import GPServeError, JobTimeout, TransportError, TransportTimeout
from .study import Study, Trial
from .estimator import ConvergenceWarning, GPServeClassifier, GPServeRegressor, NotFittedError
from .validation import DataConversionWarning

__version__ = "0.1.0"

__all__ = ["Client", "DEFAULT_URL", "Study", "Trial", "GPServeRegressor", "GPServeClassifier", "GPServeError",
           "TransportError", "TransportTimeout", "JobTimeout", "NotFittedError", "ConvergenceWarning",
           "DataConversionWarning",
           "errors",
           "__version__"]
