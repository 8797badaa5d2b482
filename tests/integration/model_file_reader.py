#!/usr/bin/python3
"""An independent reader of gpserve's model file (docs/design/model-file.md):
numpy, hashlib, json and struct only, no gpserve code. The integration area
model_file runs it on an exported exact rbf model.

    model_file_reader.py FILE X_JSON MEAN_JSON

Checks the container (8-byte header length, JSON header, F64 arrays tiling
the bytes after it), the checksum (SHA-256 of the file with its own 64 hex
digits read as '0's), the arrays against the values the model JSON reports,
and reproduces the predictive mean at X_JSON (rows of inputs) to 1e-9 of
MEAN_JSON (the daemon's answer; a different summation order
leaves a few 1e-12 here). Loads it with safetensors.numpy as well
when that is installed. Prints what it checked; exit 1 on any mismatch."""
import hashlib
import json
import struct
import sys

import numpy as np


def fail(msg):
    print("model_file_reader: FAIL: " + msg)
    sys.exit(1)


path, x_json, mean_json = sys.argv[1:4]
b = open(path, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
meta = header.pop("__metadata__")
if meta["format"] != "gpserve-model" or meta["format_version"] != "1":
    fail("format %r version %r" % (meta["format"], meta["format_version"]))
if (8 + n) % 8:
    fail("the arrays do not start 8-aligned")

# the checksum, streamed: the file with the value's 64 digits read as '0's
want = meta["sha256"]
at = 8 + b[8:8 + n].index(want.encode())
h = hashlib.sha256()
h.update(b[:at])
h.update(b"0" * 64)
h.update(b[at + 64:])
if h.hexdigest() != want:
    fail("sha256 %s, the file says %s" % (h.hexdigest(), want))

# the arrays: float64, their ranges tiling the rest of the file
data = b[8 + n:]
end = 0
arrays = {}
for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    lo, hi = t["data_offsets"]
    if t["dtype"] != "F64" or lo != end or hi - lo != 8 * int(np.prod(t["shape"])):
        fail("array %s: %r" % (name, t))
    arrays[name] = np.frombuffer(data, "<f8", (hi - lo) // 8, lo).reshape(t["shape"])
    end = hi
if end != len(data):
    fail("the arrays cover %d of %d bytes" % (end, len(data)))

model = json.loads(meta["model"])
info = model["info"]
st = info["standardization"]
if model["method"] != "exact" or info["kernel"]["type"] != "rbf":
    fail("expected an exact rbf model, got %s %s" % (model["method"], info["kernel"]["type"]))
# the arrays hold what the model JSON reports (same doubles)
X = arrays["X_train"]  # shape [cols, rows] of gpserve's d x n: n x d here
if X.shape != (model["n_train"], model["input_dim"]):
    fail("X_train is %r for %d rows of %d" % (X.shape, model["n_train"], model["input_dim"]))
if arrays["x_mean"].ravel().tolist() != st["x_mean"] or \
        arrays["x_scale"].ravel().tolist() != st["x_scale"] or \
        arrays["y_stats"].ravel().tolist() != [st["y_mean"], st["y_scale"]] or \
        arrays["noise_variance"].item() != info["noise_variance"]:
    fail("the arrays differ from the model JSON's standardization or noise")

# the predictive mean: y_mean + y_scale * k(z, X_train) @ alpha, z the
# standardized input (X_train is kept standardized)
Xs = np.array(json.loads(x_json), dtype=float)
z = (Xs - np.array(st["x_mean"])) / np.array(st["x_scale"])
ls = np.array(info["kernel"]["lengthscale"])
d2 = (((z[:, None, :] - X[None, :, :]) / ls) ** 2).sum(-1)
K = info["kernel"]["variance"] * np.exp(-0.5 * d2)
mean = st["y_mean"] + st["y_scale"] * (K @ arrays["alpha"].ravel())
want_mean = np.array(json.loads(mean_json), dtype=float)
err = np.max(np.abs(mean - want_mean) / np.maximum(1.0, np.abs(want_mean)))
if not err < 1e-9:
    fail("predictive mean %r, the daemon said %r (error %g)" % (mean, want_mean, err))
print("model_file_reader: sha256 ok, %d arrays tile %d bytes, predictive mean at %d points "
      "within %.1e of the daemon's" % (len(arrays), len(data), len(Xs), err))

try:
    import safetensors.numpy
except ImportError:
    print("model_file_reader: safetensors is not installed: skipped loading it with "
          "safetensors.numpy")
    sys.exit(0)
loaded = safetensors.numpy.load(b)
for name, a in arrays.items():
    if not np.array_equal(loaded[name], a):
        fail("safetensors.numpy reads %s differently" % name)
print("model_file_reader: safetensors.numpy loads the same %d arrays" % len(loaded))
