"""The low-level Client against a live daemon: every route, its answers
compared with the same request made with urllib, and the typed errors."""

import json
import re
import socket
import struct
import threading
import unittest

import support
from support import need_auth, need_daemon, raw, raw_ok, unique

from gpserve_client import Client, errors


@need_daemon
class ServiceTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(support.URL)

    def test_health_ready_metrics_openapi(self):
        self.assertEqual(self.client.health(), {"status": "ok"})
        self.assertEqual(self.client.ready(), {"status": "ready"})
        self.assertIn("gpserve_http_requests_total", self.client.metrics())
        self.assertTrue(self.client.openapi().startswith("openapi: 3"))

    def test_keepalive_connection_reused_and_replaced(self):
        # One kept-alive connection per thread, reused; one the daemon closed
        # (here: this side shut down) is replaced by a new one, once.
        self.client.health()
        conn = self.client._local.conn
        self.assertIsNotNone(conn)
        self.client.health()
        self.assertIs(self.client._local.conn, conn)
        conn.sock.shutdown(socket.SHUT_RDWR)
        self.assertEqual(self.client.health(), {"status": "ok"})
        self.assertIsNot(self.client._local.conn, conn)
        # Threads have their own connections.
        seen = []
        t = threading.Thread(target=lambda: (self.client.health(), seen.append(self.client._local.conn)))
        t.start()
        t.join()
        self.assertIsNot(seen[0], self.client._local.conn)
        self.client.close()
        self.assertIsNone(self.client._local.conn)

    def test_methods_listing(self):
        methods = {m["name"]: m for m in self.client.methods()}
        self.assertEqual(methods, {m["name"]: m for m in raw_ok("GET", "/v1/methods")["methods"]})
        self.assertIn("exact", methods)
        self.assertIn("bernoulli", methods["svgp"]["likelihoods"])

    def test_every_catalogue_code_has_its_exception(self):
        text = self.client.openapi()
        match = re.search(r"Error:.*?code:.*?enum: \[([^\]]*)\]", text, re.S)
        self.assertIsNotNone(match, "no Error code enum in /openapi.yaml")
        codes = [c.strip() for c in match.group(1).split(",")]
        self.assertGreater(len(codes), 15)
        for code in codes:
            cls = errors.ERROR_CLASSES.get(code)
            self.assertIsNotNone(cls, "no exception class for the code %r" % code)
            self.assertTrue(issubclass(cls, errors.GPServeError))
            self.assertEqual(cls.code, code)


@need_daemon
class DatasetsTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(support.URL)

    def test_upload_get_list_delete(self):
        import io
        import os
        import tempfile
        name = unique("py-ds")
        X, y = support.plane(30)
        text = "x1,x2,y\n" + "".join("%r,%r,%r\n" % (a, b, t) for (a, b), t in zip(X, y))
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
        try:
            made = self.client.upload_dataset(name, f.name)  # streamed from the file
        finally:
            os.unlink(f.name)
        self.assertEqual((made["name"], made["rows"]), (name, 30))
        self.assertEqual([c["name"] for c in made["columns"]], ["x1", "x2", "y"])
        self.assertEqual(made["columns"][2]["count"], 30)
        self.assertAlmostEqual(made["columns"][2]["mean"], sum(y) / 30, places=12)
        self.assertEqual(made["bytes_received"], len(text.encode()))
        self.assertEqual(self.client.get_dataset(name), raw_ok("GET", "/v1/datasets/" + name))
        self.assertIn(name, {d["name"]: d for d in self.client.list_datasets()})
        # the same rows as JSON lines from a text file object replace it (200, a new id)
        lines = "".join(json.dumps({"x1": a, "x2": b, "y": t}) + "\n" for (a, b), t in zip(X, y))
        again = self.client.upload_dataset(name, io.StringIO(lines),
                                           content_type="application/x-ndjson")
        self.assertNotEqual(again["id"], made["id"])
        self.assertEqual(again["columns"], made["columns"])
        # a fit names it; exact reads its rows in memory, so it is refused
        with self.assertRaises(errors.Unsupported) as cm:
            self.client.fit(unique("py-ds-fit"), method="exact",
                            data=Client.dataset_ref(name, "y", sample=10, seed=1))
        self.assertEqual((cm.exception.status, cm.exception.field), (422, "data.dataset"))
        self.client.delete_dataset(name)
        with self.assertRaises(errors.NotFound):
            self.client.get_dataset(name)

    def test_bad_rows_are_refused_and_nothing_kept(self):
        name = unique("py-ds-bad")
        with self.assertRaises(errors.InvalidData) as cm:
            self.client.upload_dataset(name, b"a,b\n1,2\n3,oops\n")
        self.assertEqual((cm.exception.status, cm.exception.field), (422, "rows[1].b"))
        self.assertIn("row 2", str(cm.exception))
        with self.assertRaises(errors.NotFound):
            self.client.get_dataset(name)
        with self.assertRaises(errors.UnsupportedMediaType):
            self.client.upload_dataset(name, b"{}", content_type="application/json")


@need_daemon
class ModelsTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(support.URL)

    def test_fit_get_versions_list_delete(self):
        name = unique("py-models")
        m1 = self.client.fit(name, support.SINE_X, support.SINE_Y, kernel={"type": "rbf"}, seed=3)
        self.assertEqual((m1["name"], m1["version"], m1["method"]), (name, 1, "exact"))
        self.assertEqual((m1["n_train"], m1["input_dim"]), (21, 1))
        m2 = self.client.fit(name, support.SINE_X[:10], support.SINE_Y[:10], seed=3)
        self.assertEqual(m2["version"], 2)
        self.assertEqual(self.client.versions(name), [1, 2])
        latest = self.client.get_model(name)
        self.assertEqual(latest, raw_ok("GET", "/v1/models/" + name))
        self.assertEqual(latest["version"], 2)
        v1 = self.client.get_model(name, version=1)
        self.assertEqual((v1["version"], v1["n_train"]), (1, 21))
        listed = {m["name"]: m for m in self.client.list_models()}
        self.assertEqual(listed[name]["version"], 2)
        self.client.delete_model(name)
        with self.assertRaises(errors.NotFound) as cm:
            self.client.get_model(name)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        self.assertNotIn(name, {m["name"] for m in self.client.list_models()})

    def test_auto(self):
        name = unique("py-auto")
        m = self.client.fit(name, support.SINE_X, support.SINE_Y, method="auto", budget_s=20,
                            validation={"folds": 3})
        board = self.client.leaderboard(name)
        self.assertEqual(board, self.client.leaderboard(m))
        chosen = [c for c in board if c.get("chosen")]
        self.assertEqual(len(chosen), 1)
        self.assertEqual(chosen[0]["method"], m["method"])
        self.assertIn("exact", [c["method"] for c in board])
        self.assertEqual(m["validation"]["folds"], 3)
        self.assertIsNone(self.client.leaderboard(self.client.fit(
            unique("py-noauto"), support.SINE_X, support.SINE_Y)))
        job = self.client.fit_async(unique("py-auto-job"), support.SINE_X, support.SINE_Y,
                                    method="auto", budget_s=20)
        model = self.client.wait_job(job, timeout=120)
        self.assertTrue(self.client.get_job(job)["progress"]["leaderboard"])
        self.assertEqual(len(self.client.leaderboard(model)),
                         len(self.client.get_job(job)["progress"]["leaderboard"]))
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.client.fit(name, support.SINE_X, support.SINE_Y, method="auto", budget_s=0)
        self.assertEqual(cm.exception.field, "budget_s")

    def test_validation_report(self):
        name = unique("py-valid")
        m = self.client.fit(name, support.SINE_X, support.SINE_Y, seed=3,
                            validation={"folds": 3, "seed": 5})
        v = self.client.validation(name)
        self.assertEqual(v, m["validation"])
        self.assertEqual((v["folds"], v["seed"], v["n"], len(v["per_fold"])), (3, 5, 21, 3))
        self.assertEqual(sum(f["n"] for f in v["per_fold"]), 21)
        self.assertAlmostEqual(v["nlpd"], sum(f["nlpd"] for f in v["per_fold"]) / 3, places=12)
        self.assertEqual(sorted(v["coverage"]), ["0.5", "0.9", "0.95"])
        self.client.fit(name, support.SINE_X, support.SINE_Y, seed=3, validation=False)
        self.assertIsNone(self.client.validation(name))
        self.assertEqual(self.client.validation(name, version=1), v)
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.client.fit(name, support.SINE_X, support.SINE_Y, validation={"folds": 22})
        self.assertEqual(cm.exception.field, "validation.folds")
        self.client.delete_model(name)

    def test_export_import_model_file(self):
        name = unique("py-file")
        self.client.fit(name, support.SINE_X, support.SINE_Y, kernel={"type": "rbf"}, seed=3)
        data = self.client.export_model(name)
        # the bytes as sent: a safetensors container (8-byte length, JSON header)
        n = struct.unpack("<Q", data[:8])[0]
        meta = json.loads(data[8:8 + n])["__metadata__"]
        self.assertEqual((meta["format"], meta["format_version"]), ("gpserve-model", "1"))
        self.assertEqual(json.loads(meta["model"])["method"], "exact")
        copy = self.client.import_model(data, name=name + "-copy")
        self.assertEqual((copy["name"], copy["version"], copy["method"]), (name + "-copy", 1, "exact"))
        X = [[0.1], [2.7]]
        a = self.client.predict(name, X)
        b = self.client.predict(name + "-copy", X)
        self.assertEqual((a["mean"], a["variance"]), (b["mean"], b["variance"]))
        bad = bytearray(data)
        bad[-1] ^= 1  # the last byte of the last array
        with self.assertRaises(errors.InvalidData) as cm:
            self.client.import_model(bytes(bad), name=name + "-bad")
        self.assertEqual((cm.exception.status, cm.exception.field), (422, "sha256"))
        self.client.delete_model(name)
        self.client.delete_model(name + "-copy")
    def test_aliases(self):
        name = unique("py-alias")
        for _ in range(2):
            self.client.fit(name, support.SINE_X, support.SINE_Y, kernel={"type": "rbf"}, seed=3)
        set_ = self.client.set_alias(name, "champion", 1)
        self.assertEqual((set_["alias"], set_["version"], set_["updated_by"]), ("champion", 1, None))
        self.assertEqual(self.client.get_alias(name, "champion")["version"], 1)
        self.assertEqual(self.client.list_aliases(name),
                         raw_ok("GET", "/v1/models/%s/aliases" % name)["aliases"])
        self.assertEqual(self.client.get_model(name, version="champion")["version"], 1)
        self.assertEqual(self.client.get_model(name)["aliases"], {"champion": 1})
        p = self.client.predict(name, support.TEST_X, version="champion")
        self.assertEqual((p["version"], p["alias"]), (1, "champion"))
        self.assertEqual(p["mean"], self.client.predict(name, support.TEST_X, version=1)["mean"])
        s = self.client.sample(name, support.TEST_X, version="champion", seed=2)
        self.assertEqual(s["version"], 1)
        self.client.set_alias(name, "challenger", 2)
        self.assertEqual(self.client.set_alias(name, "champion", "challenger")["version"], 2)
        with self.assertRaises(errors.NotFound) as cm:
            self.client.predict(name, support.TEST_X, version="nope")
        self.assertEqual(cm.exception.field, "version")
        with self.assertRaises(errors.NotFound) as cm:
            self.client.set_alias(name, "ghost", 9)
        self.assertEqual(cm.exception.field, "version")
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.client.set_alias(name, "7", 1)
        self.assertEqual(cm.exception.field, "alias")
        self.client.delete_alias(name, "challenger")
        self.assertEqual([a["alias"] for a in self.client.list_aliases(name)], ["champion"])
        # champion -> 2: version 2 cannot go, version 1 can; the latest is then 2
        with self.assertRaises(errors.Conflict) as cm:
            self.client.delete_version(name, 2)
        self.assertEqual((cm.exception.status, cm.exception.field), (409, "alias"))
        self.assertEqual(self.client.get_alias(name, "champion")["previous_version"], 1)
        self.client.delete_version(name, 1)
        self.assertIsNone(self.client.get_alias(name, "champion")["previous_version"])
        with self.assertRaises(errors.NotFound):
            self.client.get_model(name, version=1)
        with self.assertRaises(ValueError):
            self.client.delete_version(name, "champion")
        self.client.delete_model(name)

    def test_audit(self):
        name = unique("py-audit")
        X, y = support.plane(12)
        self.client.fit(name, X, y, method="exact")
        self.client.set_alias(name, "champion", 1)
        with self.assertRaises(errors.NotFound):
            self.client.delete_alias(name, "nope")
        page = self.client.audit(model=name)
        self.assertEqual(page, raw_ok("GET", "/v1/audit?model=" + name))
        got = [(e["route"], e["status"], e["version"]) for e in page["entries"]]
        self.assertEqual(got, [("DELETE /v1/models/{name}/aliases/{alias}", 404, None),
                               ("PUT /v1/models/{name}/aliases/{alias}", 200, 1),
                               ("POST /v1/models", 201, 1)])
        self.assertIsNone(page["next"])
        first = self.client.audit(model=name, limit=1)
        self.assertEqual(len(first["entries"]), 1)
        rest = self.client.audit(model=name, before=first["next"])
        self.assertEqual(first["entries"] + rest["entries"], page["entries"])
        oldest = self.client.audit(model=name, after=0)["entries"]
        self.assertEqual(oldest, list(reversed(page["entries"])))
        self.assertEqual(self.client.audit(model=name, since="2999-01-01T00:00:00Z")["entries"], [])
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.client.audit(limit=0)
        self.assertEqual(cm.exception.field, "limit")
        self.client.delete_model(name)

    def test_csv_fit_equals_json_fit(self):
        X, y = support.plane(30)
        name = unique("py-csv")
        lines = ["a,b,target"] + ["%r,%r,%r" % (r[0], r[1], t) for r, t in zip(X, y)]
        csv_model = self.client.fit_csv(name + "-c", "\n".join(lines) + "\n", seed=4,
                                        kernel={"type": "matern52"}, options={"max_iterations": 50})
        json_model = self.client.fit(name + "-j", X, y, seed=4, kernel={"type": "matern52"},
                                     options={"max_iterations": 50})
        self.assertEqual(csv_model["kernel"], json_model["kernel"])
        a = self.client.predict(name + "-c", [[0.3, -0.2], [1.0, 1.0]])
        b = self.client.predict(name + "-j", [[0.3, -0.2], [1.0, 1.0]])
        self.assertEqual((a["mean"], a["variance"]), (b["mean"], b["variance"]))
        # target by name, the CSV as bytes from a file-like object
        import io
        reordered = ["target,a,b"] + ["%r,%r,%r" % (t, r[0], r[1]) for r, t in zip(X, y)]
        c = self.client.fit_csv(name + "-t", io.BytesIO("\n".join(reordered).encode()),
                                target="target", seed=4, kernel={"type": "matern52"},
                                options={"max_iterations": 50})
        self.assertEqual(c["kernel"], json_model["kernel"])
        job = self.client.fit_csv(name + "-a", "\n".join(lines), seed=4, async_=True,
                                  kernel={"type": "matern52"}, options={"max_iterations": 50})
        self.assertEqual(self.client.wait_job(job)["kernel"], json_model["kernel"])

    def test_per_point_noise_csv_and_observe(self):
        """noise_column in a CSV fit is the JSON fit's noise.per_point; an
        observe of that model takes the rows' noise and needs it."""
        X, y = support.plane(20)
        r = [0.01 + 0.02 * (i % 3) for i in range(20)]
        name = unique("py-ppn")
        lines = ["a,b,sd2,target"] + ["%r,%r,%r,%r" % (p[0], p[1], v, t)
                                      for p, v, t in zip(X, r, y)]
        fixed = dict(kernel={"type": "rbf", "fixed": True}, noise_variance=0.01,
                     noise_fixed=True, seed=1)
        self.client.fit_csv(name + "-c", "\n".join(lines), noise_column="sd2", **fixed)
        self.client.fit(name + "-j", X, y, kernel=fixed["kernel"], seed=1,
                        noise={"variance": 0.01, "fixed": True, "per_point": r})
        a = self.client.predict(name + "-c", [[0.3, -0.2]])
        b = self.client.predict(name + "-j", [[0.3, -0.2]])
        self.assertEqual((a["mean"], a["variance"]), (b["mean"], b["variance"]))
        with self.assertRaises(errors.GPServeError) as cm:
            self.client.observe(name + "-j", [[0.5, 0.5]], [0.1])
        self.assertEqual(cm.exception.field, "noise")
        answer = self.client.observe(name + "-j", [[0.5, 0.5]], [0.1], noise=[0.02])
        self.assertEqual(answer["n"], 21)
        for suffix in ("-c", "-j"):
            self.client.delete_model(name + suffix)


@need_daemon
class PredictSampleObserveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = Client(support.URL)
        cls.name = unique("py-sine")
        cls.model = cls.client.fit(cls.name, support.SINE_X, support.SINE_Y,
                                   kernel={"type": "rbf"}, seed=3)

    def test_predict_equals_raw_answer(self):
        for opts in ({}, {"include_noise": False, "full_covariance": True},
                     {"quantiles": [0.05, 0.5, 0.95]}):
            got = self.client.predict(self.name, support.TEST_X, **opts)
            want = raw_ok("POST", "/v1/models/%s/predict" % self.name,
                          dict(X=support.TEST_X, **opts))
            self.assertEqual(got, want, opts)

    def test_predict_options(self):
        noisy = self.client.predict(self.name, support.TEST_X)
        latent = self.client.predict(self.name, support.TEST_X, include_noise=False,
                                     full_covariance=True, quantiles=[0.05, 0.95])
        self.assertEqual(noisy["mean"], latent["mean"])
        for vn, vl in zip(noisy["variance"], latent["variance"]):
            self.assertGreater(vn, vl)
        cov = latent["covariance"]
        self.assertEqual([cov[i][i] for i in range(len(cov))], latent["variance"])
        self.assertEqual(sorted(latent["quantiles"]), ["0.05", "0.95"])
        for lo, mu, hi in zip(latent["quantiles"]["0.05"], latent["mean"],
                              latent["quantiles"]["0.95"]):
            self.assertLess(lo, mu)
            self.assertLess(mu, hi)
        v1 = self.client.predict(self.name, support.TEST_X, version=1)
        self.assertEqual(v1["version"], 1)

    @support.need_numpy
    def test_numpy_inputs(self):
        np = support.np
        a = self.client.predict(self.name, np.asarray(support.TEST_X))
        b = self.client.predict(self.name, [[np.float64(r[0])] for r in support.TEST_X])
        c = self.client.predict(self.name, support.TEST_X)
        self.assertEqual(a, c)
        self.assertEqual(b, c)

    def test_sample_seeded(self):
        X = [[0.0], [1.0], [2.0], [3.0]]
        a = self.client.sample(self.name, X, n_samples=3, seed=7)
        b = self.client.sample(self.name, X, n_samples=3, seed=7)
        c = self.client.sample(self.name, X, n_samples=3, seed=8)
        self.assertEqual(a, b)
        self.assertNotEqual(a["samples"], c["samples"])
        self.assertEqual(len(a["samples"]), 3)
        self.assertTrue(all(len(s) == 4 for s in a["samples"]))
        self.assertEqual(a, raw_ok("POST", "/v1/models/%s/sample" % self.name,
                                   {"X": X, "n_samples": 3, "seed": 7}))
        noisy = self.client.sample(self.name, X, n_samples=2, seed=7, include_noise=True)
        self.assertNotEqual(noisy["samples"], a["samples"][:2])

    def test_observe(self):
        name = unique("py-observe")
        self.client.fit(name, support.SINE_X[:15], support.SINE_Y[:15], seed=3)
        answer = self.client.observe(name, support.SINE_X[15:], support.SINE_Y[15:])
        self.assertEqual((answer["name"], answer["version"], answer["n"]), (name, 1, 21))
        self.assertEqual(answer["observations"], 1)
        again = self.client.observe(name, [[5.5]], [-0.7055], new_version=True)
        self.assertEqual((again["version"], again["n"], again["observations"]), (2, 22, 0))
        with self.assertRaises(errors.InvalidData) as cm:
            self.client.observe(name, [[1.0, 2.0]], [0.5])
        self.assertEqual(cm.exception.field, "X[0]")

    def test_idempotency_key(self):
        name = unique("py-idem")
        key = unique("key")
        first = self.client.fit(name, support.SINE_X[:15], support.SINE_Y[:15], seed=3,
                                idempotency_key=key)
        again = self.client.fit(name, support.SINE_X[:15], support.SINE_Y[:15], seed=3,
                                idempotency_key=key)
        self.assertEqual(again, first)  # the same version, not a second one
        self.assertEqual(self.client.get_model(name)["versions"], [1])
        okey = unique("obs")
        a = self.client.observe(name, support.SINE_X[15:], support.SINE_Y[15:],
                                idempotency_key=okey)
        b = self.client.observe(name, support.SINE_X[15:], support.SINE_Y[15:],
                                idempotency_key=okey)
        self.assertEqual(a, b)
        self.assertEqual((b["n"], b["observations"]), (21, 1))  # the rows added once
        with self.assertRaises(errors.Conflict) as cm:  # the key, another body
            self.client.observe(name, [[5.5]], [-0.7], idempotency_key=okey)
        self.assertEqual(cm.exception.field, "Idempotency-Key")


@need_daemon
class ErrorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = Client(support.URL)
        cls.name = unique("py-err")
        cls.client.fit(cls.name, support.SINE_X, support.SINE_Y, seed=3)

    def assertApiError(self, cls, code, field, status, call, *args, **kwargs):
        with self.assertRaises(cls) as cm:
            call(*args, **kwargs)
        err = cm.exception
        self.assertIsInstance(err, errors.GPServeError)
        self.assertEqual((err.code, err.field, err.status), (code, field, status), str(err))
        self.assertTrue(err.message)
        self.assertTrue(err.request_id)
        return err

    def test_invalid_data_names_the_cell(self):
        err = self.assertApiError(errors.InvalidData, "invalid_data", "X[1]", 422,
                                  self.client.predict, self.name, [[1.0], [1.0, 2.0]])
        status, body = raw("POST", "/v1/models/%s/predict" % self.name, {"X": [[1.0], [1.0, 2.0]]})
        self.assertEqual((status, body["error"]["message"]), (err.status, err.message))

    def test_invalid_argument_unknown_field(self):
        self.assertApiError(errors.InvalidArgument, "invalid_argument", "bogus", 400,
                            self.client.predict, self.name, [[1.0]], bogus=1)
        self.assertApiError(errors.InvalidArgument, "invalid_argument", "kernel.type", 400,
                            self.client.fit, unique("py-bad"), [[0.0], [1.0]], [0.0, 1.0],
                            kernel={"type": "nonsense"})

    def test_not_found(self):
        self.assertApiError(errors.NotFound, "not_found", "name", 404,
                            self.client.predict, unique("py-missing"), [[1.0]])
        self.assertApiError(errors.NotFound, "not_found", "version", 404,
                            self.client.get_model, self.name, version=99)
        self.assertApiError(errors.NotFound, "not_found", "id", 404,
                            self.client.get_job, "0123456789abcdef")

    def test_unsupported(self):
        self.assertApiError(errors.Unsupported, "unsupported", "components", 422, self.client.predict,
                            self.name, [[1.0]], components=True)
        X, y = support.labels(12)
        self.assertApiError(errors.InvalidData, "invalid_data", "y[0]", 422, self.client.fit,
                            unique("py-lab"), X, [2] + y[1:], method="svgp",
                            likelihood="bernoulli")

    def test_malformed_json_and_media_type(self):
        with self.assertRaises(errors.MalformedJson) as cm:
            self.client.request("POST", "/v1/models/%s/predict" % self.name, body="{nope")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "malformed_json"))
        with self.assertRaises(errors.UnsupportedMediaType) as cm:
            self.client.request("POST", "/v1/models/%s/predict" % self.name, body="X=1",
                                content_type="text/plain")
        self.assertEqual(cm.exception.status, 415)
        with self.assertRaises(errors.MethodNotAllowed) as cm:
            self.client.request("PUT", "/v1/models")
        self.assertEqual(cm.exception.status, 405)

    def test_nan_refused_before_sending(self):
        with self.assertRaises(ValueError):
            self.client.predict(self.name, [[float("nan")]])

    def test_unauthorized_is_typed(self):
        # any daemon: a 401 needs a key daemon (AuthTest); here the mapping itself
        err = errors.error_from_body({"code": "unauthorized", "message": "no"}, status=401)
        self.assertIsInstance(err, errors.Unauthorized)
        odd = errors.error_from_body({"code": "future_code", "message": "m", "field": "f"})
        self.assertEqual((type(odd), odd.code, odd.field), (errors.GPServeError, "future_code", "f"))

    def test_transport_errors(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()                     # nothing listens there now
        with self.assertRaises(errors.TransportError) as cm:
            Client("http://127.0.0.1:%d" % port, timeout=5).health()
        self.assertIsNone(cm.exception.status)
        # a socket that accepts and never answers: the client's timeout
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        try:
            with self.assertRaises(errors.TransportTimeout):
                Client("http://127.0.0.1:%d" % silent.getsockname()[1], timeout=0.3).health()
        finally:
            silent.close()
        with self.assertRaises(ValueError):
            Client("ftp://example")


@need_daemon
class JobsTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(support.URL)

    def test_async_fit_and_poll(self):
        X, y = support.plane(50)
        name = unique("py-async")
        job = self.client.fit_async(name, X, y, seed=1)
        self.assertRegex(job, r"^[A-Za-z0-9._-]+$")
        state = self.client.get_job(job)
        self.assertIn(state["status"], ("queued", "running", "succeeded"))
        model = self.client.wait_job(job, poll_interval=0.05, timeout=120)
        self.assertEqual((model["name"], model["version"]), (name, 1))
        done = self.client.get_job(job)
        self.assertEqual(done["status"], "succeeded")
        self.assertEqual(done["model"], model)
        sync = self.client.fit(name, X, y, seed=1)
        self.assertEqual(sync["kernel"], model["kernel"])
        with self.assertRaises(errors.Conflict) as cm:
            self.client.cancel_job(job)
        self.assertEqual((cm.exception.status, cm.exception.field), (409, "id"))

    def test_cancel_a_running_fit(self):
        X, y, options = support.long_fit_data()
        job = self.client.fit_async(unique("py-long"), X, y, options=options)
        with self.assertRaises(errors.JobTimeout) as cm:
            self.client.wait_job(job, poll_interval=0.05, timeout=0.3)
        self.assertIn(cm.exception.job["status"], ("queued", "running"))
        answer = self.client.cancel_job(job)
        self.assertEqual(answer["id"], job)
        self.assertIn(answer["status"], ("running", "cancelled"))
        with self.assertRaises(errors.Cancelled) as cm:
            self.client.wait_job(job, poll_interval=0.05, timeout=120)
        self.assertEqual(cm.exception.job["status"], "cancelled")
        self.assertEqual(self.client.get_job(job)["status"], "cancelled")

    def test_failed_job_raises_its_error(self):
        # a symmetry the ARD kernel breaks is only known while fitting
        job = self.client.fit_async(
            unique("py-fail"), [[0, 1], [1, 0], [2, 1], [1, 2]], [1, 2, 3, 4], method="hkd",
            kernel={"type": "rbf", "ard": True},
            options={"symmetry": {"generators": [{"type": "rotate2d", "dims": [0, 1],
                                                  "order": 4}]}})
        with self.assertRaises(errors.Unsupported) as cm:
            self.client.wait_job(job, poll_interval=0.05, timeout=120)
        err = cm.exception
        self.assertEqual(err.code, "unsupported")
        self.assertEqual(err.field, "options.symmetry.generators[0]")
        self.assertEqual(err.job["status"], "failed")


@need_daemon
@need_auth
class AuthTest(unittest.TestCase):
    def test_key_required_and_accepted(self):
        open_client = Client(support.AUTH_URL)
        self.assertEqual(open_client.health(), {"status": "ok"})
        with self.assertRaises(errors.Unauthorized) as cm:
            open_client.list_models()
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        with self.assertRaises(errors.Unauthorized):
            Client(support.AUTH_URL, api_key=support.API_KEY + "x").list_models()
        client = Client(support.AUTH_URL, api_key=support.API_KEY)
        name = unique("py-auth")
        client.fit(name, support.SINE_X[:8], support.SINE_Y[:8], seed=3)
        got = client.predict(name, support.TEST_X)
        self.assertEqual(got, raw_ok("POST", "/v1/models/%s/predict" % name,
                                     {"X": support.TEST_X}, url=support.AUTH_URL,
                                     key=support.API_KEY))
        with self.assertRaises(errors.Unauthorized):
            open_client.predict(name, support.TEST_X)
        self.assertNotIn(support.API_KEY, repr(client))


@need_daemon
class ThreadsTest(unittest.TestCase):
    def test_one_client_shared_by_threads(self):
        client = Client(support.URL)
        name = unique("py-threads")
        client.fit(name, support.SINE_X, support.SINE_Y, seed=3)
        want = client.predict(name, support.TEST_X)
        results = []

        def work():
            for _ in range(5):
                results.append(client.predict(name, support.TEST_X) == want)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(results, [True] * 20)


if __name__ == "__main__":
    unittest.main()
