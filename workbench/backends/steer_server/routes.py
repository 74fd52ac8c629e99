"""The steering server's abstainer routes: a FastAPI router on vLLM's app.

``GET /v1/abstainers``
    the registered abstainers (name, digest, mode, whether gated).
``GET /v1/abstainers/NAME``
    one of them.
``POST /v1/abstainers``
    register an abstainer (a :class:`~workbench.steering.spec.SteerSpec` as JSON), checked
    against the served model and kept in the registry. A name registered with other content is
    a 409 unless the request says ``?replace=true`` (the replacement is logged); the same
    content again is a no-op.
``POST /v1/abstainers/fit``
    fit one on the served model from question lists alone (:class:`FitRequest`): its
    activations are read inside vLLM through the server's own completions route
    (:func:`workbench.steering.fit.fit_from_questions` on a :class:`~.served.ServedModel`),
    and it is registered as above (409 for a taken name unless ``?replace=true``).
``DELETE /v1/abstainers/NAME``
    forget one.

Every route needs the API key (``Authorization: Bearer KEY``) when the server has one, and
answers its errors in vLLM's shape (:mod:`.errors`) with one line: a body that fails its model
is a 400 naming the field, not vLLM's list of pydantic's errors. The middleware
(:mod:`.intercept`) mounts the router and shares its state through
``app.state.workbench_steering``.
"""

import asyncio
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, model_validator

from workbench.backends.steer_server.errors import ErrorResponse, Reply, error, unauthorized
from workbench.backends.steer_server.served import ServedModel
from workbench.backends.steer_server.server import SteeringServer
from workbench.backends.steer_server.store import log, safe_name
from workbench.errors import ConfigError
from workbench.settings import invalid
from workbench.steering.fit import FitSettings, fit_from_questions
from workbench.steering.spec import SteerSpec

#: the most prompts one fit may send through the engine (captures and answers together)
FIT_MAX_PROMPTS = 4000


def _problem(e: RequestValidationError, route: str) -> str:
    """pydantic's first error as one line (a check of ours says it in its own words)."""
    first = e.errors()[0]
    what = "a steering spec" if route == "register" else "the request"
    if first["type"] == "workbench":
        return first["msg"]
    if first["type"] == "json_invalid":
        return f"{what} is not JSON ({first.get('ctx', {}).get('error', 'malformed')})"
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query"))
    why = f"'{where}': {first['msg']}" if where else first["msg"]
    return f"{what} is malformed ({why})"


def _answer(reply: Reply) -> JSONResponse:
    return JSONResponse(reply.body, status_code=reply.status)


class _Route(APIRoute):
    """A route that reads its body as JSON and answers its own errors in vLLM's shape, each
    one line: a :class:`Reply` as it is, a request failing its model or a setting as a 400
    (vLLM's handlers would list pydantic's errors, and name none of ours)."""

    def get_route_handler(self):
        handler = super().get_route_handler()
        name = self.name

        async def answer(request: Request):
            # every body here is JSON, whatever the client's Content-Type says (``curl -d``
            # sends a form's): read as JSON, as these routes always read it
            scope = request.scope
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
            scope["headers"] = [*headers, (b"content-type", b"application/json")]
            try:
                return await handler(request)
            except Reply as reply:
                return _answer(reply)
            except RequestValidationError as e:
                return _answer(error(400, _problem(e, name)))
            except ConfigError as e:
                return _answer(error(400, str(e)))

        return answer


def _server(request: Request) -> SteeringServer:
    """The server's state, for a request that carries its API key."""
    server = getattr(request.app.state, "workbench_steering", None)
    if server is None:
        raise error(500, "the steering middleware is not loaded (serve --steering loads it)")
    if not server.authorized(request.scope):
        raise unauthorized()
    return server


Server = Annotated[SteeringServer, Depends(_server)]

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "one line naming what is wrong"},
    401: {"model": ErrorResponse, "description": "the server's API key is missing or wrong"},
}
router = APIRouter(
    prefix="/v1/abstainers", tags=["steering"], route_class=_Route, responses=_ERRORS
)


# -- the models ------------------------------------------------------------------------------------
class GateBody(BaseModel):
    """A spec's gate as JSON (:class:`~workbench.steering.spec.GateSpec`)."""

    layers: list[int]
    vectors: list[list[float]]
    means: list[list[float]]
    thresholds: list[float]
    aggregate: str = "all"
    inclusive: bool = False
    final_norm: bool = False


class SpecBody(BaseModel):
    """A :class:`~workbench.steering.spec.SteerSpec` as JSON (its ``to_dict``); every check
    of a spec runs on it before it reaches a worker or the registry."""

    name: str
    layers: list[int]
    vectors: list[list[float]]
    strength: float
    gate: GateBody | None = None
    mode: str = "separate"


class Summary(BaseModel):
    """A registered abstainer."""

    name: str
    digest: str
    mode: str
    gated: bool


class Listed(BaseModel):
    abstainers: list[Summary]


class Registered(BaseModel):
    name: str
    digest: str


class Deleted(BaseModel):
    deleted: str


class FittedGate(BaseModel):
    layers: list[int]
    thresholds: list[float]
    aggregate: str


class Fitted(BaseModel):
    """A fitted abstainer, registered: its digest, layers, strength, mode and gate."""

    name: str
    digest: str
    layers: list[int]
    strength: float
    mode: str
    gate: FittedGate | None


class FitValidation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    related: list[str]
    unrelated: list[str]


def _questions(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(q, str) and q.strip() for q in value):
        raise invalid(f"'{field}' must be a list of questions (non-empty strings)")
    return list(value)


class FitRequest(BaseModel):
    """What ``POST /v1/abstainers/fit`` takes. Without ``validation``, every third question
    of ``related`` and ``unrelated`` is held out for the thresholds; without
    ``refusal_questions``, the training questions serve; ``params``: the steering technique's
    (:class:`~workbench.steering.fit.FitSettings`); ``system``: a system prompt."""

    model_config = ConfigDict(extra="forbid")

    model: str
    name: str
    related: list[str]
    unrelated: list[str]
    validation: FitValidation | None = None
    refusal_questions: list[str] | None = None
    params: dict[str, Any] = {}
    system: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        """Each fault one line naming the field (these checks' words, before the types')."""
        if not isinstance(data, dict):
            raise invalid("the fit request must be a JSON object")
        unknown = set(data) - set(cls.model_fields)
        if unknown:
            raise invalid(
                f"unknown field(s) {', '.join(sorted(unknown))}; a fit takes "
                + ", ".join(sorted(cls.model_fields))
            )
        for field in ("model", "name"):
            if not isinstance(data.get(field), str) or not data[field]:
                raise invalid(f"'{field}' must be a non-empty string")
        if not safe_name(data["name"]) or data["name"] == "fit":
            raise invalid(f"'name' {data['name']!r} cannot name an abstainer")
        _questions(data.get("related"), "related")
        _questions(data.get("unrelated"), "unrelated")
        validation = data.get("validation")
        if isinstance(validation, dict) and set(validation) <= {"related", "unrelated"}:
            _questions(validation.get("related"), "validation.related")
            _questions(validation.get("unrelated"), "validation.unrelated")
        elif validation is not None:
            raise invalid('\'validation\' must be {"related": [...], "unrelated": [...]}')
        if data.get("refusal_questions") is not None:
            _questions(data["refusal_questions"], "refusal_questions")
        if not isinstance(data.get("params", {}), dict):
            raise invalid("'params' must be an object of the steering technique's parameters")
        system = data.get("system")
        if system is not None and not isinstance(system, str):
            raise invalid("'system' must be a string (a system prompt)")
        return data

    @model_validator(mode="after")
    def _size(self) -> "FitRequest":
        total = sum(map(len, self.lists()[:4])) + 3 * len(self.lists()[4])
        if total > FIT_MAX_PROMPTS:
            raise invalid(f"the fit would send {total} prompts; at most {FIT_MAX_PROMPTS}")
        return self

    def lists(self) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
        """related, unrelated, their validation halves and the refusal questions."""
        related, unrelated = self.related, self.unrelated
        if self.validation is None:
            val_related = [q for i, q in enumerate(related) if i % 3 == 2]
            val_unrelated = [q for i, q in enumerate(unrelated) if i % 3 == 2]
            related = [q for i, q in enumerate(related) if i % 3 != 2]
            unrelated = [q for i, q in enumerate(unrelated) if i % 3 != 2]
        else:
            val_related, val_unrelated = self.validation.related, self.validation.unrelated
        refusal = self.refusal_questions
        return (
            related,
            unrelated,
            val_related,
            val_unrelated,
            ((related + unrelated)[:48] if refusal is None else refusal),
        )

    def settings(self) -> FitSettings:
        """``params`` as the fit's settings; a 400 naming a setting that is not one."""
        known = list(FitSettings.field_names())
        unknown = sorted(set(self.params) - set(known))
        if unknown:
            raise error(
                400, f"'params' has no setting {unknown[0]!r}; a fit takes {', '.join(known)}"
            )
        settings: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in self.params.items()
        }
        try:
            return FitSettings(**settings)
        except ConfigError as e:
            raise error(400, f"'params': {e}") from None


# -- the routes ------------------------------------------------------------------------------------
def _summary(name: str, spec: SteerSpec) -> Summary:
    return Summary(name=name, digest=spec.digest(), mode=spec.mode, gated=spec.gate is not None)


@router.get("", response_model=Listed, summary="The registered abstainers")
async def list_abstainers(server: Server) -> Listed:
    specs = server.store.specs() if server.store else {}
    return Listed(abstainers=[_summary(n, s) for n, s in specs.items()])


_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "no abstainer of that name"}
}
_TAKEN: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorResponse, "description": "the name is taken (ask ?replace=true)"}
}


@router.get("/{name}", response_model=Summary, responses=_NOT_FOUND, summary="One abstainer")
async def get_abstainer(name: str, server: Server) -> Summary:
    spec = server.store.load(name) if server.store else None
    if spec is None:
        raise error(404, f"no abstainer {name!r} is registered")
    return _summary(name, spec)


@router.post("", response_model=Registered, responses=_TAKEN, summary="Register an abstainer")
async def register(
    body: SpecBody, server: Server, request: Request, replace: bool = False
) -> Registered:
    store = server.require_store()
    spec = SteerSpec.from_dict(body.model_dump())
    old = store.load(spec.name)
    if old is not None and old.digest() != spec.digest() and not replace:
        raise error(
            409,
            f"abstainer {spec.name!r} is registered with other content (digest "
            f"{old.digest()}); POST to /v1/abstainers?replace=true to replace it",
        )
    digest = await server.register(request.app.state.engine_client, spec)
    store.save(spec)
    if old is not None and old.digest() != spec.digest():
        log(f"abstainer {spec.name!r} replaced: digest {old.digest()} -> {digest}")
    return Registered(name=spec.name, digest=digest)


@router.post(
    "/fit", response_model=Fitted, responses=_TAKEN, summary="Fit an abstainer on the model"
)
async def fit(body: FitRequest, server: Server, request: Request, replace: bool = False) -> Fitted:
    store = server.require_store()
    old = store.load(body.name)
    if old is not None and not replace:
        raise error(
            409,
            f"abstainer {body.name!r} is registered (digest {old.digest()}); POST to "
            "/v1/abstainers/fit?replace=true to replace it",
        )
    params = body.settings()
    engine = request.app.state.engine_client
    served = ServedModel(server, request.scope, body.model, asyncio.get_running_loop())
    await served.ready()
    try:
        lm = cast(Any, served)  # a back end to the fit: the calls it makes
        spec = await asyncio.to_thread(
            fit_from_questions, lm, body.name, *body.lists(), params, system=body.system
        )
    except ConfigError as e:
        raise error(400, str(e)) from None
    digest = await server.register(engine, spec)
    store.save(spec)
    log(
        f"abstainer {spec.name!r} fitted from {served.asked} prompts"
        + (f"; replaced digest {old.digest()}" if old is not None else "")
    )
    gate = spec.gate
    return Fitted(
        name=spec.name,
        digest=digest,
        layers=list(spec.layers),
        strength=spec.strength,
        mode=spec.mode,
        gate=None
        if gate is None
        else FittedGate(
            layers=list(gate.layers), thresholds=list(gate.thresholds), aggregate=gate.aggregate
        ),
    )


@router.delete("/{name}", response_model=Deleted, responses=_NOT_FOUND, summary="Forget one")
async def delete_abstainer(name: str, server: Server) -> Deleted:
    if server.store is None or not server.store.delete(name):
        raise error(404, f"no abstainer {name!r} is registered")
    log(f"abstainer {name!r} deleted")
    return Deleted(deleted=name)
