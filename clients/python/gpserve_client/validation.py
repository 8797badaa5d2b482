"""scikit-learn's input conventions (``check_array`` / ``check_X_y``) for the
estimators, without scikit-learn: what they refuse is refused here, before a
request, with scikit-learn's exception type and message (its estimator
checks match on them); what they convert is converted.  numpy is optional:
arrays and array-likes (anything with ``__array__``) are read through it
when it is installed, and lists are checked in plain Python either way.
"""

import math
import sys
import warnings

from .client import to_plain

try:
    import numpy as _np
except ImportError:
    _np = None


class DataConversionWarning(UserWarning):
    """The data was converted to what the estimator takes (a column-vector
    ``y`` raveled), as scikit-learn's ``sklearn.exceptions.DataConversionWarning``
    (the warning raised is also that class when scikit-learn is imported)."""


def _with_sklearn(ours, name):
    """``ours``, or a subclass of it and scikit-learn's class of that name
    when scikit-learn is already imported (a filter or an ``except`` naming
    scikit-learn's class needs scikit-learn imported, so this never imports
    it)."""
    if "sklearn" not in sys.modules:
        return ours
    try:
        from sklearn import exceptions
    except ImportError:
        return ours
    theirs = getattr(exceptions, name, None)
    if theirs is None or issubclass(ours, theirs):
        return ours
    cache = _with_sklearn.__dict__.setdefault("cache", {})
    if name not in cache:
        cache[name] = type(name, (ours, theirs), {"__module__": __name__, "__doc__": ours.__doc__})
    return cache[name]


def _refuse_sparse(value):
    module = type(value).__module__ or ""
    if hasattr(value, "toarray") or module.startswith("scipy.sparse"):
        raise TypeError("A sparse matrix was passed, but dense data is required. Use "
                        "X.toarray() to convert to a dense numpy array (the daemon takes "
                        "dense data only).")


def _as_plain(value, name):
    """value as nested lists of plain Python values: sparse refused, numpy
    arrays and array-likes (pandas, objects with ``__array__``) read through
    numpy, complex refused, object arrays of numbers made float."""
    _refuse_sparse(value)
    if _np is not None and not isinstance(value, (list, tuple, dict, str)) \
            and (hasattr(value, "__array__") or hasattr(value, "to_numpy")):
        value = _np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value)
        if value.dtype.kind == "c":
            raise ValueError("Complex data not supported\n%s\n" % value)
        if value.dtype.kind == "O" and name == "X":
            value = value.astype(float)      # TypeError, as numpy's, for a non-number
        return value.tolist()
    return to_plain(value)


def _number(value, name):
    if isinstance(value, complex):
        raise ValueError("Complex data not supported (%s holds %r)" % (name, value))
    if isinstance(value, float):
        return value
    return float(value)   # TypeError "float() argument must be a string or a real number"


def _check_finite(value, name):
    if math.isnan(value):
        raise ValueError("Input %s contains NaN." % name)
    if math.isinf(value):
        raise ValueError("Input %s contains infinity or a value too large for "
                         "dtype('float64')." % name)


def check_X(X, n_features=None, estimator=None):
    """X as a list of rows of floats, refused as scikit-learn's check_array
    refuses it; rows that are dicts (rfgp's distributional inputs) pass as
    they are, for the daemon to check.  ``n_features``: the number the
    estimator was fitted on (predict refuses another)."""
    rows = _as_plain(X, "X")
    if not isinstance(rows, (list, tuple)):
        raise ValueError("Expected 2D array, got scalar array instead:\narray=%r.\nReshape your "
                         "data either using array.reshape(-1, 1) if your data has a single "
                         "feature or array.reshape(1, -1) if it contains a single sample." % (rows,))
    rows = list(rows)
    if not rows:
        raise ValueError("Found array with 0 sample(s) (shape=(0, %s)) while a minimum of 1 "
                         "is required." % (n_features if n_features is not None else "?"))
    if any(isinstance(row, dict) for row in rows):
        return rows
    if not all(isinstance(row, (list, tuple)) for row in rows):
        raise ValueError("Expected 2D array, got 1D array instead:\narray=%r.\nReshape your "
                         "data either using array.reshape(-1, 1) if your data has a single "
                         "feature or array.reshape(1, -1) if it contains a single sample."
                         % (rows[:10],))
    width = len(rows[0])
    ragged = any(len(row) != width for row in rows)   # the daemon names the row
    if width == 0 and not ragged:
        raise ValueError("Found array with 0 feature(s) (shape=(%d, 0)) while a minimum of 1 "
                         "is required." % len(rows))
    out = []
    for row in rows:
        if any(isinstance(v, (list, tuple, dict)) for v in row):
            raise ValueError("Found array with dim 3. Estimator expected <= 2.")
        out.append([_number(v, "X") for v in row])
    for row in out:
        for v in row:
            _check_finite(v, "X")
    if n_features is not None and width != n_features and not ragged:
        raise ValueError("X has %d features, but %s is expecting %d features as input."
                         % (width, type(estimator).__name__, n_features))
    return out


def _column_to_1d(values):
    """A 2-D y of one column raveled, with scikit-learn's warning."""
    if values and all(isinstance(v, (list, tuple)) for v in values) \
            and all(len(v) == 1 for v in values):
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please "
                      "change the shape of y to (n_samples, ), for example using ravel().",
                      _with_sklearn(DataConversionWarning, "DataConversionWarning"),
                      stacklevel=4)
        return [v[0] for v in values]
    return values


def _check_length(values, n):
    if not isinstance(values, (list, tuple)):
        raise ValueError("y must be an array-like of %d targets (one per row of X), not %r"
                         % (n, type(values).__name__))
    if len(values) != n:
        raise ValueError("Found input variables with inconsistent numbers of samples: [%d, %d]"
                         % (n, len(values)))


def check_regression_y(y, n, several_outputs):
    """y of a regression as a list of floats (or, with ``several_outputs``,
    rows of floats with None for a missing NaN); a column vector is raveled
    unless several outputs are modelled."""
    values = _as_plain(y, "y")
    if not several_outputs and isinstance(values, (list, tuple)):
        values = _column_to_1d(list(values))
    _check_length(values, n)
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            row = []
            for item in v:
                item = None if item is None else _number(item, "y")
                if item is not None and math.isnan(item) and several_outputs:
                    item = None         # a missing output (docs/design/multioutput.md)
                if item is not None:
                    _check_finite(item, "y")
                row.append(item)
            out.append(row)
        else:
            item = _number(v, "y")
            _check_finite(item, "y")
            out.append(item)
    return out


def check_labels(y, n):
    """y of a classification as a list of hashable labels; continuous
    (non-integral float) targets refused as scikit-learn refuses them."""
    values = _as_plain(y, "y")
    if isinstance(values, (list, tuple)):
        values = _column_to_1d(list(values))
    _check_length(values, n)
    labels = []
    for v in values:
        if isinstance(v, complex):
            raise ValueError("Complex data not supported (y holds %r)" % (v,))
        if isinstance(v, (list, tuple, dict)):
            raise ValueError("Unknown label type: multilabel or multioutput y (%r)" % (v,))
        if isinstance(v, float):
            _check_finite(v, "y")
            if not v.is_integer():
                raise ValueError("Unknown label type: continuous (y holds %r); a classifier "
                                 "takes class labels" % v)
        labels.append(v)
    return labels
