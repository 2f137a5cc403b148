"""Triage reports served by `torchhelp serve --triage-root DIR`, with a Resolve button per group.

    GET  /triage                  the folders this server reports on (links)
    GET  /triage/{n}              the triage HTML report of folder n, each group with a note field and "Resolve"
    POST /triage/{n}/resolve      form: group, note, csrf -> writes the team runbook, then 303 back to the report

Only folders named on the command line are ever read (a request names a folder by its number,
never by a path). The report is the same page ``torchhelp triage --html`` writes, known groups and
regressions marked; its forms carry a per-server anti-forgery token, so another site open in the
same browser cannot resolve groups on a loopback server. With a bearer token configured these
pages need the ``Authorization`` header like every other route (put them behind a proxy that adds
it, or use ``torchhelp triage resolve``).
"""

from __future__ import annotations

import hmac
import secrets
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.requests import Request

from assistant.errors import TriageError

_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Frame-Options": "DENY"}


def report_html(engine: Any, root: str, home: Path, action: str, csrf: str) -> str:
    """Triage ``root`` with the server's engine and render it with known groups marked and Resolve forms."""
    from assistant.triage.known import annotate
    from assistant.triage.render_html import ResolveForm, to_html
    from assistant.triage.resolutions import load_resolutions

    result = triage_root(engine, root)
    result = annotate(result, load_resolutions(home))
    return to_html(result, resolve=ResolveForm(action=action, csrf=csrf))


def triage_root(engine: Any, root: str) -> Any:
    """Triage one configured folder locally (no Ray) with the server's engine."""
    from assistant.triage.api import build_result
    from assistant.triage.distribute import extract_all
    from assistant.triage.jobs import discover

    return build_result(extract_all(discover([root]), engine="local", jobs=1), engine_obj=engine)


def resolve_in_root(engine: Any, root: str, group: str, note: str, home: Path) -> Any:
    """Resolve ``group`` of folder ``root`` (triaged afresh, so the id is the one the page showed)."""
    from assistant.triage.resolve import check_note, resolve_group

    check_note(note)
    result = triage_root(engine, root)
    return resolve_group(group, note, home=home, state_path=home / "triage" / "state.sqlite", root=root, result=result)


def install_triage_pages(app: FastAPI, state: Any, roots: tuple[str, ...]) -> None:
    """Add the report and resolve routes for ``roots`` (nothing when there are none)."""
    if not roots:
        return
    from assistant.triage.render_html import CSP_WITH_FORMS

    csrf = secrets.token_urlsafe(24)
    headers = dict(_HEADERS, **{"Content-Security-Policy": CSP_WITH_FORMS + "; frame-ancestors 'none'"})

    def root_at(n: int) -> str:
        if not 0 <= n < len(roots):
            raise TriageError(f"no triage folder {n}: this server reports on {len(roots)} folder(s), numbered from 0")
        return roots[n]

    @app.get("/triage", include_in_schema=False)
    async def triage_index() -> Response:
        items = "".join(f'<li><a href="/triage/{i}">{escape(r)}</a></li>' for i, r in enumerate(roots))
        page = f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>torchhelp triage</title></head><body><h1>Triage reports</h1><ul>{items}</ul></body></html>'
        return HTMLResponse(page, headers=dict(_HEADERS, **{"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'"}))

    @app.get("/triage/{n}", include_in_schema=False)
    async def triage_report(n: int) -> Response:
        root = root_at(n)
        engine = await state.engine_for(None)
        page = await state.call(engine, report_html, engine, root, state.settings.home, f"/triage/{n}/resolve", csrf)
        return HTMLResponse(page, headers=headers)

    @app.post("/triage/{n}/resolve", include_in_schema=False)
    async def triage_resolve(n: int, request: Request) -> Response:
        root = root_at(n)
        form = await request.form()
        given = str(form.get("csrf") or "")
        if not hmac.compare_digest(given.encode(), csrf.encode()):
            raise TriageError("this form is stale or was not sent by this server's report page: reload the report")
        engine = await state.engine_for(None)
        resolution = await state.call(engine, resolve_in_root, engine, root, str(form.get("group") or ""),
                                      str(form.get("note") or ""), state.settings.home)
        return RedirectResponse(f"/triage/{n}?resolved={quote(resolution.group_id)}", status_code=303, headers=_HEADERS)
