"""The web app: Storm UI's REST API (squall.ui.views builds the documents), /metrics for
Prometheus, and the page (plain HTML/JS/SVG files from squall/ui/static, no build step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from squall.observe.windows import parse_window
from squall.ui import views
from squall.ui.prom import metrics_text

STATIC = Path(__file__).with_name("static")


class Watched(Protocol):
    """What the UI needs of a cluster (LocalCluster has it)."""

    def topology_names(self) -> list[str]: ...
    def coordinator(self, name: str) -> Any: ...
    def started_at(self, name: str) -> float: ...
    def activate(self, name: str) -> None: ...
    def deactivate(self, name: str) -> None: ...
    def kill_topology(self, name: str, wait_secs: float = 0) -> None: ...


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


class _Api:
    """The request handlers, over one cluster."""

    def __init__(self, cluster: Watched):
        self.cluster = cluster

    def lookup(self, name: str) -> Any:
        names = self.cluster.topology_names()
        if name not in names:
            raise views.NotFound(f"no topology {name!r} is running; running: {names}")
        return self.cluster.coordinator(name)

    @staticmethod
    def window_of(request: Request) -> str:
        try:
            return parse_window(request.query_params.get("window"))
        except ValueError as e:
            raise views.BadRequest(str(e)) from None

    def summary(self, request: Request) -> JSONResponse:
        out = []
        for name in self.cluster.topology_names():
            try:
                out.append(views.summary_entry(name, self.cluster.coordinator(name), self.cluster.started_at(name)))
            except KeyError:  # killed meanwhile
                continue
        return JSONResponse({"topologies": out})

    def topology(self, request: Request) -> JSONResponse:
        name = request.path_params["id"]
        coord = self.lookup(name)
        return JSONResponse(views.topology_page(name, coord, self.cluster.started_at(name), self.window_of(request)))

    def component(self, request: Request) -> JSONResponse:
        name = request.path_params["id"]
        coord = self.lookup(name)
        return JSONResponse(views.component_page(name, coord, request.path_params["component"],
                                                 self.window_of(request)))

    def action(self, request: Request) -> JSONResponse:
        name, what = request.path_params["id"], request.path_params["action"]
        self.lookup(name)
        ops = {"activate": self.cluster.activate, "deactivate": self.cluster.deactivate,
               "kill": self.cluster.kill_topology}
        if what not in ops:
            return _error(404, f"unknown action {what!r}: use activate, deactivate or kill")
        ops[what](name)
        return JSONResponse({"topologyOperation": what, "topologyId": name, "status": "success"})

    def metrics(self, request: Request) -> Response:
        body, content_type = metrics_text(self.cluster)
        return Response(body, media_type=content_type)

    @staticmethod
    def page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    return _error(404, str(exc).strip("'\""))


async def _bad_request(request: Request, exc: Exception) -> JSONResponse:
    return _error(400, str(exc))


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return _error(exc.status_code, exc.detail or "error")


def create_app(cluster: Watched) -> Starlette:
    """The ASGI app serving `cluster`'s topologies."""
    api = _Api(cluster)
    routes = [
        Route("/", api.page),
        Route("/api/v1/topology/summary", api.summary),
        Route("/api/v1/topology/{id}", api.topology),
        Route("/api/v1/topology/{id}/component/{component}", api.component),
        Route("/api/v1/topology/{id}/{action}", api.action, methods=["POST"]),
        Route("/metrics", api.metrics),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={
        views.NotFound: _not_found, views.BadRequest: _bad_request, HTTPException: _http_error})
