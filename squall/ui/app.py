"""The web app: Storm UI's REST API (squall.ui.views builds the documents), /metrics for
Prometheus, and the page (plain HTML/JS/SVG files from squall/ui/static, no build step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from starlette.applications import Starlette
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


def create_app(cluster: Watched) -> Starlette:
    """The ASGI app serving `cluster`'s topologies."""

    def lookup(name: str) -> Any:
        if name not in cluster.topology_names():
            raise views.NotFound(f"no topology {name!r} is running; running: {cluster.topology_names()}")
        return cluster.coordinator(name)

    def window_of(request: Request) -> str:
        try:
            return parse_window(request.query_params.get("window"))
        except ValueError as e:
            raise views.BadRequest(str(e)) from None

    def summary(request: Request) -> JSONResponse:
        out = []
        for name in cluster.topology_names():
            try:
                out.append(views.summary_entry(name, cluster.coordinator(name), cluster.started_at(name)))
            except KeyError:  # killed meanwhile
                continue
        return JSONResponse({"topologies": out})

    def topology(request: Request) -> JSONResponse:
        name = request.path_params["id"]
        coord = lookup(name)
        return JSONResponse(views.topology_page(name, coord, cluster.started_at(name), window_of(request)))

    def component(request: Request) -> JSONResponse:
        name = request.path_params["id"]
        coord = lookup(name)
        return JSONResponse(views.component_page(name, coord, request.path_params["component"], window_of(request)))

    def action(request: Request) -> JSONResponse:
        name, what = request.path_params["id"], request.path_params["action"]
        lookup(name)
        if what == "activate":
            cluster.activate(name)
        elif what == "deactivate":
            cluster.deactivate(name)
        elif what == "kill":
            cluster.kill_topology(name)
        else:
            return _error(404, f"unknown action {what!r}: use activate, deactivate or kill")
        return JSONResponse({"topologyOperation": what, "topologyId": name, "status": "success"})

    def metrics(request: Request) -> Response:
        body, content_type = metrics_text(cluster)
        return Response(body, media_type=content_type)

    def page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return _error(404, str(exc).strip("'\""))

    async def bad_window(request: Request, exc: Exception) -> JSONResponse:
        return _error(400, str(exc))

    async def http_error(request: Request, exc: Any) -> JSONResponse:
        return _error(exc.status_code, exc.detail or "error")

    from starlette.exceptions import HTTPException  # noqa: PLC0415

    routes = [
        Route("/", page), Route("/topology.html", page), Route("/component.html", page),
        Route("/api/v1/topology/summary", summary),
        Route("/api/v1/topology/{id}", topology),
        Route("/api/v1/topology/{id}/component/{component}", component),
        Route("/api/v1/topology/{id}/{action}", action, methods=["POST"]),
        Route("/metrics", metrics),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, exception_handlers={
        views.NotFound: not_found, views.BadRequest: bad_window, HTTPException: http_error})
