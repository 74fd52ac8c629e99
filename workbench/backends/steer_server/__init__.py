"""Conditional steering through vLLM's OpenAI-compatible server (``serve --steering``).

vLLM loads :class:`SteeringMiddleware` with ``--middleware`` (its workers carry
:mod:`workbench.backends.vllm_steering`); one module per job:

- :mod:`.routes`: the abstainer routes (``GET``/``POST /v1/abstainers``, ``GET``/``DELETE
  /v1/abstainers/NAME``, ``POST /v1/abstainers/fit``), a FastAPI router with pydantic request
  and response models that the middleware mounts on vLLM's app, so vLLM's ``/openapi.json``
  lists them;
- :mod:`.intercept`: completions that carry ``steering`` (``{"abstainer": NAME}`` or
  ``{"spec": {...}}``, optionally ``gate_prompt`` or ``decision``), raw ASGI where the answer
  is held until its gate decided, aborted and sent again steered, and annotated with
  ``"steering": {"abstainer", "fired", "votes", "similarities"}`` and the header
  ``x-workbench-steering``; :mod:`.asgi` holds its pieces;
- :mod:`.served`: the served model as the fit reads it (activations inside vLLM, greedy
  answers, through vLLM's own completions route);
- :mod:`.server`: the state the routes and the interception share (the key, the workers'
  registrations, the model's shape, the gates' votes); :mod:`.store`: the registry on disk;
  :mod:`.errors`: vLLM's error shape.

Any OpenAI client asks for steering with ``extra_body={"steering": {"abstainer": "river"}}``. A
request naming an unknown abstainer is a 400 with one line; the others are unaffected.

Every spec is checked at the door, whatever brings it (registration, an inline spec, a file in
the registry): :class:`~workbench.steering.spec.SteerSpec` checks shapes, finite values and
enumerations, :meth:`~workbench.steering.spec.SteerSpec.check_model` the width and layers
against the served model; a bad one is a 400 naming the field and never reaches a worker or the
registry. A registry file that does not read as a spec is skipped with one warning. An extreme
(finite) strength is served, and the answer's steering record carries a ``warnings`` line. A
steered request whose activations still become non-finite fails alone (422; a stream ends with
an error event); the others' answers are untouched (:mod:`workbench.backends.vllm_steering`).

With an API key (``VLLM_API_KEY``, which ``serve --api-key`` sets), everything the steering
server answers or steers needs ``Authorization: Bearer KEY`` as vLLM's own routes do:
registering changes what other clients' requests do.
"""

from workbench.backends.steer_server.asgi import HEADER
from workbench.backends.steer_server.intercept import ROUTES, SteeringMiddleware
from workbench.backends.steer_server.server import SteeringServer
from workbench.backends.steer_server.store import REGISTRY_ENV, AbstainerStore, default_registry

#: what ``serve --steering`` hands vLLM's ``--middleware``
MIDDLEWARE = "workbench.backends.steer_server.SteeringMiddleware"

__all__ = [
    "HEADER",
    "MIDDLEWARE",
    "REGISTRY_ENV",
    "ROUTES",
    "AbstainerStore",
    "SteeringMiddleware",
    "SteeringServer",
    "default_registry",
]
