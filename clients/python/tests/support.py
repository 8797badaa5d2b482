"""What the tests share: the daemon under test, an HTTP path independent of
the client (urllib) to compare it with, test data and unique model names.

Environment:
  GPSERVE_URL        the daemon (required; every test skips without it)
  GPSERVE_AUTH_URL   a daemon started with --api-key-file (the auth tests)
  GPSERVE_API_KEY    its key
"""

import json
import math
import os
import sys
import unittest
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
if PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, PACKAGE_ROOT)

URL = os.environ.get("GPSERVE_URL", "").rstrip("/")
AUTH_URL = os.environ.get("GPSERVE_AUTH_URL", "").rstrip("/")
API_KEY = os.environ.get("GPSERVE_API_KEY", "")

try:
    import numpy as np
except ImportError:
    np = None
try:
    import sklearn  # noqa: F401
    HAVE_SKLEARN = True
except ImportError:
    HAVE_SKLEARN = False

need_daemon = unittest.skipUnless(URL, "GPSERVE_URL is not set (the URL of a running gpserve)")
need_numpy = unittest.skipUnless(np is not None, "numpy is not importable")
need_sklearn = unittest.skipUnless(HAVE_SKLEARN, "scikit-learn is not importable")
need_auth = unittest.skipUnless(AUTH_URL and API_KEY,
                                "GPSERVE_AUTH_URL and GPSERVE_API_KEY are not set")

# The urllib opener ignores proxies: the daemon is local.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def unique(prefix):
    """A model name no other test uses."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:12])


def raw(method, path, body=None, url=None, key=None):
    """One request with urllib, not through the client: (status, parsed JSON
    or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request((url or URL) + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with _OPENER.open(req, timeout=60) as resp:
            text = resp.read()
            return resp.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as err:
        text = err.read()
        return err.code, (json.loads(text) if text else None)


def raw_ok(method, path, body=None, url=None, key=None):
    status, answer = raw(method, path, body, url, key)
    if not 200 <= status < 300:
        raise AssertionError("%s %s answered %s: %s" % (method, path, status, answer))
    return answer


# sin(x) on 21 points of [0, 5], one column (the suite's "sine" data).
SINE_X = [[0.25 * i] for i in range(21)]
SINE_Y = [round(math.sin(0.25 * i), 4) for i in range(21)]
TEST_X = [[0.1], [1.3], [2.7], [4.9], [6.0]]


def plane(n=40, seed=11):
    """n points of a smooth function of 2 inputs with a little noise."""
    import random
    rng = random.Random(seed)
    X = [[rng.uniform(-2, 2), rng.uniform(-2, 2)] for _ in range(n)]
    y = [math.sin(a) + math.sin(2 * b) + 0.05 * rng.uniform(-1, 1) for a, b in X]
    return X, y


def labels(n=40, seed=5):
    """n points of one input with 0/1 labels, mostly 1 above 2.5."""
    import random
    rng = random.Random(seed)
    X = [[5.0 * i / (n - 1)] for i in range(n)]
    y = [1 if (x[0] > 2.5) != (rng.random() < 0.15) else 0 for x in X]
    return X, y


def long_fit_data():
    """An async exact fit of 3000 x 4 points that runs for a long time (the
    optimiser's tolerance cannot be met), for cancellation."""
    import random
    rng = random.Random(17)
    X = [[round(rng.uniform(-2, 2), 5) for _ in range(4)] for _ in range(3000)]
    y = [round(sum(math.sin((j + 1) * v) for j, v in enumerate(row)), 5) for row in X]
    return X, y, {"max_iterations": 100000, "tolerance": 1e-16}
