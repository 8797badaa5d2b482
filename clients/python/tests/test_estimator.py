"""The scikit-learn-style estimators against a live daemon: their answers
equal the API's bit for bit, the exact GP with fixed hyperparameters equals
scikit-learn's GaussianProcessRegressor, and scikit-learn's conventions hold."""

import json
import os
import pickle
import subprocess
import sys
import textwrap
import unittest

import support
from support import need_auth, need_daemon, need_numpy, need_sklearn, raw_ok, unique

from gpserve_client import GPServeClassifier, GPServeRegressor, NotFittedError, errors

np = support.np

# Fixed hyperparameters in raw units (standardize off): the fit only factorises.
LENGTHSCALE = [0.9, 1.4]
VARIANCE = 1.7
NOISE = 0.02


def fixed_regressor(kernel_type="rbf", **params):
    kernel = {"type": kernel_type, "ard": True, "lengthscale": LENGTHSCALE,
              "variance": VARIANCE, "fixed": True}
    return GPServeRegressor(support.URL, kernel=kernel, noise_variance=NOISE, noise_fixed=True,
                            standardize=False, **params)


@need_daemon
@need_numpy
class RegressorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        X, y = support.plane(40)
        cls.X, cls.y = np.asarray(X), np.asarray(y)
        cls.Xt = np.asarray([[0.1, -0.3], [1.2, 0.4], [-1.5, 1.9], [0.0, 0.0], [3.0, -3.0]])
        cls.est = GPServeRegressor(support.URL, kernel={"type": "matern52"}, seed=2).fit(cls.X, cls.y)

    def raw_predict(self, **opts):
        body = dict(X=self.Xt.tolist(), version=self.est.version_, **opts)
        return raw_ok("POST", "/v1/models/%s/predict" % self.est.name_, body)

    def test_fit_sets_fitted_attributes(self):
        est = self.est
        self.assertTrue(est.name_.startswith("sklearn-"))
        self.assertEqual(est.version_, 1)
        self.assertEqual(est.n_features_in_, 2)
        stored = raw_ok("GET", "/v1/models/%s/versions/1" % est.name_)
        stored.pop("online", None)        # GET adds the online status of exact models
        self.assertEqual(stored.pop("aliases"), {})  # and the model's aliases (none here)
        self.assertEqual(est.model_, stored)
        self.assertEqual(est.kernel_, est.model_["kernel"])
        self.assertEqual(est.validation_, est.model_.get("validation"))
        self.assertEqual(est.noise_variance_, est.model_["noise_variance_original"])
        self.assertEqual(est.log_marginal_likelihood_value_, est.model_["diagnostics"]["objective"])
        self.assertIsNone(est.name)            # the constructor's parameter is untouched

    def test_bound_warning(self):
        # a lengthscale bounded far above the data's: the fit ends on the bound and says so
        import warnings as w
        from gpserve_client import ConvergenceWarning
        kernel = {"type": "rbf", "lengthscale": 30, "bounds": {"lengthscale": [20, 50]},
                  "priors": {"variance": {"type": "gamma", "shape": 2, "rate": 0.15}}}
        with w.catch_warnings(record=True) as caught:
            w.simplefilter("always")
            est = GPServeRegressor(support.URL, kernel=kernel, seed=2).fit(self.X, self.y)
        self.assertTrue(est.warnings_)
        self.assertTrue(all(x["code"] == "at_bound" for x in est.warnings_))
        self.assertTrue(any(issubclass(c.category, ConvergenceWarning) for c in caught))
        self.assertTrue(all(l >= 20 for l in est.kernel_["lengthscale"]))
        self.assertIn("log_prior", est.model_["diagnostics"])
        self.assertEqual(self.est.warnings_, [])
        est.delete_model()

    def test_predict_equals_raw_answer(self):
        mean = self.est.predict(self.Xt)
        answer = self.raw_predict(include_noise=True)
        self.assertIsInstance(mean, np.ndarray)
        self.assertEqual(mean.shape, (5,))
        self.assertEqual(mean.tolist(), answer["mean"])
        mean2, std = self.est.predict(self.Xt, return_std=True)
        self.assertEqual(mean2.tolist(), answer["mean"])
        self.assertEqual(std.tolist(), np.sqrt(np.asarray(answer["variance"])).tolist())
        mean3, cov = self.est.predict(self.Xt, return_cov=True)
        answer = self.raw_predict(include_noise=True, full_covariance=True)
        self.assertEqual(cov.shape, (5, 5))
        self.assertEqual(cov.tolist(), answer["covariance"])
        self.assertEqual(mean3.tolist(), answer["mean"])
        latent = GPServeRegressor(support.URL, include_noise=False)
        latent.__dict__.update({k: v for k, v in vars(self.est).items() if k.endswith("_")})
        _, std_f = latent.predict(self.Xt, return_std=True)
        answer = self.raw_predict(include_noise=False)
        self.assertEqual(std_f.tolist(), np.sqrt(np.asarray(answer["variance"])).tolist())
        self.assertTrue(np.all(std_f < std))
        with self.assertRaises(RuntimeError):
            self.est.predict(self.Xt, return_std=True, return_cov=True)

    def test_predict_quantiles(self):
        q = self.est.predict_quantiles(self.Xt, [0.05, 0.5, 0.95])
        answer = self.raw_predict(include_noise=True, quantiles=[0.05, 0.5, 0.95])
        self.assertEqual(q.shape, (5, 3))
        self.assertEqual(q[:, 0].tolist(), answer["quantiles"]["0.05"])
        self.assertEqual(q[:, 2].tolist(), answer["quantiles"]["0.95"])
        self.assertTrue(np.all(q[:, 0] < q[:, 1]) and np.all(q[:, 1] < q[:, 2]))

    def test_sample_y(self):
        s1 = self.est.sample_y(self.Xt, n_samples=4, random_state=11)
        self.assertEqual(s1.shape, (5, 4))
        self.assertEqual(self.est.sample_y(self.Xt, 1, random_state=3).shape, (5, 1))
        s2 = self.est.sample_y(self.Xt, n_samples=4, random_state=11)
        self.assertEqual(s1.tolist(), s2.tolist())
        s3 = self.est.sample_y(self.Xt, n_samples=4, random_state=12)
        self.assertFalse(np.array_equal(s1, s3))
        answer = raw_ok("POST", "/v1/models/%s/sample" % self.est.name_,
                        {"X": self.Xt.tolist(), "version": 1, "n_samples": 4, "seed": 11,
                         "include_noise": True})
        self.assertEqual(s1.T.tolist(), answer["samples"])
        # numpy generators as random_state: the same state, the same draws
        a = self.est.sample_y(self.Xt, 2, random_state=np.random.RandomState(5))
        b = self.est.sample_y(self.Xt, 2, random_state=np.random.RandomState(5))
        self.assertEqual(a.tolist(), b.tolist())
        c = self.est.sample_y(self.Xt, 2, random_state=np.random.default_rng(5))
        d = self.est.sample_y(self.Xt, 2, random_state=np.random.default_rng(5))
        self.assertEqual(c.tolist(), d.tolist())
        # None: a fresh seed each call
        self.assertFalse(np.array_equal(self.est.sample_y(self.Xt, 2), self.est.sample_y(self.Xt, 2)))

    def test_sample_y_moments(self):
        mean, cov = self.est.predict(self.Xt[:3], return_cov=True)
        draws = self.est.sample_y(self.Xt[:3], n_samples=4000, random_state=1)
        sd = np.sqrt(np.diag(cov))
        self.assertTrue(np.all(np.abs(draws.mean(axis=1) - mean) < 5 * sd / np.sqrt(4000)))
        emp = np.cov(draws)
        self.assertTrue(np.allclose(emp, cov, atol=0.15 * sd.max() ** 2))

    def test_score_is_r2(self):
        r2 = self.est.score(self.Xt, np.sin(self.Xt[:, 0]) + np.sin(2 * self.Xt[:, 1]))
        pred = self.est.predict(self.Xt)
        truth = np.sin(self.Xt[:, 0]) + np.sin(2 * self.Xt[:, 1])
        want = 1 - np.sum((truth - pred) ** 2) / np.sum((truth - truth.mean()) ** 2)
        self.assertAlmostEqual(r2, want, places=12)
        self.assertGreater(self.est.score(self.X, self.y), 0.95)

    def test_named_model_versions(self):
        name = unique("py-named")
        est = GPServeRegressor(support.URL, name=name, seed=1).fit(self.X[:20], self.y[:20])
        first = est.predict(self.Xt)
        self.assertEqual((est.name_, est.version_), (name, 1))
        est2 = GPServeRegressor(support.URL, name=name, seed=1).fit(self.X, self.y)
        self.assertEqual(est2.version_, 2)
        self.assertEqual(est.predict(self.Xt).tolist(), first.tolist())   # pinned to version 1
        est.delete_model()
        self.assertFalse(hasattr(est, "version_"))
        with self.assertRaises(errors.NotFound):
            est2.predict(self.Xt)

    def test_async_fit_equals_sync_fit(self):
        a = GPServeRegressor(support.URL, seed=5, async_fit=True, poll_interval=0.05,
                             fit_timeout=120).fit(self.X, self.y)
        self.assertTrue(a.job_id_)
        self.assertEqual(raw_ok("GET", "/v1/jobs/" + a.job_id_)["status"], "succeeded")
        b = GPServeRegressor(support.URL, seed=5).fit(self.X, self.y)
        self.assertEqual(a.kernel_, b.kernel_)
        self.assertEqual(a.predict(self.Xt).tolist(), b.predict(self.Xt).tolist())

    def test_other_method(self):
        est = GPServeRegressor(support.URL, method="ssgp", kernel={"type": "rbf"}, seed=1,
                               options={"features": 30, "frequencies": "qmc"}).fit(self.X, self.y)
        self.assertEqual(est.model_["method"], "ssgp")
        self.assertGreater(est.score(self.X, self.y), 0.9)


@need_daemon
@need_numpy
@need_sklearn
class AgainstScikitLearnTest(unittest.TestCase):
    """exact with fixed hyperparameters and no standardisation against
    GaussianProcessRegressor with the same kernel: the noise as a fixed
    WhiteKernel term (include_noise=True) or as alpha (include_noise=False)."""

    @classmethod
    def setUpClass(cls):
        X, y = support.plane(60, seed=3)
        cls.X, cls.y = np.asarray(X), np.asarray(y)
        cls.Xt = np.asarray([[0.1, -0.3], [1.2, 0.4], [-1.5, 1.9], [0.0, 0.0], [2.5, -2.5],
                             [-0.7, -1.1]])

    def sklearn_gpr(self, leaf, with_white):
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel
        kernel = ConstantKernel(VARIANCE, "fixed") * leaf
        if with_white:
            kernel = kernel + WhiteKernel(NOISE, "fixed")
            alpha = 0.0
        else:
            alpha = NOISE
        return GaussianProcessRegressor(kernel, alpha=alpha, optimizer=None,
                                        normalize_y=False).fit(self.X, self.y)

    def compare(self, kernel_type, leaf):
        for include_noise in (True, False):
            ours = fixed_regressor(kernel_type, include_noise=include_noise).fit(self.X, self.y)
            self.assertEqual(ours.model_["diagnostics"]["iterations"], 0)
            ref = self.sklearn_gpr(leaf, with_white=include_noise)
            m, s = ours.predict(self.Xt, return_std=True)
            rm, rs = ref.predict(self.Xt, return_std=True)
            np.testing.assert_allclose(m, rm, rtol=0, atol=1e-8)
            np.testing.assert_allclose(s, rs, rtol=0, atol=1e-8)
            _, c = ours.predict(self.Xt, return_cov=True)
            _, rc = ref.predict(self.Xt, return_cov=True)
            np.testing.assert_allclose(c, rc, rtol=0, atol=1e-8)
            self.assertAlmostEqual(ours.log_marginal_likelihood_value_,
                                   ref.log_marginal_likelihood_value_, delta=1e-7)
            self.assertAlmostEqual(ours.score(self.Xt, np.sin(self.Xt[:, 0])),
                                   ref.score(self.Xt, np.sin(self.Xt[:, 0])), delta=1e-7)

    def test_rbf(self):
        from sklearn.gaussian_process.kernels import RBF
        self.compare("rbf", RBF(LENGTHSCALE, "fixed"))

    def test_matern52(self):
        from sklearn.gaussian_process.kernels import Matern
        self.compare("matern52", Matern(LENGTHSCALE, "fixed", nu=2.5))

    def test_alpha_array(self):
        """alpha as an array: scikit-learn's GaussianProcessRegressor with it
        (noise_variance 0, fixed), and predict's noise adds the points' own."""
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel
        alpha = 0.005 + 0.05 * (np.arange(len(self.y)) % 4)
        kernel = {"type": "rbf", "ard": True, "lengthscale": LENGTHSCALE,
                  "variance": VARIANCE, "fixed": True}
        ours = GPServeRegressor(support.URL, kernel=kernel, noise_variance=0, noise_fixed=True,
                                standardize=False, alpha=alpha).fit(self.X, self.y)
        self.assertTrue(ours.model_["per_point_noise"])
        ref = GaussianProcessRegressor(ConstantKernel(VARIANCE, "fixed") *
                                       RBF(LENGTHSCALE, "fixed"), alpha=alpha, optimizer=None,
                                       normalize_y=False).fit(self.X, self.y)
        m, s = ours.predict(self.Xt, return_std=True)
        rm, rs = ref.predict(self.Xt, return_std=True)
        np.testing.assert_allclose(m, rm, rtol=0, atol=1e-8)
        np.testing.assert_allclose(s, rs, rtol=0, atol=1e-8)
        self.assertAlmostEqual(ours.log_marginal_likelihood_value_,
                               ref.log_marginal_likelihood_value_, delta=1e-7)
        pn = np.full(len(self.Xt), 0.3)
        _, s2 = ours.predict(self.Xt, return_std=True, noise=pn)
        np.testing.assert_allclose(s2 ** 2, rs ** 2 + pn, rtol=1e-12, atol=0)
        ours.delete_model()

    def test_sample_y_moments_match_sklearn_covariance(self):
        from sklearn.gaussian_process.kernels import RBF
        ours = fixed_regressor("rbf", include_noise=False).fit(self.X, self.y)
        ref = self.sklearn_gpr(RBF(LENGTHSCALE, "fixed"), with_white=False)
        rm, rc = ref.predict(self.Xt[:3], return_cov=True)
        draws = ours.sample_y(self.Xt[:3], n_samples=5000, random_state=2)
        self.assertEqual(draws.shape, ref.sample_y(self.Xt[:3], 5000).shape)
        sd = np.sqrt(np.diag(rc))
        self.assertTrue(np.all(np.abs(draws.mean(axis=1) - rm) < 5 * sd / np.sqrt(5000)))


@need_daemon
class SklearnConventionsTest(unittest.TestCase):
    def test_get_set_params(self):
        est = GPServeRegressor(support.URL, method="sgpr", options={"inducing": 8})
        params = est.get_params()
        self.assertEqual(params["method"], "sgpr")
        self.assertEqual(params["options"], {"inducing": 8})
        self.assertIn("include_noise", params)
        self.assertIs(est.set_params(method="exact", seed=4), est)
        self.assertEqual((est.method, est.seed), ("exact", 4))
        with self.assertRaises(ValueError):
            est.set_params(no_such_param=1)
        again = GPServeRegressor(**est.get_params())
        self.assertEqual(again.get_params(), est.get_params())
        options = {"inducing": 4}
        self.assertIs(GPServeRegressor(options=options).get_params()["options"], options)

    @need_sklearn
    def test_sklearn_clone(self):
        from sklearn.base import clone, is_classifier, is_regressor
        X, y = support.plane(25)
        est = GPServeRegressor(support.URL, kernel={"type": "rbf"}, seed=7).fit(X, y)
        copy = clone(est)
        self.assertIsNot(copy, est)
        self.assertEqual(copy.get_params(), est.get_params())
        self.assertIsNot(copy.kernel, est.kernel)
        self.assertFalse(hasattr(copy, "version_"))
        copy.fit(X, y)
        self.assertNotEqual(copy.name_, est.name_)
        self.assertEqual(copy.predict(X).tolist(), est.predict(X).tolist())
        self.assertTrue(is_regressor(est))
        self.assertTrue(is_classifier(GPServeClassifier(support.URL)))
        self.assertEqual(clone(GPServeClassifier(support.URL, method="pls")).method, "pls")
        import sklearn.utils
        if hasattr(sklearn.utils, "Tags"):      # scikit-learn >= 1.6
            from sklearn.utils import get_tags
            self.assertEqual(get_tags(est).estimator_type, "regressor")
            self.assertEqual(get_tags(GPServeClassifier()).estimator_type, "classifier")

    @need_sklearn
    def test_cross_val_score_and_pipeline(self):
        from sklearn.model_selection import cross_val_score
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        X, y = support.plane(45)
        X, y = np.asarray(X), np.asarray(y)
        scores = cross_val_score(GPServeRegressor(support.URL, seed=1), X, y, cv=3)
        self.assertEqual(len(scores), 3)
        self.assertTrue(np.all(scores > 0.8), scores)
        pipe = make_pipeline(StandardScaler(), GPServeRegressor(support.URL, seed=1)).fit(X, y)
        self.assertGreater(pipe.score(X, y), 0.9)

    @need_numpy
    def test_pickle_fitted(self):
        X, y = support.plane(25)
        est = GPServeRegressor(support.URL, seed=7).fit(X, y)
        back = pickle.loads(pickle.dumps(est))
        self.assertEqual((back.name_, back.version_), (est.name_, est.version_))
        self.assertEqual(back.predict(X).tolist(), est.predict(X).tolist())

    def test_not_fitted_and_bad_shapes(self):
        est = GPServeRegressor(support.URL)
        with self.assertRaises(NotFittedError) as cm:
            est.predict([[1.0]])
        self.assertIsInstance(cm.exception, ValueError)
        self.assertIsInstance(cm.exception, AttributeError)
        if support.HAVE_SKLEARN:
            from sklearn.exceptions import NotFittedError as SklearnNotFitted
            self.assertIsInstance(cm.exception, SklearnNotFitted)
        with self.assertRaises(ValueError):
            est.fit([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])          # 1-D X
        with self.assertRaises(ValueError):
            est.fit([[1.0], [2.0]], [1.0])                     # lengths differ
        with self.assertRaisesRegex(ValueError, "one class"):
            GPServeClassifier(support.URL).fit([[0.0], [1.0], [2.0]], [1, 1, 1])

    def test_three_classes_fit_softmax(self):
        # Issue 35: three labels fit with "likelihood": "softmax" and answer
        # (3, 3) probabilities.
        X = [[0.0], [0.5], [1.0], [1.5], [2.0], [2.5]]
        y = ["b", "a", "c", "b", "a", "c"]
        est = GPServeClassifier(support.URL, options={"max_iterations": 8, "inducing": 4})
        est.fit(X, y)
        self.assertEqual(list(est.classes_), ["a", "b", "c"])
        self.assertEqual(est.model_["likelihood"], "softmax")
        self.assertEqual(len(est.predict_proba(X)), 6)
        self.assertEqual(len(est.predict_proba(X)[0]), 3)

    def test_errors_are_typed(self):
        with self.assertRaises(errors.InvalidArgument) as cm:
            GPServeRegressor(support.URL, kernel={"type": "rbf", "lengthscale": -1.0}).fit(
                support.SINE_X, support.SINE_Y)
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "kernel.lengthscale"))
        with self.assertRaises(errors.InvalidArgument) as cm:
            GPServeRegressor(support.URL, options={"nonsense": 1}).fit(support.SINE_X, support.SINE_Y)
        self.assertEqual(cm.exception.field, "options.nonsense")
        with self.assertRaises(errors.Unsupported) as cm:
            GPServeRegressor(support.URL, method="ssgp", kernel={"type": "linear"}).fit(
                support.SINE_X, support.SINE_Y)
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "unsupported"))
        est = GPServeRegressor(support.URL, seed=3).fit(support.SINE_X, support.SINE_Y)
        with self.assertRaises(errors.InvalidData) as cm:
            est.predict([[1.0], [2.0, 3.0]])
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.field),
                         (422, "invalid_data", "X[1]"))
        with self.assertRaises(errors.Unsupported) as cm:   # bernoulli takes svgp and pls
            GPServeClassifier(support.URL, method="exact").fit(*support.labels(12))
        self.assertEqual(cm.exception.code, "unsupported")

    def test_async_cancelled_fit_raises(self):
        X, y, options = support.long_fit_data()
        est = GPServeRegressor(support.URL, async_fit=True, options=options, fit_timeout=0.3,
                               poll_interval=0.05)
        with self.assertRaises(errors.JobTimeout) as cm:
            est.fit(X, y)
        job = cm.exception.job["id"]
        self.assertFalse(hasattr(est, "version_"))
        from gpserve_client import Client
        Client(support.URL).cancel_job(job)
        with self.assertRaises(errors.Cancelled):
            Client(support.URL).wait_job(job, poll_interval=0.05, timeout=120)

    def test_without_numpy_lists_in_lists_out(self):
        """In a Python where numpy cannot be imported the estimator takes and
        gives lists, equal to the API's answers."""
        name = unique("py-nonumpy")
        code = textwrap.dedent("""
            import json, sys
            sys.modules["numpy"] = None
            sys.modules["sklearn"] = None
            sys.path.insert(0, %r)
            from gpserve_client import GPServeRegressor, GPServeClassifier
            X = json.loads(sys.argv[1]); y = json.loads(sys.argv[2])
            est = GPServeRegressor(%r, name=%r, seed=3).fit(X, y)
            mean, std = est.predict([[0.1], [2.7]], return_std=True)
            s = est.sample_y([[0.1], [2.7], [3.3]], n_samples=2, random_state=4)
            try:
                GPServeRegressor(%r).predict([[1.0]])
            except ValueError as e:
                nf = type(e).__name__
            print(json.dumps({"mean": mean, "std": std, "samples": s, "nf": nf,
                              "score": est.score(X, y), "types": [type(mean).__name__,
                              type(s).__name__]}))
        """) % (support.PACKAGE_ROOT, support.URL, name, support.URL)
        out = subprocess.run([sys.executable, "-c", code, json.dumps(support.SINE_X),
                              json.dumps(support.SINE_Y)], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ))
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertEqual(got["types"], ["list", "list"])
        self.assertEqual(got["nf"], "NotFittedError")
        answer = raw_ok("POST", "/v1/models/%s/predict" % name, {"X": [[0.1], [2.7]], "version": 1})
        self.assertEqual(got["mean"], answer["mean"])
        self.assertEqual(got["std"], [v ** 0.5 for v in answer["variance"]])
        sample = raw_ok("POST", "/v1/models/%s/sample" % name,
                        {"X": [[0.1], [2.7], [3.3]], "version": 1, "n_samples": 2, "seed": 4,
                         "include_noise": True})
        self.assertEqual(got["samples"], [list(c) for c in zip(*sample["samples"])])
        self.assertGreater(got["score"], 0.99)


@need_daemon
@need_numpy
class ClassifierTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        X, y = support.labels(40)
        cls.X = np.asarray(X)
        cls.y01 = np.asarray(y)
        cls.y = np.where(cls.y01 == 1, "spam", "ham")
        cls.Xt = np.asarray([[0.25], [2.4], [2.6], [4.9], [9.0]])
        cls.est = GPServeClassifier(support.URL, seed=1).fit(cls.X, cls.y)

    def test_probabilities_equal_the_api(self):
        proba = self.est.predict_proba(self.Xt)
        self.assertEqual(proba.shape, (5, 2))
        self.assertTrue(np.all((proba >= 0) & (proba <= 1)))
        self.assertTrue(np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-15))
        answer = raw_ok("POST", "/v1/models/%s/predict" % self.est.name_,
                        {"X": self.Xt.tolist(), "version": self.est.version_})
        self.assertEqual(proba[:, 1].tolist(), answer["probability"])
        self.assertEqual(self.est.model_["likelihood"], "bernoulli")
        self.assertLess(proba[0, 1], 0.5)       # far in the 0 region
        self.assertGreater(proba[3, 1], 0.5)    # far in the 1 region

    def test_labels_and_score(self):
        self.assertEqual(self.est.classes_.tolist(), ["ham", "spam"])
        pred = self.est.predict(self.Xt)
        proba = self.est.predict_proba(self.Xt)
        self.assertEqual(pred.tolist(), ["spam" if p > 0.5 else "ham" for p in proba[:, 1]])
        acc = self.est.score(self.X, self.y)
        self.assertEqual(acc, float(np.mean(self.est.predict(self.X) == self.y)))
        self.assertGreater(acc, 0.7)

    def test_pls_and_integer_labels(self):
        est = GPServeClassifier(support.URL, method="pls", seed=1,
                                options={"particles": 20, "steps": 100}).fit(self.X, self.y01)
        self.assertEqual(est.classes_.tolist(), [0, 1])
        proba = est.predict_proba(self.Xt)
        answer = raw_ok("POST", "/v1/models/%s/predict" % est.name_,
                        {"X": self.Xt.tolist(), "version": est.version_})
        self.assertEqual(proba[:, 1].tolist(), answer["probability"])
        self.assertTrue(np.all((proba >= 0) & (proba <= 1)))

    @need_sklearn
    def test_clone_and_cross_val(self):
        from sklearn.base import clone
        from sklearn.model_selection import cross_val_score
        copy = clone(self.est).fit(self.X, self.y)
        self.assertEqual(copy.predict_proba(self.Xt).tolist(), self.est.predict_proba(self.Xt).tolist())
        scores = cross_val_score(GPServeClassifier(support.URL, seed=1), self.X, self.y, cv=2)
        self.assertEqual(len(scores), 2)


@need_daemon
@need_auth
@need_numpy
class EstimatorAuthTest(unittest.TestCase):
    def test_fit_and_predict_with_a_key(self):
        est = GPServeRegressor(support.AUTH_URL, api_key=support.API_KEY, seed=3)
        est.fit(support.SINE_X[:8], support.SINE_Y[:8])
        mean = est.predict(support.TEST_X)
        answer = raw_ok("POST", "/v1/models/%s/predict" % est.name_,
                        {"X": support.TEST_X, "version": 1}, url=support.AUTH_URL,
                        key=support.API_KEY)
        self.assertEqual(mean.tolist(), answer["mean"])
        self.assertNotIn(support.API_KEY, repr(est))
        with self.assertRaises(errors.Unauthorized):
            GPServeRegressor(support.AUTH_URL).fit(support.SINE_X[:8], support.SINE_Y[:8])
        with self.assertRaises(errors.Unauthorized):
            est.set_params(api_key="wrong-key-0123456789").predict(support.TEST_X)


if __name__ == "__main__":
    unittest.main()


def _three_classes(n=60, seed=3):
    """n points of two inputs with three labels by angle, a few flipped."""
    import random
    rng = random.Random(seed)
    X, y = [], []
    for _ in range(n):
        a, b = rng.uniform(-2, 2), rng.uniform(-2, 2)
        c = (0 if a < -0.5 else 1 if b < 0 else 2) if rng.random() > 0.1 else rng.randrange(3)
        X.append([a, b])
        y.append(c)
    return X, y


@need_daemon
@need_numpy
class MulticlassTest(unittest.TestCase):
    """Three classes (softmax): labels in any order map to classes_, the
    probabilities are the API's columns in classes_ order."""

    NAMES = ["west", "south", "north"]   # label c is NAMES[c]: classes_ sorts them

    @classmethod
    def setUpClass(cls):
        X, y = _three_classes()
        cls.X = np.asarray(X)
        cls.y = np.asarray([cls.NAMES[c] for c in y])
        cls.Xt = np.asarray([[-1.8, 0.0], [1.5, -1.5], [1.5, 1.5], [0.0, 0.0]])
        cls.est = GPServeClassifier(support.URL, seed=1,
                                    options={"max_iterations": 60, "inducing": 16}).fit(cls.X, cls.y)

    def test_model_is_softmax(self):
        self.assertEqual(self.est.classes_.tolist(), ["north", "south", "west"])
        self.assertEqual(self.est.model_["likelihood"], "softmax")
        self.assertEqual(self.est.model_["classes"], 3)

    def test_probabilities_equal_the_api_in_classes_order(self):
        proba = self.est.predict_proba(self.Xt)
        self.assertEqual(proba.shape, (4, 3))
        self.assertTrue(np.all((proba >= 0) & (proba <= 1)))
        self.assertTrue(np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12))
        answer = raw_ok("POST", "/v1/models/%s/predict" % self.est.name_,
                        {"X": self.Xt.tolist(), "version": self.est.version_})
        # the daemon's class j is classes_[j]
        self.assertEqual(proba.tolist(), answer["probabilities"])
        # far inside each region its class is the most probable
        self.assertEqual(self.est.classes_[proba[:3].argmax(axis=1)].tolist(),
                         ["west", "south", "north"])

    def test_predict_is_the_argmax_and_score_the_accuracy(self):
        proba = self.est.predict_proba(self.X)
        pred = self.est.predict(self.X)
        self.assertEqual(pred.tolist(), self.est.classes_[proba.argmax(axis=1)].tolist())
        acc = self.est.score(self.X, self.y)
        self.assertEqual(acc, float(np.mean(pred == self.y)))
        self.assertGreater(acc, 0.75)

    def test_integer_labels(self):
        X, y = _three_classes(30, seed=8)
        est = GPServeClassifier(support.URL, seed=1, options={"max_iterations": 8, "inducing": 8})
        est.fit(X, [10 * c for c in y])
        self.assertEqual(est.classes_.tolist(), [0, 10, 20])
        self.assertTrue(set(est.predict(X).tolist()) <= {0, 10, 20})


class _Frame:
    """What the client reads of a pandas DataFrame (columns, to_numpy), without pandas."""

    def __init__(self, columns, rows):
        self.columns = list(columns)
        self._rows = [list(r) for r in rows]

    def to_numpy(self):
        return np.asarray(self._rows, dtype=float) if np is not None else _RowsArray(self._rows)


class _RowsArray:
    def __init__(self, rows):
        self._rows = rows

    def tolist(self):
        return [list(r) for r in self._rows]


@need_daemon
class ColumnNamesTest(unittest.TestCase):
    """A DataFrame's column names: sent as feature_names at the fit, its
    points sent by name at predict and sample (in any column order), and
    feature_names_in_ set as scikit-learn sets it."""

    def test_dataframe_fit_and_predict_by_name(self):
        X, y = support.plane(30)
        frame = _Frame(["cement", "slag"], X)
        est = GPServeRegressor(support.URL, name=unique("cols"), seed=1).fit(frame, y)
        try:
            self.assertEqual(list(est.feature_names_in_), ["cement", "slag"])
            self.assertEqual(est.model_["feature_names"], ["cement", "slag"])
            Xt = [[0.1, -0.3], [1.2, 0.4]]
            positional = est.predict(Xt)
            swapped = _Frame(["slag", "cement"], [[r[1], r[0]] for r in Xt])
            by_name = est.predict(swapped)
            self.assertEqual(list(map(float, by_name)), list(map(float, positional)))
            raw = raw_ok("POST", "/v1/models/%s/predict" % est.name_,
                         {"rows": [{"slag": -0.3, "cement": 0.1}, {"slag": 0.4, "cement": 1.2}]})
            self.assertEqual(list(map(float, by_name)), raw["mean"])
            plain = lambda v: v.tolist() if hasattr(v, "tolist") else v
            self.assertEqual(plain(est.sample_y(swapped, random_state=3)),
                             plain(est.sample_y(Xt, random_state=3)))
        finally:
            est.delete_model()

    def test_numpy_fit_has_no_feature_names(self):
        X, y = support.plane(20)
        est = GPServeRegressor(support.URL, name=unique("nocols"), seed=1).fit(X, y)
        try:
            self.assertFalse(hasattr(est, "feature_names_in_"))
            # a table given to a model without names goes positionally
            self.assertEqual(len(est.predict(_Frame(["a", "b"], [[0.1, 0.2]]))), 1)
        finally:
            est.delete_model()
