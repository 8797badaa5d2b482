"""scikit-learn-style estimators that fit on a gpserve daemon and predict
from it.

They follow scikit-learn's conventions without needing it: the constructor
only stores its parameters, ``get_params``/``set_params`` (so
``sklearn.base.clone``, pipelines and grid searches work), fitted attributes
end with an underscore, ``fit`` returns self.  With numpy installed the
results are numpy arrays, otherwise lists.

Each ``fit`` stores a model on the daemon, under ``name`` or a fresh
``sklearn-<hex>`` name; a fit under an existing name adds a version.  The
estimator remembers the version it fitted (``version_``) and always predicts
from that one.  ``delete_model()`` removes the model from the daemon.
"""

import inspect
import math
import random
import uuid
import warnings

from .client import DEFAULT_URL, Client, column_names, to_plain
from .validation import DataConversionWarning, check_labels, check_regression_y, check_X

try:
    import numpy as _np
except ImportError:  # the estimators work on lists without numpy
    _np = None

__all__ = ["GPServeRegressor", "GPServeClassifier", "NotFittedError", "ConvergenceWarning",
           "DataConversionWarning"]


def _rows(X, estimator=None):
    """X as a list of rows (2-D, as scikit-learn requires), checked as
    scikit-learn's check_array checks it (validation.py); rows may also be
    the distributional-input objects of rfgp.  With a fitted ``estimator``,
    the number of features must be the one it was fitted on."""
    n_features = getattr(estimator, "n_features_in_", None) if estimator is not None else None
    return check_X(X, n_features=n_features, estimator=estimator)


class _Table:
    """Checked rows with their column names: what ``column_names`` and
    ``to_plain`` read of a DataFrame, without pandas."""

    def __init__(self, columns, rows):
        self.columns = columns
        self._rows = rows

    def tolist(self):
        return self._rows


def _array(values):
    return _np.asarray(values, dtype=float) if _np is not None else values


def _seed_from(random_state):
    """An API seed (an integer in [0, 2^53]) from scikit-learn's random_state:
    None (a fresh seed each call), an int, or a numpy RandomState/Generator."""
    if random_state is None:
        return random.SystemRandom().randrange(2 ** 53)
    if isinstance(random_state, bool):
        raise ValueError("random_state must be None, an int or a numpy random generator")
    if isinstance(random_state, int) or (_np is not None and isinstance(random_state, _np.integer)):
        seed = int(random_state)
        if not 0 <= seed <= 2 ** 53:
            raise ValueError("random_state must be in [0, 2**53], not %d" % seed)
        return seed
    if hasattr(random_state, "integers"):            # numpy Generator
        return int(random_state.integers(0, 2 ** 53))
    if hasattr(random_state, "randint"):             # numpy RandomState, random.Random
        return int(random_state.randint(0, 2 ** 31 - 1)) * (2 ** 22) + \
            int(random_state.randint(0, 2 ** 22))
    raise ValueError("random_state must be None, an int or a numpy random generator")


def _r2(y_true, y_pred, sample_weight=None):
    """scikit-learn's r2_score for one output (1 for a perfect fit of
    constant targets, 0 for an imperfect one)."""
    w = [1.0] * len(y_true) if sample_weight is None else [float(v) for v in to_plain(sample_weight)]
    total = sum(w)
    mean = sum(wi * yi for wi, yi in zip(w, y_true)) / total
    ss_res = sum(wi * (yi - pi) ** 2 for wi, yi, pi in zip(w, y_true, y_pred))
    ss_tot = sum(wi * (yi - mean) ** 2 for wi, yi in zip(w, y_true))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


class _GPServeEstimator:
    """What both estimators share: parameters, the client, the fit on the
    daemon and the fitted attributes."""

    _likelihood = None

    # ---------------------------------------------------------- parameters

    @classmethod
    def _get_param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD)

    def get_params(self, deep=True):
        """The constructor's parameters, as scikit-learn's BaseEstimator."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set constructor parameters; returns self."""
        valid = self._get_param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError("invalid parameter %r for %s; valid ones: %s"
                                 % (key, type(self).__name__, ", ".join(valid)))
            setattr(self, key, value)
        return self

    def __repr__(self):
        params = [p for p in inspect.signature(type(self).__init__).parameters.values()
                  if p.name != "self"]
        changed = ["%s=%r" % (p.name, getattr(self, p.name)) for p in params
                   if p.name != "api_key" and _differs(getattr(self, p.name), p.default)]
        if self.api_key is not None:
            changed.append("api_key='***'")
        return "%s(%s)" % (type(self).__name__, ", ".join(changed))

    def __sklearn_tags__(self):
        # scikit-learn >= 1.6 asks for the tags (older versions read _estimator_type).
        from sklearn import utils
        kind = {"regressor_tags": utils.RegressorTags()} if self._estimator_type == "regressor" \
            else {"classifier_tags": utils.ClassifierTags()}
        return utils.Tags(estimator_type=self._estimator_type,
                          target_tags=utils.TargetTags(required=True), **kind)

    # ---------------------------------------------------------- daemon

    def _client(self):
        """A client of the current url, key, timeout and CA file (an https
        daemon's certificate authority), kept between calls (so its
        kept-alive connections are too); never pickled or cloned."""
        key = (self.url, self.api_key, self.timeout, self.cafile)
        cached = self.__dict__.get("_client_cache")
        if cached is None or cached[0] != key:
            cached = (key, Client(self.url, api_key=self.api_key, timeout=self.timeout,
                                  cafile=self.cafile))
            self.__dict__["_client_cache"] = cached
        return cached[1]

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_client_cache", None)
        return state

    def _check_fitted(self):
        if not hasattr(self, "version_"):
            raise _not_fitted_error(self)

    def _fit_on_daemon(self, X, y, likelihood=None, names=None):
        """Fit X, y on the daemon (sync or async) and set the fitted
        attributes from the model it answers (``likelihood``: the
        estimator's own when None)."""
        client = self._client()
        name = self.name if self.name is not None else "sklearn-" + uuid.uuid4().hex[:16]
        body = dict(method=self.method, kernel=self.kernel,
                    likelihood=likelihood if likelihood is not None else self._likelihood,
                    options=self._fit_options(), standardize=self.standardize, seed=self.seed)
        body.update(self._extra_fit_fields())
        if names is not None:  # a DataFrame's columns: the model's signature
            body["feature_names"] = names
        if self.async_fit:
            self.job_id_ = client.fit_async(name, X, y, **body)
            model = client.wait_job(self.job_id_, poll_interval=self.poll_interval,
                                    timeout=self.fit_timeout)
        else:
            timeout = self.timeout if self.fit_timeout is None else self.fit_timeout
            model = client.fit(name, X, y, timeout=timeout, **body)
        self.model_ = model
        self.name_ = model["name"]
        self.version_ = model["version"]
        self.kernel_ = model.get("kernel")
        self.n_features_in_ = model.get("input_dim")
        self.__dict__.pop("feature_names_in_", None)  # a refit without names has none
        if names is not None and model.get("feature_names") is not None:
            # as scikit-learn sets it: the DataFrame's columns, as the model keeps them
            kept = list(model["feature_names"])
            self.feature_names_in_ = _np.asarray(kept, dtype=object) if _np is not None else kept
        self.warnings_ = model.get("warnings", [])
        # the daemon's held-out report (docs/design/api.md, "Validation"), None without one
        self.validation_ = model.get("validation")
        if model.get("outputs") is not None:  # several outputs: their names
            self.output_names_ = list(model["outputs"])
        for w in self.warnings_:  # as scikit-learn's ConvergenceWarning at a bound
            warnings.warn(w.get("message", w.get("code", "")), ConvergenceWarning, stacklevel=3)
        return self

    def _extra_fit_fields(self):
        return {}

    def _fit_options(self):
        """options, with the regressor's coregionalization in it."""
        coreg = getattr(self, "coregionalization", None)
        if coreg is None:
            return self.options
        return dict(self.options or {}, coregionalization=coreg)

    def _points(self, X):
        """X checked, as rows; a DataFrame given to a model fitted with
        names stays a table (the client sends it by name, as scikit-learn
        matches feature_names_in_)."""
        rows = _rows(X, self)
        names = column_names(X)
        if names is None or getattr(self, "feature_names_in_", None) is None:
            return rows
        return _Table(names, rows)

    def _predict_raw(self, X, **fields):
        self._check_fitted()
        return self._client().predict(self.name_, self._points(X), version=self.version_,
                                      **fields)

    def delete_model(self):
        """Delete the fitted model (every version of ``name_``) from the
        daemon; the estimator is then no longer fitted."""
        self._check_fitted()
        self._client().delete_model(self.name_)
        for attr in ("model_", "name_", "version_", "kernel_", "n_features_in_", "job_id_",
                     "warnings_", "output_names_", "feature_names_in_"):
            self.__dict__.pop(attr, None)


class ConvergenceWarning(UserWarning):
    """A fitted hyperparameter ended on a bound (or the noise on its floor),
    as scikit-learn's ``sklearn.exceptions.ConvergenceWarning`` says it; the
    model's ``warnings`` list (``warnings_``) has each with its code."""


class GPServeRegressor(_GPServeEstimator):
    """Gaussian-process regression on a gpserve daemon, shaped like
    scikit-learn's GaussianProcessRegressor.

    Parameters
    ----------
    url, api_key, timeout : the daemon, its key (``Authorization: Bearer``)
        and the socket timeout of a request in seconds.
    cafile : the PEM file of the certificate authority of an ``https://``
        daemon's certificate (``--tls-cert``), when the system's do not
        cover it; None: the system's.
    name : the model name on the daemon (default: a fresh ``sklearn-<hex>``
        per fit; a fit under an existing name adds a version).
    method : ``exact`` (default), ``ssgp``, ``sgpr``, ... (``GET /v1/methods``).
    kernel : the API's kernel dict, e.g. ``{"type": "matern52", "ard": True}``;
        values are initial values, ``"fixed": True`` holds them (or a list:
        ``["variance", "lengthscale[2]", "noise"]``). What you know of them
        goes there too: ``"priors": {"lengthscale": {"type": "lognormal",
        "loc": 0, "scale": 1.7}, "noise": {...}}`` or ``"priors": "default"``
        (a MAP fit), ``"bounds": {"lengthscale": [0.05, 20], "noise": [1e-6,
        1]}`` (scikit-learn's ``*_bounds``), in working units.
    noise_variance, noise_fixed : the initial (or, fixed, the final) noise
        variance; None lets the daemon start from the data.
    alpha : known noise variances of the training rows, as scikit-learn's
        GaussianProcessRegressor ``alpha`` (an array, one per row, or a
        number for every row): sent as ``noise.per_point`` (exact, sgpr,
        svgp, ssgp, renyi take it), added to the homoscedastic noise above,
        which is learned unless fixed; ``noise_variance=0, noise_fixed=True``
        is scikit-learn's model with that alpha.  None (default): none.
    options : the method's options dict.
    coregionalization : several outputs modelled jointly (exact, sgpr, svgp;
        docs/design/multioutput.md): ``{"type": "icm", "rank": 1}`` or
        ``{"type": "lmc", "latents": 2}``, sent as
        ``options.coregionalization``.  ``y`` is then 2-D (n_samples,
        n_outputs) with NaN for a missing value; ``predict`` answers
        (n_points, n_outputs) arrays and ``predict_cross_covariance`` the
        joint covariance of every (point, output) pair.
    output_names : the outputs' names (default ``y0``, ``y1``, ...):
        ``output_names_`` after the fit.
    mean : None or "zero" (a zero mean), "constant" or "linear": the GP's
        mean function, its coefficients learned with the hyperparameters
        (exact, sgpr, svgp, msrfr: GET /v1/methods lists mean_functions); the
        model's ``mean`` (in ``model_``) has them in original units.
    standardize, seed : as in the API (working units are standardised).
    include_noise : True (default): ``predict``'s std and covariance and
        ``sample_y`` are of y, the latent f plus the noise, as in
        scikit-learn with the noise as a WhiteKernel term; False: of the
        latent f, as scikit-learn with the noise given as ``alpha``.
    async_fit : fit through an async job polled every ``poll_interval`` s.
    fit_timeout : seconds a fit may take (None: ``timeout`` for a synchronous
        fit, no limit for an async one).

    Fitted attributes: ``name_``, ``version_``, ``model_`` (the model JSON),
    ``kernel_`` (the fitted kernel dict, working units), ``warnings_`` (the
    bounds the fit ended on; each also raised as a ``ConvergenceWarning``),
    ``noise_variance_``
    (original units), ``n_features_in_``, ``log_marginal_likelihood_value_``
    (for methods whose objective is the log marginal likelihood), ``job_id_``
    (async fits).
    """

    _estimator_type = "regressor"
    _likelihood = None

    def __init__(self, url=DEFAULT_URL, api_key=None, name=None, method="exact", kernel=None,
                 noise_variance=None, noise_fixed=False, options=None, standardize=True,
                 seed=0, include_noise=True, async_fit=False, timeout=60.0, fit_timeout=None,
                 poll_interval=0.2, alpha=None, mean=None, coregionalization=None,
                 output_names=None, cafile=None):
        self.url = url
        self.api_key = api_key
        self.cafile = cafile
        self.name = name
        self.method = method
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_fixed = noise_fixed
        self.options = options
        self.standardize = standardize
        self.seed = seed
        self.include_noise = include_noise
        self.async_fit = async_fit
        self.timeout = timeout
        self.fit_timeout = fit_timeout
        self.poll_interval = poll_interval
        self.alpha = alpha
        self.mean = mean
        self.coregionalization = coregionalization
        self.output_names = output_names

    def _extra_fit_fields(self):
        noise = {}
        if self.noise_variance is not None:
            noise["variance"] = self.noise_variance
        if self.noise_fixed:
            noise["fixed"] = True
        if self._per_point is not None:
            noise["per_point"] = self._per_point
        # mean: None (the daemon's zero mean), "zero", "constant" or "linear"
        mean = {"type": self.mean} if self.mean is not None else None
        names = list(self.output_names) if self.output_names is not None else None
        return {"noise": noise or None, "mean": mean, "outputs": names}

    def fit(self, X, y):
        """Fit on the daemon; returns self."""
        rows = _rows(X)
        self._per_point = _per_point(self.alpha, len(rows))
        try:
            targets = check_regression_y(y, len(rows), self.coregionalization is not None)
            self._fit_on_daemon(rows, targets, names=column_names(X))
        finally:
            del self._per_point
        self.noise_variance_ = self.model_.get("noise_variance_original")
        diag = self.model_.get("diagnostics") or {}
        if diag.get("objective_name") == "log_marginal_likelihood":
            self.log_marginal_likelihood_value_ = diag.get("objective")
        return self

    def predict(self, X, return_std=False, return_cov=False, noise=None):
        """The predictive mean, and with ``return_std`` its standard
        deviation or with ``return_cov`` the covariance of the points, as
        GaussianProcessRegressor.predict (of y or f: see include_noise).
        ``noise``: the points' known noise variances (one per point), added
        with include_noise; a model fitted with ``alpha`` needs them for the
        variance of y (without, the daemon answers the latent variance)."""
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        answer = self._predict_raw(X, include_noise=self.include_noise,
                                   full_covariance=True if return_cov else None,
                                   noise=None if noise is None else
                                   [float(v) for v in to_plain(noise)])
        mean = _array(answer["mean"])
        if return_std:
            var = answer["variance"]
            std = _np.sqrt(_array(var)) if _np is not None else _sqrt_nested(var)
            return mean, std
        if return_cov:
            return mean, _array(answer["covariance"])
        return mean

    def predict_cross_covariance(self, X):
        """A coregionalised model's mean (n_points, n_outputs) and the joint
        covariance of every (point, output) pair, (n_points * n_outputs)
        square, row and column ``i * n_outputs + j`` point i's output j (of
        y or f: see include_noise)."""
        answer = self._predict_raw(X, include_noise=self.include_noise, full_covariance=True)
        if "cross_covariance" not in answer:
            raise ValueError("model %r is not coregionalised: it has no cross-output "
                             "covariance (fit with coregionalization=...)" % self.name_)
        return _array(answer["mean"]), _array(answer["cross_covariance"])

    def predict_quantiles(self, X, quantiles=(0.05, 0.95)):
        """Predictive quantiles: an array (n_points, len(quantiles)) in the
        order of ``quantiles`` (for mixture methods, the mixture's own)."""
        levels = [float(q) for q in to_plain(quantiles)]
        answer = self._predict_raw(X, include_noise=self.include_noise, quantiles=levels)
        by_level = answer["quantiles"]
        keys = list(by_level.keys())
        # The daemon keys each level by its shortest decimal text ("0.05").
        columns = [by_level[_level_key(q, keys)] for q in levels]
        rows = [list(r) for r in zip(*columns)]
        return _array(rows)

    def sample_y(self, X, n_samples=1, random_state=None):
        """Joint draws over the points, shape (n_points, n_samples) as
        scikit-learn's (``(n_points, n_outputs, n_samples)`` for several
        outputs).  The same integer random_state gives the same draws; None
        draws a fresh seed."""
        self._check_fitted()
        answer = self._client().sample(self.name_, self._points(X), version=self.version_,
                                       n_samples=int(n_samples), seed=_seed_from(random_state),
                                       include_noise=self.include_noise or None)
        draws = answer["samples"]
        if _np is not None:
            return _np.moveaxis(_np.asarray(draws, dtype=float), 0, -1)
        return [list(col) for col in zip(*draws)]

    def score(self, X, y, sample_weight=None):
        """R² of the predictive mean, as scikit-learn's RegressorMixin."""
        y_true = [float(v) for v in to_plain(y)]
        y_pred = [float(v) for v in to_plain(self.predict(X))]
        return _r2(y_true, y_pred, sample_weight)


class GPServeClassifier(_GPServeEstimator):
    """Gaussian-process classification on a gpserve daemon, shaped like
    scikit-learn's GaussianProcessClassifier.  Two classes fit with
    ``"likelihood": "bernoulli"`` (p(y = 1) = logistic(f), integrated over
    the latent posterior by the daemon); three or more with ``"softmax"``
    (one latent GP per class, ``svgp`` only; ``predict_proba`` is the
    daemon's ``probabilities``, integrated over the latent posterior).

    ``y`` takes any labels (strings, integers): ``classes_`` is them sorted
    and the daemon sees their indices 0..C-1; for two, the second is the
    positive class.  Parameters as GPServeRegressor's, without the noise;
    ``method`` is ``svgp`` (default) or, for two classes, ``pls``.  Fitted attributes:
    ``classes_``, ``name_``, ``version_``, ``model_``, ``kernel_``,
    ``n_features_in_``.
    """

    _estimator_type = "classifier"
    _likelihood = "bernoulli"

    # scikit-learn's estimator checks a remote estimator cannot honour, each
    # with its reason (scikit-learn's _xfail_checks tag; the client's tests run
    # them and expect them to fail).  None: every check passes.
    _XFAIL_CHECKS = {}

    def _more_tags(self):
        return {"_xfail_checks": dict(self._XFAIL_CHECKS)}

    def __init__(self, url=DEFAULT_URL, api_key=None, name=None, method="svgp", kernel=None,
                 options=None, standardize=True, seed=0, async_fit=False, timeout=60.0,
                 fit_timeout=None, poll_interval=0.2, cafile=None):
        self.url = url
        self.api_key = api_key
        self.cafile = cafile
        self.name = name
        self.method = method
        self.kernel = kernel
        self.options = options
        self.standardize = standardize
        self.seed = seed
        self.async_fit = async_fit
        self.timeout = timeout
        self.fit_timeout = fit_timeout
        self.poll_interval = poll_interval

    def fit(self, X, y):
        """Fit on the daemon; returns self."""
        rows = _rows(X)
        labels = check_labels(y, len(rows))
        classes = sorted(set(labels))
        if len(classes) < 2:
            raise ValueError("This solver needs samples of at least 2 classes in the data, but "
                             "the data contains only one class: %r" % (classes[0],))
        index = {label: i for i, label in enumerate(classes)}
        likelihood = "bernoulli" if len(classes) == 2 else "softmax"
        self._fit_on_daemon(rows, [index[v] for v in labels], likelihood=likelihood,
                            names=column_names(X))
        self.classes_ = _np.asarray(classes) if _np is not None else classes
        return self

    def _probabilities(self, X):
        """One row of len(classes_) probabilities per point: a softmax
        model's ``probabilities``, or [1 - p, p] of a bernoulli model's
        ``probability`` p of classes_[1]."""
        answer = self._predict_raw(X)
        if "probabilities" in answer:
            return [list(row) for row in answer["probabilities"]]
        return [[1.0 - p, p] for p in answer["probability"]]

    def predict_proba(self, X):
        """Class probabilities, shape (n_points, n_classes), columns in the
        order of ``classes_``."""
        return _array(self._probabilities(X))

    def predict(self, X):
        """The most probable label of each point (for two classes,
        classes_[1] when its probability is above 0.5)."""
        rows = self._probabilities(X)
        labels = [self.classes_[max(range(len(row)), key=lambda j, r=row: (r[j], -j))]
                  if len(row) > 2 else (self.classes_[1] if row[1] > 0.5 else self.classes_[0])
                  for row in rows]
        return _np.asarray(labels) if _np is not None else labels

    def score(self, X, y, sample_weight=None):
        """Mean accuracy, as scikit-learn's ClassifierMixin."""
        truth = to_plain(y)
        pred = to_plain(self.predict(X))
        w = [1.0] * len(truth) if sample_weight is None else [float(v) for v in to_plain(sample_weight)]
        return sum(wi for wi, t, p in zip(w, truth, pred) if t == p) / sum(w)


def _per_point(alpha, n):
    """alpha as the n known noise variances of noise.per_point (None: none)."""
    if alpha is None:
        return None
    values = to_plain(alpha)
    if isinstance(values, (int, float)):
        return [float(values)] * n
    return [float(v) for v in values]


def _differs(value, default):
    try:
        return bool(value != default)
    except (TypeError, ValueError):   # e.g. a numpy array, whose != is elementwise
        return True


def _sqrt_nested(values):
    if isinstance(values, list):
        return [_sqrt_nested(v) for v in values]
    return math.sqrt(values)


def _level_key(level, keys):
    for key in keys:
        if float(key) == level:
            return key
    raise KeyError("quantile level %r missing from the answer (%s)" % (level, ", ".join(keys)))


class NotFittedError(ValueError, AttributeError):
    """Raised by an estimator used before fit (scikit-learn's own
    NotFittedError when scikit-learn is installed)."""


def _not_fitted_error(estimator):
    """NotFittedError, which is also scikit-learn's when scikit-learn is
    installed (so either name catches it)."""
    message = ("This %s instance is not fitted yet. Call 'fit' with appropriate arguments "
               "before using this estimator." % type(estimator).__name__)
    try:
        from sklearn.exceptions import NotFittedError as sklearn_not_fitted
    except ImportError:
        return NotFittedError(message)
    both = type("NotFittedError", (NotFittedError, sklearn_not_fitted),
                {"__module__": __name__})
    return both(message)
