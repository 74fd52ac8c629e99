"""vLLM's error shape for the answers the steering server gives itself.

``{"error": {"message", "type", "param", "code"}}``: vLLM's own
:class:`ErrorResponse` and :class:`ErrorInfo` where vLLM is installed (the server), a pydantic
model of the same shape elsewhere (the main environment's tests). :class:`Reply` carries one
such answer out of the routes, the interception or the served model; :func:`error` builds it.
"""

from __future__ import annotations

from pydantic import BaseModel

try:
    from vllm.entrypoints.serve.engine.protocol import ErrorInfo, ErrorResponse
except ImportError:  # no vLLM here: the same shape

    class ErrorInfo(BaseModel):  # type: ignore[no-redef]
        message: str
        type: str
        param: str | None = None
        code: int

    class ErrorResponse(BaseModel):  # type: ignore[no-redef]
        error: ErrorInfo


#: the error type vLLM names each status by
KINDS = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    409: "ConflictError",
    422: "UnprocessableEntityError",
}


class Reply(Exception):
    """An answer the server gives itself (status, JSON body in vLLM's error shape)."""

    def __init__(self, status: int, body: dict):
        super().__init__(status)
        self.status, self.body = status, body


def error(status: int, message: str) -> Reply:
    """The answer ``status`` with ``message``; a 5xx says where its cause was logged."""
    if status >= 500:
        message += " (the cause is in the server's log: stderr, or serve's --log-file)"
    info = ErrorInfo(message=message, type=KINDS.get(status, "Error"), param=None, code=status)
    return Reply(status, ErrorResponse(error=info).model_dump())


def unauthorized() -> Reply:
    return error(401, "this server needs its API key (Authorization: Bearer KEY)")
