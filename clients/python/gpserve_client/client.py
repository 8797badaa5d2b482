"""The low-level client: one method per route of gpserve's v1 API.

Standard library only.  Request bodies take lists, tuples and, when numpy is
installed, numpy arrays and scalars (pandas frames too); answers are the
daemon's JSON decoded into dicts and lists (numbers written with 17
significant digits decode to the exact doubles the daemon computed).
Fields left as None are not sent, so the daemon's defaults apply.
"""

import http.client
import json
import math
import os
import socket
import ssl
import threading
import time
import urllib.parse

from . import errors
from .study import StudyRoutes

__all__ = ["Client", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:8080"
USER_AGENT = "gpserve-python-client"
JOB_ENDED = ("succeeded", "failed", "cancelled")


def to_plain(value):
    """Lists of plain numbers from numpy arrays, pandas frames and series;
    anything else unchanged (json's default hook handles numpy scalars)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def column_names(X):
    """The column names of a table (a pandas DataFrame: anything with a
    ``columns`` attribute; pandas is never imported), as a list of str, or
    None: no columns, or some name not a string (scikit-learn's rule for
    ``feature_names_in_``)."""
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    names = list(columns)
    if not names or not all(isinstance(n, str) for n in names):
        return None
    return names


def named_points(X):
    """("rows", records) for a table with column names (matched by name on
    the daemon, in any order), else ("X", the positional rows)."""
    names = column_names(X)
    if names is None:
        return "X", to_plain(X)
    return "rows", [dict(zip(names, row)) for row in to_plain(X)]


def _json_default(value):
    if hasattr(value, "tolist"):      # numpy scalars and arrays nested in lists
        return value.tolist()
    raise TypeError("%s is not JSON serialisable" % type(value).__name__)


def _version_segment(version):
    """A version for a path: a number as digits, an alias as it is (quoted)."""
    if isinstance(version, str):
        return urllib.parse.quote(version, safe="")
    return "%d" % int(version)


def encode_json(body):
    """The JSON text of a request body; NaN and Inf are refused here, since
    JSON cannot carry them (the daemon would answer malformed_json)."""
    try:
        return json.dumps(body, allow_nan=False, default=_json_default,
                          separators=(",", ":")).encode("utf-8")
    except ValueError as exc:
        raise ValueError("request body holds NaN or Inf, which JSON cannot carry "
                         "(remove or impute those values)") from exc


def missing_to_null(values):
    """Targets with NaN for a missing value (pandas' and numpy's) as JSON
    null: a coregionalised fit's or observe's missing outputs
    (docs/design/multioutput.md).  Lists (of rows) of plain numbers."""
    values = to_plain(values)
    if isinstance(values, (list, tuple)):
        return [missing_to_null(v) for v in values]
    if isinstance(values, float) and math.isnan(values):
        return None
    return values


def _drop_none(fields):
    return {k: v for k, v in fields.items() if v is not None}


def _query_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _stream_body(body):
    """A file (or iterator) body as http.client streams it: (what to send,
    where a seekable binary file starts or None, its length or None). A text
    file is sent as UTF-8 (http.client would send Latin-1); without a length
    the body goes chunked."""
    if hasattr(body, "read") and isinstance(body.read(0), str):
        def utf8(f=body):
            while True:
                piece = f.read(1 << 16)
                if not piece:
                    return
                yield piece.encode("utf-8")
        return utf8(), None, None
    if not hasattr(body, "read"):
        return body, None, None
    try:
        start = body.tell()
        size = os.fstat(body.fileno()).st_size - start
    except (AttributeError, OSError, ValueError):
        return body, None, None
    return body, start, size


class Response:
    """A 2xx answer: status, headers (lower-case names) and raw body."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8")) if self.body else None


class Client(StudyRoutes):
    """A client of one gpserve daemon.

    ``url`` is the daemon's base URL (``http://host:port``, or https, with an
    optional path prefix); ``api_key`` is sent as ``Authorization: Bearer``;
    ``cafile`` names the PEM CA file an https daemon's certificate must chain
    to (a daemon with a private CA); ``ssl_context`` (an ``ssl.SSLContext``)
    replaces the default one altogether (client certificates for a daemon
    with ``--tls-client-ca``: ``load_cert_chain`` on it; it is not pickled);
    ``timeout`` is the socket timeout of every request in seconds (a
    synchronous fit may take a while: pass ``timeout=`` to ``fit`` or use
    ``fit_async``).  The study routes (``create_study``, ``study``,
    ``suggest_trials``, ``complete_trial``, ...) are ``StudyRoutes``'s
    (gpserve_client/study.py).  Each thread that uses the client keeps one connection
    to the daemon open between its requests (HTTP keep-alive: half the cost of
    a small request is a new connection), so one instance may be shared by
    threads; ``close()`` closes the calling thread's connection, and a
    connection the daemon closed while idle is replaced, once, by a new one.
    """

    def __init__(self, url=DEFAULT_URL, api_key=None, timeout=60.0, cafile=None,
                 ssl_context=None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be http://HOST[:PORT] or https://..., not %r" % url)
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.cafile = cafile
        self.ssl_context = ssl_context
        self._local = threading.local()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_local"]                       # connections stay with their process
        state["ssl_context"] = None               # an SSLContext does not pickle
        return state

    def _tls_context(self):
        """The SSL context of https connections (None: Python's default)."""
        if self.ssl_context is not None:
            return self.ssl_context
        if self.cafile is not None:
            return ssl.create_default_context(cafile=self.cafile)
        return None

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the calling thread's kept-alive connection (the next request
        opens a new one)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _connection(self, timeout):
        """The calling thread's connection, and whether it is new."""
        conn = getattr(self._local, "conn", None)
        fresh = conn is None
        if fresh:
            if self._https:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                                   context=self._tls_context())
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn, fresh

    def __repr__(self):
        return "Client(%r%s)" % (self.url, ", api_key=***" if self.api_key else "")

    # ------------------------------------------------------------ transport

    def request(self, method, path, body=None, content_type="application/json",
                query=None, timeout=None, idempotency_key=None):
        """Send one request; return a Response for a 2xx answer, raise the
        typed GPServeError for any other.  ``body`` is a JSON-able object, or
        bytes/str sent as they are with ``content_type``.  ``idempotency_key``
        is sent as the ``Idempotency-Key`` header: a retry with the same key
        gets the first answer again and writes nothing twice."""
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(
                [(k, _query_value(v)) for k, v in query.items() if v is not None])
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        if idempotency_key is not None:
            headers["Idempotency-Key"] = str(idempotency_key)
        data = None
        start = None  # a file body's first byte, to send it again on a retry
        if body is not None:
            if isinstance(body, str):
                data = body.encode("utf-8")
            elif isinstance(body, (bytes, bytearray)):
                data = bytes(body)
            elif hasattr(body, "read") or hasattr(body, "__next__"):
                data, start, size = _stream_body(body)
                if size is not None:
                    headers["Content-Length"] = str(size)
            else:
                data = encode_json(body)
            headers["Content-Type"] = content_type
        wait = self.timeout if timeout is None else timeout
        for attempt in (0, 1):
            conn, fresh = self._connection(wait)
            if attempt and hasattr(data, "read"):
                if start is None:
                    raise errors.TransportError("%s %s: the connection was lost and the body "
                                                "cannot be read again" % (method, path))
                data.seek(start)
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                resp_headers = {k.lower(): v for k, v in resp.getheaders()}
                if resp.will_close:
                    self.close()
                break
            except socket.timeout as exc:
                self.close()
                raise errors.TransportTimeout("%s %s: no answer within %s s" % (
                    method, path, wait)) from exc
            except (ConnectionResetError, BrokenPipeError) as exc:
                # RemoteDisconnected is a ConnectionResetError: a kept-alive
                # connection the daemon closed while idle (--timeout) fails at
                # once, before the daemon read the request; try once more anew.
                self.close()
                if fresh or attempt:
                    raise errors.TransportError("%s %s: %s" % (method, path, exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise errors.TransportError("%s %s: %s" % (method, path, exc)) from exc
        if 200 <= status < 300:
            return Response(status, resp_headers, raw)
        raise self._error(status, resp_headers, raw)

    @staticmethod
    def _error(status, headers, raw):
        retry = headers.get("retry-after")
        retry_after = int(retry) if retry and retry.isdigit() else None
        request_id = headers.get("x-request-id")
        try:
            err = json.loads(raw.decode("utf-8"))["error"]
            if not isinstance(err, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return errors.GPServeError(raw[:200].decode("utf-8", "replace") or "HTTP %d" % status,
                                       status=status, request_id=request_id,
                                       retry_after=retry_after)
        return errors.error_from_body(err, status=status, request_id=request_id,
                                      retry_after=retry_after)

    def _get(self, path):
        return self.request("GET", path).json()

    def _post(self, path, body, timeout=None, idempotency_key=None):
        return self.request("POST", path, body=body, timeout=timeout,
                            idempotency_key=idempotency_key).json()

    @staticmethod
    def _model_path(name, suffix=""):
        return "/v1/models/" + urllib.parse.quote(str(name), safe="") + suffix

    # ------------------------------------------------------------ service

    def health(self):
        """``GET /healthz``: ``{"status": "ok"}``."""
        return self._get("/healthz")

    def ready(self):
        """``GET /readyz``: ``{"status": "ready"}`` (NotReady otherwise)."""
        return self._get("/readyz")

    def metrics(self):
        """``GET /metrics``: the Prometheus text."""
        return self.request("GET", "/metrics").body.decode("utf-8")

    def openapi(self):
        """``GET /openapi.yaml``: the OpenAPI 3 document, as text."""
        return self.request("GET", "/openapi.yaml").body.decode("utf-8")

    def methods(self):
        """``GET /v1/methods``: the list of methods with their options."""
        return self._get("/v1/methods")["methods"]

    # ------------------------------------------------------------ fits

    @staticmethod
    def fit_body(name, X=None, y=None, method=None, kernel=None, likelihood=None,
                 noise=None, options=None, standardize=None, seed=None, **fields):
        """The JSON body of a fit (fields left None are not sent)."""
        body = _drop_none(dict(name=name, method=method, kernel=kernel, likelihood=likelihood,
                               noise=noise, options=options, standardize=standardize,
                               seed=seed, **fields))
        if X is not None:
            body["X"] = to_plain(X)
            names = column_names(X)   # a DataFrame's columns: the model's signature
            if names is not None and "feature_names" not in body:
                body["feature_names"] = names
        if y is not None:
            body["y"] = missing_to_null(y)  # NaN: a missing output (coregionalised fits)
        return body

    def fit(self, name, X=None, y=None, *, method=None, kernel=None, likelihood=None,
            noise=None, options=None, standardize=None, seed=None, timeout=None,
            idempotency_key=None, **fields):
        """Synchronous fit (``POST /v1/models``): the fitted model (201).

        ``kernel`` and ``options`` are dicts as in the API
        (``{"type": "rbf", "ard": True, "fixed": True}``); ``noise`` is
        ``{"variance": v, "fixed": bool}``.  Other API fields may be passed
        by keyword (``budget_s=30`` with ``method="auto"``, which this call
        runs synchronously; ``fit_async`` for its job).  A fit under an existing name adds a version; with
        ``idempotency_key``, a retry of it answers the same version."""
        body = self.fit_body(name, X, y, method, kernel, likelihood, noise, options,
                             standardize, seed, **fields)
        if method == "auto":  # a job by default: this call waits for its model
            body.setdefault("async", False)
        return self._post("/v1/models", body, timeout=timeout, idempotency_key=idempotency_key)

    def fit_async(self, name, X=None, y=None, *, method=None, kernel=None, likelihood=None,
                  noise=None, options=None, standardize=None, seed=None, idempotency_key=None,
                  **fields):
        """Asynchronous fit (202): the job id; follow it with ``get_job``,
        ``wait_job`` or ``cancel_job``.  With ``idempotency_key``, a retry
        answers the same job."""
        body = self.fit_body(name, X, y, method, kernel, likelihood, noise, options,
                             standardize, seed, **fields)
        body["async"] = True
        return self._post("/v1/models", body, idempotency_key=idempotency_key)["job"]

    def fit_csv(self, name, data, *, target=None, method=None, kernel=None,
                likelihood=None, options=None, noise_variance=None, noise_fixed=None,
                standardize=None, seed=None, async_=False, timeout=None, idempotency_key=None,
                noise_column=None, targets=None):
        """Fit from CSV text (str, bytes or a binary/text file object): a
        header row, then rows of numbers; the target is the last column or
        ``target`` (a header name or 0-based index), or the several columns
        ``targets`` names (a list of header names, the outputs of a
        coregionalised fit; an empty cell is a missing value); ``noise_column`` names
        the column of the rows' known noise variances (not an input).
        Returns the model, or the job id when ``async_``."""
        if hasattr(data, "read"):
            data = data.read()
        if targets is not None and not isinstance(targets, str):
            targets = ",".join(targets)
        query = dict(name=name, target=target, targets=targets, method=method, kernel=kernel,
                     likelihood=likelihood, options=options, noise_variance=noise_variance,
                     noise_fixed=noise_fixed, standardize=standardize, seed=seed,
                     noise_column=noise_column, **{"async": True if async_ else None})
        answer = self.request("POST", "/v1/models", body=data, content_type="text/csv",
                              query=query, timeout=timeout,
                              idempotency_key=idempotency_key).json()
        return answer["job"] if async_ else answer

    # ------------------------------------------------------------ jobs

    def get_job(self, job_id):
        """``GET /v1/jobs/{id}``: the job (status, progress, model or error)."""
        return self._get("/v1/jobs/" + urllib.parse.quote(str(job_id), safe=""))

    def cancel_job(self, job_id):
        """``DELETE /v1/jobs/{id}``: the job as the daemon saw it (cancelled
        when it was queued; still running, asked to stop, when it ran).
        Raises Conflict once the job has ended."""
        return self.request("DELETE", "/v1/jobs/" + urllib.parse.quote(str(job_id), safe="")).json()

    def wait_job(self, job_id, poll_interval=0.2, timeout=None):
        """Poll a job until it ends; return its fitted model.

        A failed job raises the typed error of its ``error`` (e.g.
        Unsupported), a cancelled one Cancelled, each with ``.job`` set;
        ``timeout`` seconds without an end raise JobTimeout (the job goes on).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            status = job.get("status")
            if status == "succeeded":
                return job["model"]
            if status == "failed":
                raise errors.error_from_body(job.get("error") or {}, job=job)
            if status == "cancelled":
                raise errors.Cancelled("job %s was cancelled" % job_id, job=job)
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.JobTimeout("job %s still %s after %s s" % (job_id, status, timeout),
                                        job=job)
            time.sleep(poll_interval)

    # ------------------------------------------------------------ models

    def list_models(self):
        """``GET /v1/models``: the latest version of each model (summaries)."""
        return self._get("/v1/models")["models"]

    def get_model(self, name, version=None):
        """``GET /v1/models/{name}`` (the latest, with ``versions``) or
        ``GET /v1/models/{name}/versions/{version}``; ``version`` is a
        number or an alias (``"champion"``)."""
        if version is None:
            return self._get(self._model_path(name))
        return self._get(self._model_path(name, "/versions/" + _version_segment(version)))

    def validation(self, name, version=None):
        """The validation report kept with a version (``None`` when it was
        fitted without one): ``{"rmse", "nlpd", "coverage": {"0.5", "0.9",
        "0.95"}, "per_fold", "sd", ...}`` (``log_loss`` and ``accuracy`` for
        classes).  Ask for one on a fit with ``validation={"folds": 5}`` or
        ``{"fraction": 0.2}``; ``validation=False`` skips the default."""
        return self.get_model(name, version).get("validation")

    def leaderboard(self, name_or_model, version=None):
        """The candidates a ``method="auto"`` fit validated (``None`` for a
        fit of a named method): a list of ``{"method", "options", "status"
        ("done", "skipped", "failed", "stopped"), "nlpd", "nlpd_sd", "rmse"
        or "accuracy", "seconds", "reason", "chosen"}``, from a model's name
        (and version) or a model dict already fetched (a fit's answer, a
        job's ``model``).  While the job runs, ``get_job(id)["progress"]
        ["leaderboard"]`` holds the candidates done so far."""
        model = name_or_model if isinstance(name_or_model, dict) else \
            self.get_model(name_or_model, version)
        return (model.get("method_info") or {}).get("leaderboard")

    def versions(self, name):
        """The version numbers of a model."""
        return self.get_model(name)["versions"]

    def delete_model(self, name):
        """``DELETE /v1/models/{name}``: every version (and its aliases)."""
        self.request("DELETE", self._model_path(name))

    def delete_version(self, name, version):
        """``DELETE /v1/models/{name}/versions/{version}``: one version, by
        its number (an alias is refused: it may move).  Raises the 409
        ``Conflict`` naming ``alias`` while an alias points at it, or naming
        ``version`` for the model's only version (delete the model)."""
        if isinstance(version, str) or int(version) != version:
            raise ValueError("delete_version takes a version number, not an alias")
        self.request("DELETE", self._model_path(name, "/versions/%d" % int(version)))

    def audit(self, *, limit=None, before=None, after=None, model=None, key=None, since=None):
        """``GET /v1/audit``: one page of the audit trail of writes (who,
        when, route, model, version, outcome, request id), newest first, or
        oldest first with ``after`` (0: from the oldest).  ``since`` is an
        RFC 3339 date-time (a ``datetime`` with a time zone is formatted).
        Returns ``{"entries": [...], "next": cursor or None}``: pass ``next``
        back as ``before`` (or ``after``) for the following page."""
        if since is not None and hasattr(since, "isoformat"):
            since = since.isoformat()
        query = {"limit": limit, "before": before, "after": after, "model": model, "key": key,
                 "since": since}
        return self.request("GET", "/v1/audit",
                            query={k: v for k, v in query.items() if v is not None}).json()

    def export_model(self, name, version=None, path=None):
        """``GET /v1/models/{name}/versions/{version}/export``: the portable
        model file (docs/design/model-file.md: a safetensors container,
        ``application/vnd.gpserve.model``) as bytes, exactly as the daemon
        wrote them (its SHA-256 covers them).  The latest version when
        ``version`` is None; a number or an alias.  With ``path``, the bytes are also written to
        that file (``safetensors.numpy.load_file`` or numpy read it)."""
        if version is None:
            version = self.get_model(name)["version"]
        data = self.request("GET", self._model_path(
            name, "/versions/" + _version_segment(version) + "/export")).body
        if path is not None:
            with open(path, "wb") as f:
                f.write(data)
        return data

    def import_model(self, model_file, name=None):
        """``POST /v1/models/import``: store a model file (bytes, or the path
        of a file written by :meth:`export_model`) as a new version of
        ``name`` (default: the name it was exported under); returns the new
        version's model JSON.  A damaged, altered or newer-format file, or one
        of a method the daemon lacks, raises the 422 error naming the field."""
        if isinstance(model_file, (bytes, bytearray)):
            data = bytes(model_file)
        else:
            with open(model_file, "rb") as f:
                data = f.read()
        path = "/v1/models/import"
        if name is not None:
            path += "?" + urllib.parse.urlencode({"name": str(name)})
        return self.request("POST", path, body=data,
                            content_type="application/vnd.gpserve.model").json()
    # ------------------------------------------------------------ data sets
    # Named tables of numbers in the daemon's store (docs/design/api.md, "Data
    # sets"); a fit names one with data={"dataset": name, "target": column}.

    @staticmethod
    def _dataset_path(name):
        return "/v1/datasets/" + urllib.parse.quote(str(name), safe="")

    def upload_dataset(self, name, data, *, content_type=None, timeout=None):
        """``PUT /v1/datasets/{name}``: upload a data set, streamed from
        ``data`` (the path of a file, a binary or text file object, bytes, or
        a str of CSV text, i.e. one holding a line end): CSV (a header row of column names, then rows of numbers) or
        JSON lines (``content_type="application/x-ndjson"``, the default for
        a path ending in .ndjson or .jsonl).  A file is sent as it is read,
        never whole in memory.  Returns the data set (rows, columns with
        their statistics, sha256); one of the name is replaced.  A refused
        row or cell raises InvalidData naming it (field ``rows[i].COLUMN``),
        the quota InsufficientStorage; nothing of a refused upload is kept."""
        if isinstance(data, (str, os.PathLike)) and not (isinstance(data, str) and "\n" in data):
            path = os.fspath(data)
            if content_type is None:
                content_type = ("application/x-ndjson"
                                if path.endswith((".ndjson", ".jsonl")) else "text/csv")
            with open(path, "rb") as f:
                return self.request("PUT", self._dataset_path(name), body=f,
                                    content_type=content_type, timeout=timeout).json()
        return self.request("PUT", self._dataset_path(name), body=data,
                            content_type=content_type or "text/csv", timeout=timeout).json()

    def get_dataset(self, name):
        """``GET /v1/datasets/{name}``: rows, columns with count, mean, sd,
        min and max, sha256, bytes, created_at and created_by."""
        return self._get(self._dataset_path(name))

    def list_datasets(self):
        """``GET /v1/datasets``: every data set (its columns' names only)."""
        return self._get("/v1/datasets")["datasets"]

    def delete_dataset(self, name):
        """``DELETE /v1/datasets/{name}``; Conflict (409) while a queued or
        running job or a fit uses it."""
        self.request("DELETE", self._dataset_path(name))

    @staticmethod
    def dataset_ref(dataset, target, columns=None, sample=None, seed=0):
        """The ``data`` field of a fit that names a data set: ``columns``
        (default every column but the target) and a seeded subsample of
        ``sample`` rows (default every row)."""
        ref = {"dataset": dataset, "target": target}
        if columns is not None:
            ref["columns"] = list(columns)
        if sample is not None:
            ref["rows"] = {"sample": int(sample), "seed": int(seed)}
        return ref

    # ------------------------------------------------------------ aliases
    # Movable labels of a model's versions; every ``version=`` of this client
    # (get_model, predict, sample, observe) takes an alias as well.

    def _alias_path(self, name, alias):
        return self._model_path(name, "/aliases/" + urllib.parse.quote(str(alias), safe=""))

    def set_alias(self, name, alias, version):
        """``PUT /v1/models/{name}/aliases/{alias}``: point ``alias`` at
        ``version`` (a number, or another alias: promote what it points at);
        returns ``{name, alias, version, updated_at, updated_by}``."""
        version = version if isinstance(version, str) else int(version)
        return self.request("PUT", self._alias_path(name, alias),
                            body={"version": version}).json()

    def get_alias(self, name, alias):
        """``GET /v1/models/{name}/aliases/{alias}``."""
        return self._get(self._alias_path(name, alias))

    def list_aliases(self, name):
        """``GET /v1/models/{name}/aliases``: a list of ``{alias, version,
        updated_at, updated_by}``, by alias."""
        return self._get(self._model_path(name, "/aliases"))["aliases"]

    def delete_alias(self, name, alias):
        """``DELETE /v1/models/{name}/aliases/{alias}`` (the version stays)."""
        self.request("DELETE", self._alias_path(name, alias))

    # ------------------------------------------------------------ serving

    def predict(self, name, X, *, version=None, include_noise=None, full_covariance=None,
                quantiles=None, components=None, timeout=None, **fields):
        """``POST /v1/models/{name}/predict``: ``mean``, ``variance`` and,
        when asked, ``covariance``, ``quantiles`` (keyed by the level as the
        daemon writes it, e.g. ``"0.05"``), ``components``; non-Gaussian
        likelihoods add ``probability``, ``latent_mean``, ... (see the API).
        A DataFrame (``X.columns``) is sent as named rows, matched by the
        model's feature_names."""
        key, points = named_points(X)
        body = _drop_none(dict({key: points}, version=version, include_noise=include_noise,
                               full_covariance=full_covariance, quantiles=to_plain(quantiles),
                               components=components, **fields))
        return self._post(self._model_path(name, "/predict"), body, timeout=timeout)

    def sample(self, name, X, *, n_samples=None, seed=None, version=None, include_noise=None,
               observations=None, timeout=None, **fields):
        """``POST /v1/models/{name}/sample``: ``samples``, one list of
        values over the points per draw (the same seed, the same draws).
        A DataFrame is sent as named rows, as ``predict`` does."""
        key, points = named_points(X)
        body = _drop_none(dict({key: points}, n_samples=n_samples, seed=seed, version=version,
                               include_noise=include_noise, observations=observations,
                               **fields))
        return self._post(self._model_path(name, "/sample"), body, timeout=timeout)

    def observe(self, name, X, y, *, version=None, new_version=None, timeout=None,
                idempotency_key=None, noise=None):
        """``POST /v1/models/{name}/observe``: add rows to a model that
        learns online (exact, ssgp, rfgp); ``{name, version, n, state,
        observations}``.  ``noise``: the rows' known noise variances (a
        model fitted with per-point noise needs them).  With
        ``idempotency_key``, a retry (say after a lost answer) adds the rows
        once and answers the first answer.  NaN in ``y`` is a missing output
        (coregionalised exact models).  A DataFrame is sent as named rows."""
        key, points = named_points(X)
        body = _drop_none(dict({key: points}, y=missing_to_null(y), version=version,
                               new_version=new_version, noise=to_plain(noise)))
        return self._post(self._model_path(name, "/observe"), body, timeout=timeout,
                          idempotency_key=idempotency_key)
