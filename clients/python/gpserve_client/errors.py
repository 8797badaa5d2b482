"""Typed exceptions for gpserve's error catalogue.

Every error the daemon sends has the shape
``{"error": {"code": "...", "message": "...", "field": "..."}}``; the client
raises the subclass of :class:`GPServeError` named after its code (the
catalogue is ``GP_ERROR_CATALOGUE`` in ``core/base/error.h`` and the table in
``docs/design/api.md``).  Failures below HTTP (connection refused, a socket
timeout) raise :class:`TransportError`.
"""

__all__ = [
    "GPServeError", "TransportError", "TransportTimeout", "JobTimeout",
    "InvalidArgument", "Overloaded", "InvalidData", "NotPositiveDefinite",
    "PayloadTooLarge", "Unsupported", "Cancelled", "Internal", "NotFound",
    "Conflict", "NotReady", "Unauthorized", "UnsupportedMediaType",
    "MethodNotAllowed", "MalformedJson", "InsufficientStorage",
    "MalformedRequest", "RequestTimeout", "UriTooLong", "HeaderTooLarge",
    "HttpVersionNotSupported", "Interrupted", "ModelNotFinite", "Forbidden",
    "ERROR_CLASSES", "error_from_body",
]


class GPServeError(Exception):
    """An error answered by the daemon (or, for subclasses of
    TransportError, met on the way to it).

    Attributes: ``code`` (the catalogue's code, e.g. ``"invalid_data"``;
    None when the answer was not the JSON error shape), ``message``,
    ``field`` (the request field it is about, e.g. ``"X[0]"``, or None),
    ``status`` (the HTTP status; None when there was no answer, and for the
    error of a failed async job, which ``wait_job`` raises),
    ``request_id`` (the ``X-Request-Id`` the daemon logged it under),
    ``retry_after`` (seconds, from ``Retry-After``, or None) and ``job``
    (the job object when an async fit failed).
    """

    code = None

    def __init__(self, message, code=None, field=None, status=None,
                 request_id=None, retry_after=None, job=None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.field = field
        self.status = status
        self.request_id = request_id
        self.retry_after = retry_after
        self.job = job

    def __str__(self):
        parts = []
        if self.status is not None:
            parts.append(str(self.status))
        if self.code is not None:
            parts.append(self.code)
        head = " ".join(parts)
        text = "%s: %s" % (head, self.message) if head else str(self.message)
        if self.field:
            text += " (field %s)" % self.field
        return text


class TransportError(GPServeError):
    """No HTTP answer: the connection failed or broke."""


class TransportTimeout(TransportError, TimeoutError):
    """No answer within the client's timeout."""


class JobTimeout(GPServeError, TimeoutError):
    """An async job did not end within the time ``wait_job`` was given
    (the job goes on; ``job`` holds its last state)."""


def _code_class(class_name, code, doc):
    return type(class_name, (GPServeError,), {"code": code, "__doc__": doc})


# One class per code of the catalogue (two statuses share "overloaded").
InvalidArgument = _code_class("InvalidArgument", "invalid_argument",
                              "400: bad option, shape, name or value.")
Overloaded = _code_class("Overloaded", "overloaded",
                         "429 (the fit queue is full, or a rate limit is spent) or 503 (memory ran out); see retry_after.")
InvalidData = _code_class("InvalidData", "invalid_data",
                          "422: NaN/Inf in the data, or a dimension mismatch.")
NotPositiveDefinite = _code_class("NotPositiveDefinite", "not_positive_definite",
                                  "422: the covariance is not positive definite at the largest jitter.")
PayloadTooLarge = _code_class("PayloadTooLarge", "payload_too_large",
                              "413: above a configured size limit.")
Unsupported = _code_class("Unsupported", "unsupported",
                          "422: not valid for this method or kernel.")
Cancelled = _code_class("Cancelled", "cancelled",
                        "An async fit that was cancelled (raised by wait_job).")
Internal = _code_class("Internal", "internal", "500: a bug or a library failure.")
NotFound = _code_class("NotFound", "not_found", "404: unknown model, version, job or route.")
Conflict = _code_class("Conflict", "conflict",
                       "409: the resource is in a state that forbids this.")
NotReady = _code_class("NotReady", "not_ready",
                       "503: the store is not open, or the daemon is stopping.")
Unauthorized = _code_class("Unauthorized", "unauthorized",
                           "401: the API key is missing or wrong.")
Forbidden = _code_class("Forbidden", "forbidden",
                        "403: the key lacks the scope the route needs (field scope), or is "
                        "limited to other model names (field name).")
UnsupportedMediaType = _code_class("UnsupportedMediaType", "unsupported_media_type",
                                   "415: a Content-Type the route does not take.")
MethodNotAllowed = _code_class("MethodNotAllowed", "method_not_allowed",
                               "405: an HTTP verb the route does not take.")
MalformedJson = _code_class("MalformedJson", "malformed_json", "400: the body is not JSON.")
InsufficientStorage = _code_class("InsufficientStorage", "insufficient_storage",
                                  "507: the daemon's disk is full.")
MalformedRequest = _code_class("MalformedRequest", "malformed_request",
                               "400: the HTTP request itself is malformed.")
RequestTimeout = _code_class("RequestTimeout", "request_timeout",
                                  "408: the request did not arrive within --request-timeout.")
UriTooLong = _code_class("UriTooLong", "uri_too_long", "414: the request line is too long.")
HeaderTooLarge = _code_class("HeaderTooLarge", "header_too_large",
                             "431: the request line and headers are too large.")
HttpVersionNotSupported = _code_class("HttpVersionNotSupported", "http_version_not_supported",
                                      "505: an HTTP version other than 1.0 and 1.1.")
Interrupted = _code_class("Interrupted", "interrupted",
                          "An async fit whose daemon stopped during it too many times.")
ModelNotFinite = _code_class("ModelNotFinite", "model_not_finite",
                             "409: the stored version holds a non-finite number; it is not served.")

ERROR_CLASSES = {cls.code: cls for cls in (
    InvalidArgument, Overloaded, InvalidData, NotPositiveDefinite, PayloadTooLarge,
    Unsupported, Cancelled, Internal, NotFound, Conflict, NotReady, Unauthorized,
    UnsupportedMediaType, MethodNotAllowed, MalformedJson, InsufficientStorage,
    MalformedRequest, RequestTimeout, UriTooLong, HeaderTooLarge,
    HttpVersionNotSupported, Interrupted, ModelNotFinite, Forbidden)}


def error_from_body(error, status=None, request_id=None, retry_after=None, job=None):
    """The typed exception for an ``{"code", "message", "field"}`` object
    (an unknown code gives a plain GPServeError that still carries it)."""
    code = error.get("code")
    cls = ERROR_CLASSES.get(code, GPServeError)
    return cls(error.get("message", ""), code=code, field=error.get("field"),
               status=status, request_id=request_id, retry_after=retry_after, job=job)
