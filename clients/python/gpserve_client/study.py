"""Studies: the daemon suggests the next experiment (Bayesian optimisation
and active learning as a service; docs/design/api.md, "Studies").

``StudyRoutes`` is the part of :class:`~gpserve_client.Client` with one
method per study route (answers are the daemon's JSON); ``Study`` and
``Trial`` are handles over them for a suggest/complete loop::

    study = client.create_study("tune", [{"name": "x", "type": "double", "bounds": [0, 1]}],
                                {"name": "y", "goal": "minimize"}, seed=1)
    for trial in study.suggest(count=2):
        trial.complete(f(trial.parameters["x"]))
    study.optimize(lambda p: f(p["x"]), n_trials=20)
    print(study.best_trial())
"""

import math
import numbers
import urllib.parse
import uuid

__all__ = ["StudyRoutes", "Study", "Trial"]

ACTIVE = "active"


def _study_path(name, suffix=""):
    return "/v1/studies/" + urllib.parse.quote(str(name), safe="") + suffix


def _trial_path(name, trial_id):
    return _study_path(name, "/trials/%d" % int(trial_id))


def _trial_list(answer):
    """The trials of an answer: ``{"trials": [...]}`` or a list."""
    if isinstance(answer, dict):
        answer = answer.get("trials", [])
    return list(answer or [])


def _plain_number(value, what):
    """A finite float for a metric; NaN and Inf are refused here (JSON cannot
    carry them: report the trial infeasible instead)."""
    if hasattr(value, "item"):          # numpy scalars
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("metric %s must be a number, not %r" % (what, value))
    value = float(value)
    if not math.isfinite(value):
        raise ValueError("metric %s is %r: JSON cannot carry it (use trial.infeasible(reason) "
                         "for a failed evaluation)" % (what, value))
    return value


def _metrics_body(metrics):
    return {str(k): _plain_number(v, k) for k, v in metrics.items()}


class StudyRoutes:
    """The study routes of the v1 API (mixed into ``Client``)."""

    def create_study(self, name, parameters, objective, *, goal=None, constraints=None,
                     acquisition=None, model=None, initial_design=None, refit=None,
                     trial_timeout_s=None, seed=None, **fields):
        """``POST /v1/studies``; returns a :class:`Study` (its ``info`` is the answer).

        ``parameters`` is the list of the API's parameter objects
        (``{"name": "x", "type": "double", "bounds": [0, 1], "scale": "log"}``,
        ``{"name": "k", "type": "integer", "bounds": [1, 10]}``,
        ``{"name": "opt", "type": "categorical", "values": ["adam", "sgd"]}``);
        ``objective`` is ``{"name": "y", "goal": "minimize"}``, or just the
        metric's name with ``goal=`` (default ``"minimize"``); ``constraints``
        a list of ``{"name": "c", "max": 0.5}`` (feasible when ``c <= max``);
        ``acquisition`` ``{"type": "log_ei" | "ucb" | "pi" | "thompson" |
        "max_variance", "beta": 2.0}``; ``model`` ``{"method": "exact" |
        "sgpr", "kernel": {...}, "options": {...}}``.  Fields left None take
        the daemon's defaults; other API fields may be passed by keyword."""
        if isinstance(objective, str):
            objective = {"name": objective, "goal": goal or "minimize"}
        elif goal is not None:
            objective = dict(objective, goal=goal)
        body = {k: v for k, v in dict(
            name=name, parameters=_plain_parameters(parameters), objective=objective,
            constraints=constraints, acquisition=acquisition, model=model,
            initial_design=initial_design, refit=refit, trial_timeout_s=trial_timeout_s,
            seed=seed, **fields).items() if v is not None}
        return Study(self, name, self._post("/v1/studies", body))

    def study(self, name):
        """A :class:`Study` handle of an existing study (``GET /v1/studies/{name}``:
        NotFound when there is none)."""
        return Study(self, name, self.get_study(name))

    def get_study(self, name):
        """``GET /v1/studies/{name}``: the study's settings, ``best_trial``
        (None before a feasible completion), the counts of its trials by
        state and its ``model`` (``{"name": "study.NAME", "version", ...}``)."""
        return self._get(_study_path(name))

    def list_studies(self):
        """``GET /v1/studies``: every study (summaries)."""
        answer = self._get("/v1/studies")
        return answer.get("studies", []) if isinstance(answer, dict) else answer

    def delete_study(self, name):
        """``DELETE /v1/studies/{name}``: the study, its trials and its models."""
        self.request("DELETE", _study_path(name))

    def suggest_trials(self, name, count=1, client_id=None, **fields):
        """``POST /v1/studies/{name}/suggestions``: the answer,
        ``{"trials": [{"id", "parameters", "state": "active", ...}], ...}``.
        A ``client_id`` that still has active trials gets them back."""
        body = {k: v for k, v in dict(count=int(count), client_id=client_id,
                                      **fields).items() if v is not None}
        return self._post(_study_path(name, "/suggestions"), body)

    def list_trials(self, name, **query):
        """``GET /v1/studies/{name}/trials``: every trial, by id (the
        query's filters, e.g. ``state="completed"``, as the daemon takes them)."""
        path = _study_path(name, "/trials")
        return _trial_list(self.request("GET", path, query=query or None).json())

    def get_trial(self, name, trial_id):
        """``GET /v1/studies/{name}/trials/{id}``."""
        return self._get(_trial_path(name, trial_id))

    def complete_trial(self, name, trial_id, metrics=None, *, infeasible=False, reason=None):
        """``POST /v1/studies/{name}/trials/{id}``: complete an active trial
        with its ``metrics`` (``{"y": 0.3, "c": 0.1}``: the objective and
        every constraint, finite), or report it ``infeasible`` (with an
        optional ``reason``).  Conflict (409) when the trial is not active,
        NotFound (404) when the study has no such trial, InvalidData (422)
        for a missing or unknown metric.  Returns the trial."""
        if infeasible:
            body = {"infeasible": True}
            if reason is not None:
                body["reason"] = str(reason)
            if metrics:
                body["metrics"] = _metrics_body(metrics)
        else:
            if not metrics:
                raise ValueError("complete_trial needs metrics, or infeasible=True")
            body = {"metrics": _metrics_body(metrics)}
        return self._post(_trial_path(name, trial_id), body)

    def attach_trial(self, name, parameters, metrics):
        """``POST /v1/studies/{name}/trials``: add a trial that was run
        elsewhere (completed at once with its ``metrics``)."""
        return self._post(_study_path(name, "/trials"),
                          {"parameters": dict(parameters), "metrics": _metrics_body(metrics)})


def _plain_parameters(parameters):
    """The parameter objects with tuples and numpy values as JSON lists."""
    out = []
    for p in parameters:
        p = dict(p)
        for key in ("bounds", "values"):
            if key in p and not isinstance(p[key], list):
                p[key] = list(p[key].tolist() if hasattr(p[key], "tolist") else p[key])
        out.append(p)
    return out


class Trial:
    """One trial of a study: ``id``, ``parameters`` (a dict by parameter
    name: a float, an int, or a categorical's value), ``state`` ("active",
    "completed", "infeasible" or "expired"), ``metrics`` (a dict, or None
    while active) and ``info`` (the daemon's whole trial object)."""

    def __init__(self, study, info):
        self.study = study
        self._set(info)

    def _set(self, info):
        self.info = info
        self.id = info["id"]
        self.parameters = info.get("parameters") or {}
        self.state = info.get("state")
        self.metrics = info.get("metrics")
        self.reason = info.get("reason")
        self.client_id = info.get("client_id")

    def __repr__(self):
        return "Trial(%r, id=%d, state=%r, parameters=%r%s)" % (
            self.study.name, self.id, self.state, self.parameters,
            ", metrics=%r" % (self.metrics,) if self.metrics else "")

    @property
    def value(self):
        """The objective's value (None while active, or for an infeasible trial)."""
        if not self.metrics:
            return None
        return self.metrics.get(self.study.objective_name)

    def complete(self, value=None, *, metrics=None):
        """Complete this trial: ``value`` is the objective's value (a number),
        ``metrics`` a dict of every metric (the objective and the constraints);
        either or both.  Returns self, updated."""
        metrics = dict(metrics or {})
        if value is not None:
            metrics[self.study.objective_name] = value
        answer = self.study.client.complete_trial(self.study.name, self.id, metrics)
        self._update(answer)
        return self

    def infeasible(self, reason=None):
        """Report this trial infeasible (the experiment failed or its point is
        not allowed); ``reason`` is kept with it.  Returns self, updated."""
        answer = self.study.client.complete_trial(self.study.name, self.id, infeasible=True,
                                                  reason=reason)
        self._update(answer)
        return self

    def refresh(self):
        """Read the trial again (``GET .../trials/{id}``)."""
        self._set(self.study.client.get_trial(self.study.name, self.id))
        return self

    def _update(self, answer):
        # The completion answers the trial (or wraps it in {"trial": ...}).
        if isinstance(answer, dict) and "trial" in answer and isinstance(answer["trial"], dict):
            answer = answer["trial"]
        if isinstance(answer, dict) and answer.get("id") == self.id:
            self._set(answer)
        else:
            self.refresh()


class Study:
    """A handle of one study on the daemon: ``name``, ``client``, ``info``
    (the last answer of ``GET /v1/studies/{name}``, or of its creation)."""

    def __init__(self, client, name, info=None):
        self.client = client
        self.name = name
        self.info = info or {}
        # The loop helper's client id: a study handle asks as one client
        # (Vizier's rule: asking again gets the still-active trials back).
        self.client_id = "py-" + uuid.uuid4().hex[:16]

    def __repr__(self):
        return "Study(%r)" % self.name

    @property
    def objective_name(self):
        """The objective metric's name (from the study's settings)."""
        objective = self.info.get("objective")
        if not isinstance(objective, dict) and isinstance(self.info.get("config"), dict):
            objective = self.info["config"].get("objective")
        if not isinstance(objective, dict):
            objective = self.refresh().get("objective")
        if not isinstance(objective, dict) or "name" not in objective:
            raise RuntimeError("GET /v1/studies/%s names no objective" % self.name)
        return objective["name"]

    @property
    def model_name(self):
        """The study's model, a normal gpserve model (predict and sample work on it)."""
        model = self.info.get("model")
        if isinstance(model, dict) and model.get("name"):
            return model["name"]
        return "study." + self.name

    def refresh(self):
        """Read the study again; returns its ``info``."""
        self.info = self.client.get_study(self.name)
        return self.info

    def suggest(self, count=1, client_id=None):
        """``count`` trials to run next (a list of :class:`Trial`, active).
        With a ``client_id`` that still has active trials, those come back
        (ask again after a crash and carry on)."""
        answer = self.client.suggest_trials(self.name, count, client_id)
        return [Trial(self, t) for t in _trial_list(answer)]

    def trials(self, **query):
        """Every trial of the study (a list of :class:`Trial`, by id)."""
        return [Trial(self, t) for t in self.client.list_trials(self.name, **query)]

    def trial(self, trial_id):
        """One trial by id."""
        return Trial(self, self.client.get_trial(self.name, trial_id))

    def best_trial(self):
        """The best feasible completed trial (a :class:`Trial`), or None."""
        best = self.refresh().get("best_trial")
        return Trial(self, best) if best else None

    def attach(self, parameters, metrics):
        """Add a trial run elsewhere, completed at once: ``parameters`` by
        name, ``metrics`` a number (the objective's value) or a dict."""
        if not isinstance(metrics, dict):
            metrics = {self.objective_name: metrics}
        return Trial(self, _unwrap(self.client.attach_trial(self.name, parameters, metrics)))

    def delete(self):
        """Delete the study, its trials and its models."""
        self.client.delete_study(self.name)

    def optimize(self, fn, n_trials, batch=1, client_id=None):
        """The loop: ask for ``batch`` trials at a time, call
        ``fn(parameters)`` for each and complete it, until ``n_trials``
        trials were run by this call.  ``fn`` returns the objective's value (a
        number), a dict of metrics, or None for an infeasible point; an
        exception it raises (an ``Exception``) or a non-finite value also
        reports the trial infeasible, with the reason.  Returns the trials
        run, completed or infeasible, in order."""
        if n_trials < 0 or batch < 1:
            raise ValueError("n_trials must be >= 0 and batch >= 1")
        client_id = client_id or self.client_id
        done = []
        seen = set()
        while len(done) < n_trials:
            count = min(batch, n_trials - len(done))
            trials = [t for t in self.suggest(count, client_id) if t.id not in seen]
            if not trials:
                raise RuntimeError("study %s suggested no new trial" % self.name)
            for trial in trials:
                if len(done) == n_trials:
                    break          # more came back than asked (a client's earlier trials)
                seen.add(trial.id)
                _run_one(trial, fn)
                done.append(trial)
        return done


def _unwrap(answer):
    if isinstance(answer, dict) and isinstance(answer.get("trial"), dict):
        return answer["trial"]
    return answer


def _run_one(trial, fn):
    """Evaluate fn at the trial's parameters and report what it gave."""
    try:
        result = fn(dict(trial.parameters))
    except Exception as exc:  # the experiment failed: the point is infeasible
        trial.infeasible("%s: %s" % (type(exc).__name__, exc))
        return
    if result is None:
        trial.infeasible("the objective function returned None")
        return
    values = result if isinstance(result, dict) else {trial.study.objective_name: result}
    bad = [k for k, v in values.items()
           if isinstance(v, numbers.Real) and not isinstance(v, bool) and not math.isfinite(v)]
    if bad:
        trial.infeasible("the objective function returned a non-finite %s" % bad[0])
        return
    trial.complete(metrics=values)
