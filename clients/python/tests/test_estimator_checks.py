"""scikit-learn's own estimator checks (``check_estimator``) against the
estimators on a live daemon, one test case per check (issue 35).

A check the estimator lists in its ``_xfail_checks`` tag is run too and must
still fail (a SKIP line names it and its reason): once it passes, the test
fails, saying to remove it from the list.  Each fit is small (the method's
quick preset), so the whole module takes a few seconds.
"""

import functools
import unittest
import warnings

import support
from support import HAVE_SKLEARN, need_daemon, need_sklearn

from gpserve_client import GPServeClassifier, GPServeRegressor

# The methods' quick presets (GET /v1/methods: "quick").
ESTIMATORS = [
    GPServeRegressor(support.URL or "http://127.0.0.1:1", options={"max_iterations": 8}),
    GPServeClassifier(support.URL or "http://127.0.0.1:1",
                      options={"max_iterations": 8, "inducing": 8}),
]


def _unwrapped(check):
    """(name, callable) of a generated check, ``partial(check, name)`` whose
    check scikit-learn may have wrapped to raise SkipTest (an expected
    failure): the callable runs the check itself."""
    outer = check.func if isinstance(check, functools.partial) else check
    inner = getattr(outer, "__wrapped__", outer)
    name = (inner.func if isinstance(inner, functools.partial) else inner).__name__
    if isinstance(check, functools.partial):
        return name, functools.partial(inner, *check.args, **check.keywords)
    return name, inner


def _run_check(test, estimator, check):
    """Run one generated check; an expected failure runs unwrapped and must
    fail."""
    name, run = _unwrapped(check)
    more_tags = getattr(estimator, "_more_tags", dict)
    reason = more_tags().get("_xfail_checks", {}).get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if reason is None:
            check(estimator)
            return
        try:
            run(estimator)
        except Exception as exc:  # the expected failure
            test.skipTest("expected failure (%s): %s: %s" % (reason, type(exc).__name__,
                                                              str(exc).splitlines()[0][:160]))
        test.fail("%s passes now: remove it from %s's _xfail_checks (%s)"
                  % (name, type(estimator).__name__, reason))


def _generate():
    """One test method per (estimator, check), named after both."""
    from sklearn.utils.estimator_checks import check_estimator
    methods = {}
    for estimator in ESTIMATORS:
        seen = {}
        for est, check in check_estimator(estimator, generate_only=True):
            name = _unwrapped(check)[0]
            seen[name] = seen.get(name, 0) + 1
            suffix = "" if seen[name] == 1 else "_%d" % seen[name]
            test_name = "test_%s_%s%s" % (type(estimator).__name__, name, suffix)

            def method(self, est=est, check=check):
                _run_check(self, est, check)
            method.__name__ = test_name
            methods[test_name] = method
    return methods


@need_daemon
@need_sklearn
class EstimatorChecksTest(unittest.TestCase):
    """Placeholder case, so the module reports one SKIP when scikit-learn
    or the daemon is missing; the checks are the generated methods."""

    def test_checks_are_generated(self):
        names = [n for n in dir(self) if n.startswith("test_GPServe")]
        self.assertTrue(any(n.startswith("test_GPServeRegressor_") for n in names))
        self.assertTrue(any(n.startswith("test_GPServeClassifier_") for n in names))


if HAVE_SKLEARN:
    for _name, _method in _generate().items():
        setattr(EstimatorChecksTest, _name, _method)
