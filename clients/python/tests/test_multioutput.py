"""Several outputs of a coregionalised model through the client and the
estimator (docs/design/multioutput.md): NaN in a 2-D y is a missing value
(JSON null), predict answers (n_points, n_outputs) arrays, the names come
back, and the cross covariance is the API's."""

import math
import unittest

import support
from support import need_daemon, need_numpy, raw_ok, unique

from gpserve_client import Client, GPServeRegressor, errors
from gpserve_client.client import missing_to_null

np = support.np
NAN = float("nan")
X = [[0.0], [0.5], [1.0], [1.5], [2.0], [2.5], [3.0], [3.5]]
Y = [[0.1, 1.0], [0.5, NAN], [0.8, 1.9], [NAN, 2.4], [0.9, 2.0], [0.6, 1.2], [0.1, NAN],
     [-0.3, -0.5]]
XT = [[0.2], [1.7], [3.9]]
ICM = {"type": "icm", "rank": 1}


class MissingToNullTest(unittest.TestCase):
    def test_nan_becomes_none(self):
        self.assertEqual(missing_to_null([[1.0, NAN], [NAN, 2]]), [[1.0, None], [None, 2]])
        self.assertEqual(missing_to_null([1.0, NAN]), [1.0, None])


@need_daemon
class ClientMultiOutputTest(unittest.TestCase):
    def test_fit_with_nan_sends_null(self):
        client = Client(support.URL)
        name = unique("mo-client")
        model = client.fit(name, X, Y, method="exact", options={"coregionalization": ICM},
                           outputs=["Cd", "Ni"], seed=1)
        self.assertEqual(model["outputs"], ["Cd", "Ni"])
        self.assertEqual(model["coregionalization"]["n_observed"], 13)
        answer = client.observe(name, [[4.0]], [[NAN, 0.3]])
        self.assertEqual(answer["n"], 9)

    def test_nan_without_coregionalization_is_invalid_data(self):
        client = Client(support.URL)
        with self.assertRaises(errors.InvalidData) as cm:
            client.fit(unique("mo-bad"), X, [1, NAN, 2, 3, 4, 5, 6, 7], method="exact")
        self.assertEqual(cm.exception.field, "y[1]")

    def test_csv_targets(self):
        client = Client(support.URL)
        text = "x,Cd,Ni\n0,0.1,1.0\n0.5,,1.4\n1,0.8,\n1.5,0.9,2.4\n2,0.9,2.0\n2.5,0.6,1.2\n"
        model = client.fit_csv(unique("mo-csv"), text, targets=["Cd", "Ni"], method="exact",
                               options={"coregionalization": ICM})
        self.assertEqual(model["outputs"], ["Cd", "Ni"])


def shape(a):
    """The shape of nested lists or of a numpy array."""
    if hasattr(a, "shape"):
        return tuple(a.shape)
    out = []
    while isinstance(a, list):
        out.append(len(a))
        a = a[0]
    return tuple(out)


def plain(a):
    return a.tolist() if hasattr(a, "tolist") else a


@need_daemon
class RegressorMultiOutputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.est = GPServeRegressor(support.URL, coregionalization=ICM, output_names=["Cd", "Ni"],
                                   seed=1).fit(X, Y)

    def test_names_and_shapes(self):
        self.assertEqual(self.est.output_names_, ["Cd", "Ni"])
        mean, std = self.est.predict(XT, return_std=True)
        self.assertEqual(shape(mean), (3, 2))
        self.assertEqual(shape(std), (3, 2))
        self.assertEqual(self.est.model_["coregionalization"]["type"], "icm")

    def test_predict_equals_the_api(self):
        raw = raw_ok("POST", "/v1/models/%s/predict" % self.est.name_,
                     {"X": XT, "version": self.est.version_, "full_covariance": True})
        mean, cov = self.est.predict_cross_covariance(XT)
        mean, cov = plain(mean), plain(cov)
        self.assertEqual(mean, raw["mean"])
        self.assertEqual(cov, raw["cross_covariance"])
        self.assertEqual(shape(cov), (6, 6))
        for r in range(6):
            for c in range(6):
                self.assertTrue(math.isclose(cov[r][c], cov[c][r], rel_tol=1e-12, abs_tol=1e-15))
        for i in range(3):
            for j in range(2):
                self.assertEqual(cov[i * 2 + j][i * 2 + j], raw["variance"][i][j])

    @need_numpy
    def test_samples_shape(self):
        draws = self.est.sample_y(np.asarray(XT), n_samples=4, random_state=3)
        self.assertEqual(draws.shape, (3, 2, 4))

    def test_cross_covariance_of_a_one_output_model(self):
        est = GPServeRegressor(support.URL, seed=1).fit(X, [float(i) for i in range(8)])
        with self.assertRaises(ValueError):
            est.predict_cross_covariance(XT)


if __name__ == "__main__":
    unittest.main()
