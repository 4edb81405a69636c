"""A :class:`ModelClient` for any OpenAI-compatible Chat Completions endpoint, over httpx.

One call is one HTTP request: ``POST {base_url}/chat/completions``. Retries live in
:mod:`core.model.retry`, so the engine can put its error hooks between attempts.

- Non-streaming: the JSON reply becomes a :class:`ModelReply`.
- Streaming (``request.stream``): SSE events are assembled by :mod:`core.model.stream`;
  each text fragment goes to ``request.on_delta`` as it arrives. A server that ignores
  ``stream`` and answers with plain JSON is accepted (one delta with the whole text).
- Failures raise :class:`ModelError` classified by :mod:`core.model.classify`.
- Three timeouts, never one total (``docs/turn-loop.md`` §4, "Timeouts"):
  ``connect_timeout`` bounds connecting, ``first_byte_timeout`` the wait for the first
  byte of the answer (in non-stream mode: the whole generation), ``idle_timeout`` each
  gap between chunks once the reply flows (an SSE ``:`` ping counts). A long stream that
  keeps producing is never cut, and a silent server is. ``timeout`` is the deprecated
  single value: it stands in for each of the three not given.
- ``request.on_activity`` hears every streamed ``data:`` event (text, tool-call pieces,
  usage; not the keep-alive comments): the engine's slow-model notice is about silence.
- Cancelling the awaiting task aborts the request: httpx closes the connection at once and
  the cancellation propagates; nothing partial is returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

import core
from core.model.base import ActivityCallback, DeltaCallback, ModelRequest
from core.model.classify import bad_response, classify_status, classify_transport
from core.model.errors import ModelError
from core.model.http_transport import AiohttpTransport
from core.model.request_fields import with_fields
from core.model.stream import StreamAssembler
from core.model.timeouts import Timeouts
from core.model.wire import Json, parse_json, parse_reply, request_body
from core.types import ModelReply


class OpenAIClient:
    """Talks to ``base_url`` (e.g. ``https://api.openai.com/v1``) as ``model``."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        timeout: float | None = None,
        stream_usage: bool = True,
        trust_env: bool = True,
        request_fields: Mapping[str, object] | None = None,
    ) -> None:
        """``timeouts``: the three bounds (:mod:`core.model.timeouts`); without them,
        ``timeout`` (deprecated) is each of the three, else the defaults. ``stream_usage`` asks for
        token usage in streams (``stream_options``); turn it off for servers that reject
        that field. ``trust_env`` lets httpx use proxy env vars. ``request_fields``
        (``max_tokens``, ``temperature``, ...) go into every request body
        (:mod:`core.model.request_fields`).
        """
        self._fields = dict(request_fields or {})
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._stream_usage = stream_usage
        limits = timeouts if timeouts is not None else Timeouts.given(legacy=timeout)
        self.timeouts = limits
        self._http = httpx.AsyncClient(
            headers=_headers(api_key, headers),
            timeout=limits.for_httpx(),
            trust_env=trust_env,
            transport=AiohttpTransport(trust_env=trust_env, idle_timeout=limits.idle),
        )

    @property
    def model(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self._url

    async def complete(self, request: ModelRequest) -> ModelReply:
        body = request_body(self._model, request, stream_usage=self._stream_usage)
        if self._fields:  # none configured: the body is sent as built
            body = with_fields(body, self._fields)
        try:
            if request.stream:
                return await self._stream(body, request.on_delta, request.on_activity)
            return await self._post(body)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            found = classify_transport(exc, self._url)
            raise ModelError(found, server=_host(self._url)) from exc

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, body: Json) -> ModelReply:
        response = await self._http.post(self._url, json=body)
        return _whole_reply(response)

    async def _stream(
        self, body: Json, on_delta: DeltaCallback | None, on_activity: ActivityCallback | None
    ) -> ModelReply:
        async with self._http.stream("POST", self._url, json=body) as response:
            if response.is_error or not _is_event_stream(response):
                await response.aread()
                reply = _whole_reply(response)
                if on_delta is not None and reply.content:
                    await on_delta(reply.content)
                return reply
            return await _assemble(response, on_delta, on_activity)


async def _assemble(
    response: httpx.Response, on_delta: DeltaCallback | None, on_activity: ActivityCallback | None
) -> ModelReply:
    assembler = StreamAssembler()
    async for line in response.aiter_lines():
        if on_activity is not None and line.startswith("data:"):
            on_activity()
        await _emit(assembler.feed_line(line), on_delta)
        if assembler.done:
            break
    else:
        await _emit(assembler.end(), on_delta)
    return assembler.reply()


async def _emit(fragment: str | None, on_delta: DeltaCallback | None) -> None:
    if fragment and on_delta is not None:
        await on_delta(fragment)


def _whole_reply(response: httpx.Response) -> ModelReply:
    status = response.status_code
    if response.is_error:
        raise ModelError(classify_status(response, response.text))
    if response.is_redirect:
        target = response.headers.get("location", "?")
        message = f"model server redirected to {target}; set base_url to the final address"
        raise ModelError(bad_response(message, status=status))
    payload = parse_json(response.text, f"model reply (HTTP {status})", status)
    return parse_reply(payload, status)


def _host(url: str) -> str | None:
    """``host:port`` of ``url`` for the user's text (None when the URL does not parse)."""
    try:
        return urlsplit(url).netloc or None
    except ValueError:
        return None


def _is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")


def _headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": f"commonos/{core.__version__}"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers
