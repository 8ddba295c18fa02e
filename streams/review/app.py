"""The review desk's web pages: sign in, see the record you hold, decide, next.

Starlette (the ASGI toolkit under FastAPI, kept by Encode) with Jinja2 pages rendered on the server
and served by uvicorn: a few routes and forms need no framework on top, and no JavaScript build. The
only script is a few lines turning a text selection into offsets; without it every choice but "the
selected text" still works. Jinja2 escapes everything it renders, so a document holding markup is
shown as text. Every form carries the session's CSRF token; the session cookie is signed with the
desk's secret (itsdangerous, through Starlette's SessionMiddleware) and sent to this site only.
The queue's calls block (a decision is a Kafka transaction, and holds the queue's lock while it
commits), so they run on Starlette's thread pool: one slow decision stalls no other page or scrape.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

import jinja2
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from streams import metrics
from streams.review.decision import Choice, DecisionError, Position
from streams.review.page import desk_view
from streams.review.queue import Queue, Waiting
from streams.settings import ReviewSettings

# Autoescaping on for every template, whatever its file name says.
TEMPLATES = Jinja2Templates(
    env=jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")), autoescape=True)
)
MAX_REVIEWER_CHARS = 64
# An empty desk page reloads itself this often; a page showing a record never does (it would lose the form).
EMPTY_REFRESH_S = 5


def desk_app(review: ReviewSettings, queue: Queue) -> Starlette:
    if not review.secret:
        raise ValueError("the review desk needs a secret: set SEQSTREAM_REVIEW__SECRET")

    def reviewer(request: Request) -> str | None:
        if review.user_header and request.headers.get(review.user_header):
            return request.headers[review.user_header][:MAX_REVIEWER_CHARS]
        return request.session.get("reviewer")

    def csrf(request: Request) -> str:
        return request.session.setdefault("csrf", secrets.token_urlsafe(24))

    async def checked_form(request: Request) -> dict[str, str]:
        form = await request.form()
        sent = str(form.get("csrf", ""))
        if not sent or not hmac.compare_digest(sent, request.session.get("csrf", "")):
            raise PermissionError("the form's CSRF token is missing or stale: reload the page")
        return {k: str(v) for k, v in form.items()}

    async def sign_in(request: Request) -> Response:
        error = ""
        if request.method == "POST":
            try:
                form = await checked_form(request)
            except PermissionError as exc:
                return PlainTextResponse(str(exc), status_code=403)
            name = form.get("reviewer", "").strip()[:MAX_REVIEWER_CHARS]
            if name and hmac.compare_digest(form.get("secret", "").encode(), review.secret.encode()):
                request.session["reviewer"] = name
                return RedirectResponse("/", status_code=303)
            error = "Wrong secret, or no name."
        context = {"csrf": csrf(request), "error": error}
        return TEMPLATES.TemplateResponse(request, "signin.html", context, status_code=401 if error else 200)

    async def sign_out(request: Request) -> Response:
        try:
            await checked_form(request)
        except PermissionError as exc:
            return PlainTextResponse(str(exc), status_code=403)
        request.session.clear()
        return RedirectResponse("/signin", status_code=303)

    def held(who: str) -> tuple[Waiting | None, int, Waiting | None]:
        """The record `who` holds (now leased to them), the queue's depth, and a newer version."""
        waiting = queue.next_for(who)
        return waiting, queue.depth(), queue.newer(waiting) if waiting else None

    async def desk(request: Request) -> Response:
        who = reviewer(request)
        if who is None:
            return RedirectResponse("/signin", status_code=303)
        waiting, depth, newer = await run_in_threadpool(held, who)
        context = {
            "csrf": csrf(request),
            "reviewer": who,
            "message": request.session.pop("message", ""),
            "depth": depth,
            "view": desk_view(waiting, newer, queue.decided) if waiting else None,
            "refresh_s": EMPTY_REFRESH_S,
        }
        return TEMPLATES.TemplateResponse(request, "desk.html", context)

    async def decide(request: Request) -> Response:
        who = reviewer(request)
        if who is None:
            return PlainTextResponse("sign in first", status_code=401)
        try:
            form = await checked_form(request)
        except PermissionError as exc:
            return PlainTextResponse(str(exc), status_code=403)
        try:
            at = Position(form["topic"], int(form["partition"]), int(form["offset"]))
            choice = Choice(
                reviewer=who, action="reject" if form.get("action") == "reject" else "accept",
                spans=chosen_spans(form), reason=form.get("reason", ""),
            )  # fmt: skip
            done = await run_in_threadpool(queue.decide, at, choice)
        except (DecisionError, KeyError, ValueError) as exc:
            return PlainTextResponse(f"not decided: {exc}", status_code=409 if isinstance(exc, DecisionError) else 400)
        doc_id = done.record.doc_id if done.record else f"offset {at.offset}"
        request.session["message"] = f"{doc_id}: {choice.action}ed."
        return RedirectResponse("/", status_code=303)

    async def health(_request: Request) -> Response:
        return PlainTextResponse("ok")

    async def scrape(_request: Request) -> Response:
        metrics.REVIEW_BACKLOG.clear()  # partitions moved to another desk leave this one's series
        for partition, waiting in (await run_in_threadpool(queue.backlog)).items():
            metrics.REVIEW_BACKLOG.labels(topic=queue.topic, partition=str(partition)).set(waiting)
        return Response(generate_latest(metrics.REVIEW_REGISTRY), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/", desk),
        Route("/signin", sign_in, methods=["GET", "POST"]),
        Route("/signout", sign_out, methods=["POST"]),
        Route("/decide", decide, methods=["POST"]),
        Route("/healthz", health),
        Route("/metrics", scrape),
    ]
    session = Middleware(SessionMiddleware, secret_key=review.secret, same_site="strict", session_cookie="desk")
    return Starlette(routes=routes, middleware=[session])


def chosen_spans(form: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """Per label the form changed: `choice-N` is "keep", "none", "custom" (then `custom-N`) or
    "START-END" (a candidate); `label-N` names the label."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for name, value in form.items():
        if not name.startswith("choice-") or value == "keep":
            continue
        index = name.removeprefix("choice-")
        label = form[f"label-{index}"]
        if value == "custom":
            value = form.get(f"custom-{index}", "")
            if not value:
                raise ValueError(f"{label}: 'selected text' chosen, but no text was selected")
        spans[label] = [] if value == "none" else [_offsets(part) for part in value.split(",") if part]
    return spans


def _offsets(text: str) -> tuple[int, int]:
    start, _, end = text.partition("-")
    return int(start), int(end)
