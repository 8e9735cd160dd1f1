"""The exceptions the client raises."""


class TesseraError(Exception):
    """Something the API refused, or that kept a call from completing.

    ``message`` is what went wrong in words a person can act on: the API's
    own ``error.message`` when the manager answered with one. ``status`` is
    the HTTP status (``None`` when no answer came: the manager could not be
    reached, the configuration is incomplete), ``code`` the API's error code
    (``"invalid_argument"``, ``"not_found"``, ``"conflict"``...; ``None``
    when there is none), ``body`` the error object as the API sent it.
    """

    def __init__(self, message, status=None, code=None, body=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body
        # The Session a wait was for (Session.wait, create(wait=True)).
        self.session = None

    def __str__(self):
        return self.message

    def __repr__(self):
        return "%s(%r, status=%r, code=%r)" % (type(self).__name__, self.message, self.status, self.code)


class ConfigError(TesseraError):
    """The configuration cannot be read or lacks the endpoint or a key."""


class WaitTimeout(TesseraError):
    """A wait ran out of time; what was waited for may still happen."""
