"""Studies through the client against a live daemon: the suggest/complete
loop and its helper, answers compared with the same requests made with
urllib, Vizier's client_id rule, attach, and the typed errors (with nothing
stored by a refused completion)."""

import math
import time
import unittest

import support
from support import need_daemon, raw, raw_ok, unique

from gpserve_client import Client, Study, Trial, errors


def quadratic(p):
    """A 1-D bowl with its minimum 0 at x = 0.3."""
    return (p["x"] - 0.3) ** 2


X_ONLY = [{"name": "x", "type": "double", "bounds": [0, 1]}]


@need_daemon
class StudyTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(support.URL)
        self.names = []

    def tearDown(self):
        for name in self.names:
            try:
                self.client.delete_study(name)
            except errors.NotFound:
                pass

    def study(self, parameters=X_ONLY, **fields):
        name = unique("py-study")
        self.names.append(name)
        fields.setdefault("seed", 7)
        return self.client.create_study(name, parameters, {"name": "y", "goal": "minimize"},
                                        **fields)

    def test_create_get_and_list_match_the_api(self):
        study = self.study(initial_design=3)
        self.assertIsInstance(study, Study)
        self.assertEqual(study.objective_name, "y")
        self.assertEqual(study.model_name, "study." + study.name)
        got = self.client.get_study(study.name)
        self.assertEqual(got, raw_ok("GET", "/v1/studies/" + study.name))
        self.assertIsNone(got["best_trial"])
        self.assertIn(study.name, [s["name"] for s in self.client.list_studies()])
        # the objective given as a name with goal=
        other = self.client.create_study(unique("py-study"), X_ONLY, "score", goal="maximize")
        self.names.append(other.name)
        self.assertEqual(other.refresh()["config"]["objective"],
                         {"name": "score", "goal": "maximize"})
        self.assertEqual(other.objective_name, "score")

    def test_suggest_complete_and_best_trial(self):
        study = self.study(initial_design=4)
        trials = study.suggest(count=2)
        self.assertEqual(len(trials), 2)
        self.assertEqual(len({t.id for t in trials}), 2)
        for t in trials:
            self.assertIsInstance(t, Trial)
            self.assertEqual(t.state, "active")
            self.assertTrue(0 <= t.parameters["x"] <= 1)
        trials[0].complete(quadratic(trials[0].parameters))
        self.assertEqual(trials[0].state, "completed")
        self.assertEqual(trials[0].value, quadratic(trials[0].parameters))
        trials[1].complete(metrics={"y": 5.0})
        best = study.best_trial()
        self.assertEqual(best.id, trials[0].id)
        self.assertEqual(best.metrics, {"y": quadratic(trials[0].parameters)})
        listed = study.trials()
        self.assertEqual([t.id for t in listed], [t.id for t in trials])
        self.assertEqual([t.info for t in listed],
                         raw_ok("GET", "/v1/studies/%s/trials" % study.name)["trials"])
        self.assertEqual(study.trial(trials[1].id).metrics, {"y": 5.0})

    def test_optimize_finds_the_minimum_of_a_bowl(self):
        study = self.study(initial_design=4)
        run = study.optimize(quadratic, n_trials=15)
        self.assertEqual(len(run), 15)
        self.assertEqual(len({t.id for t in run}), 15)
        self.assertTrue(all(t.state == "completed" for t in run))
        best = study.best_trial()
        self.assertEqual(best.value, min(t.value for t in run))
        # 4 Sobol points, then 11 model-based ones on a 1-D bowl: close to x = 0.3
        self.assertLess(abs(best.parameters["x"] - 0.3), 0.05, best)
        counts = study.refresh()["trials"]
        self.assertEqual(counts.get("completed"), 15, counts)

    def test_optimize_in_batches_and_infeasible_results(self):
        study = self.study(initial_design=4)

        def fn(p):
            if p["x"] < 0.25:
                return None                 # infeasible: None
            if p["x"] > 0.75:
                raise RuntimeError("the rig broke")
            if 0.5 < p["x"] <= 0.75:
                return float("nan")         # infeasible: not finite
            return {"y": quadratic(p)}

        run = study.optimize(fn, n_trials=12, batch=4)
        self.assertEqual(len(run), 12)
        self.assertEqual(len({t.id for t in run}), 12)
        for t in run:
            x = t.parameters["x"]
            if 0.25 <= x <= 0.5:
                self.assertEqual(t.state, "completed", t)
            else:
                self.assertEqual(t.state, "infeasible", t)
                self.assertIsNotNone(t.reason)
                if x > 0.75:
                    self.assertIn("RuntimeError: the rig broke", t.reason)
        stored = {t.id: t.state for t in study.trials()}
        self.assertEqual(stored, {t.id: t.state for t in run})

    def test_integer_and_categorical_parameters(self):
        params = [{"name": "k", "type": "integer", "bounds": [1, 6]},
                  {"name": "opt", "type": "categorical", "values": ["adam", "sgd", "lbfgs"]},
                  {"name": "lr", "type": "double", "bounds": (1e-4, 1e-1), "scale": "log"}]
        study = self.study(params, initial_design=3)
        seen = study.optimize(lambda p: p["k"] + {"adam": 0, "sgd": 1, "lbfgs": 2}[p["opt"]] +
                              math.log10(p["lr"]), n_trials=6)
        for t in seen:
            self.assertIsInstance(t.parameters["k"], int, t)
            self.assertTrue(1 <= t.parameters["k"] <= 6, t)
            self.assertIn(t.parameters["opt"], ("adam", "sgd", "lbfgs"))
            self.assertTrue(1e-4 <= t.parameters["lr"] <= 1e-1, t)

    def test_a_client_id_gets_its_active_trial_back(self):
        study = self.study()
        first = study.suggest(client_id="worker-1")
        again = study.suggest(client_id="worker-1")
        self.assertEqual([t.id for t in again], [t.id for t in first])
        self.assertEqual(again[0].parameters, first[0].parameters)
        other = study.suggest(client_id="worker-2")
        self.assertNotEqual(other[0].id, first[0].id)
        first[0].complete(1.0)
        after = study.suggest(client_id="worker-1")
        self.assertNotIn(after[0].id, (first[0].id, other[0].id))

    def test_attach(self):
        study = self.study()
        t = study.attach({"x": 0.3}, 0.0)
        self.assertEqual(t.state, "completed")
        self.assertEqual(t.metrics, {"y": 0.0})
        self.assertEqual(study.best_trial().id, t.id)
        t2 = study.attach({"x": 0.9}, {"y": 0.36})
        self.assertEqual(t2.id, t.id + 1)

    def test_completion_errors_store_nothing(self):
        study = self.study()
        other = self.study()
        trial = study.suggest()[0]
        path = "/v1/studies/%s/trials/%d" % (study.name, trial.id)
        with self.assertRaises(errors.InvalidData) as cm:
            trial.complete(metrics={"y": 1.0, "bogus": 2.0})
        self.assertEqual(cm.exception.status, 422)
        self.assertIn("bogus", cm.exception.field)
        with self.assertRaises(errors.InvalidData) as cm:
            self.client.complete_trial(study.name, trial.id, {"z": 1.0})
        self.assertEqual(cm.exception.status, 422)
        # NaN never leaves the client (JSON cannot carry it) ...
        with self.assertRaises(ValueError):
            trial.complete(float("nan"))
        # ... and the daemon refuses a non-finite number sent as JSON text
        status, answer = raw("POST", path, {"metrics": {"y": float("nan")}})   # NaN as text
        self.assertIn(status, (400, 422), answer)
        status, answer = raw("POST", path, {"metrics": {"y": 1e999}})        # Infinity
        self.assertIn(status, (400, 422), answer)
        self.assertEqual(raw_ok("GET", path)["state"], "active")
        # a trial of another study: 404 naming the trial
        with self.assertRaises(errors.NotFound) as cm:
            self.client.complete_trial(other.name, trial.id + 1000, {"y": 1.0})
        self.assertEqual(cm.exception.field, "trial")
        self.assertEqual(raw_ok("GET", path)["state"], "active")
        trial.complete(1.0)
        with self.assertRaises(errors.Conflict) as cm:
            trial.complete(2.0)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.field, "trial")
        self.assertEqual(study.trial(trial.id).metrics, {"y": 1.0})

    def test_create_errors_name_the_field(self):
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.client.create_study(unique("py-study"), [{"name": "x", "type": "double",
                                                           "bounds": [1, 1]}], "y")
        self.assertEqual(cm.exception.field, "parameters[0].bounds")
        with self.assertRaises(errors.GPServeError) as cm:
            self.client.create_study(unique("py-study"), [{"name": "x", "type": "complex",
                                                           "bounds": [0, 1]}], "y")
        self.assertEqual(cm.exception.field, "parameters[0].type")
        study = self.study()
        with self.assertRaises(errors.Conflict):
            self.client.create_study(study.name, X_ONLY, "y")
        with self.assertRaises(errors.NotFound):
            self.client.study(unique("py-none"))

    def test_the_study_model_predicts(self):
        study = self.study(initial_design=4)
        study.optimize(quadratic, n_trials=8)
        deadline = time.monotonic() + 60
        while not (study.refresh().get("model") or {}).get("version"):
            self.assertLess(time.monotonic(), deadline, "no study model version after 60 s")
            time.sleep(0.25)
        pred = self.client.predict(study.model_name, [[0.3], [0.9]])
        self.assertEqual(len(pred["mean"]), 2)
        self.assertTrue(all(math.isfinite(v) and v > 0 for v in pred["variance"]))

    def test_delete(self):
        study = self.study()
        study.delete()
        with self.assertRaises(errors.NotFound):
            study.refresh()
        self.assertEqual(raw("GET", "/v1/studies/" + study.name)[0], 404)


if __name__ == "__main__":
    unittest.main()
