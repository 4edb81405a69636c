"""A malformed body to the web chat gets one readable JSON error — 400 for what cannot be
read as a JSON object (100,000 nested arrays, 40,000 nested objects), 413 past the size
limit — stores nothing, and the chat keeps answering. Real aiohttp server, real wiring."""

from __future__ import annotations

import pytest

from tests.web.conftest import WebGatewayFactory
from tests.web.harness import Running, new_id

JSON = {"Content-Type": "application/json"}
NOT_AN_OBJECT = "body: expected a JSON object"
TOO_DEEP = "body: JSON nested too deeply"
MALFORMED: dict[str, tuple[bytes, dict[str, str], str]] = {
    "100,000 nested arrays": (b"[" * 100_000 + b"]" * 100_000, JSON, TOO_DEEP),
    "40,000 nested objects": (b'{"a":' * 40_000 + b"1" + b"}" * 40_000, JSON, TOO_DEEP),
    "a JSON list": (b'["hello"]', JSON, NOT_AN_OBJECT),
    "a JSON string": (b'"hello"', JSON, NOT_AN_OBJECT),
    "JSON null": (b"null", JSON, NOT_AN_OBJECT),
    "not JSON": (b"{conversation", JSON, NOT_AN_OBJECT),
    "not UTF-8": (b'{"text": "\xff\xfe"}', JSON, NOT_AN_OBJECT),
    "an unknown charset": (b"{}", {"Content-Type": "application/json; charset=nope"},
                           "conversation: expected 6-64 characters of A-Z a-z 0-9 _ -"),
    "a 5,000-digit number": (b'{"text": ' + b"9" * 5000 + b"}", JSON, NOT_AN_OBJECT),
}  # fmt: skip


async def _still_answers(gateway: Running) -> None:
    conversation = new_id()
    stream = await gateway.events(conversation)
    await gateway.send(conversation, "hello")
    await stream.message_containing("demo")
    await stream.close()


@pytest.mark.parametrize("path", ["/api/send", "/api/press"])
@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
async def test_a_body_that_is_not_a_json_object_gets_400_with_a_readable_error(
    web_gateway: WebGatewayFactory, path: str, case: str
) -> None:
    gateway = await web_gateway()
    body, headers, error = MALFORMED[case]
    async with gateway.http.post(gateway.url + path, data=body, headers=headers) as response:
        assert response.status == 400
        assert await response.json() == {"error": error}
    assert await gateway.service.store.unfinished_inbound("web") == []
    await _still_answers(gateway)


async def test_a_body_over_the_size_limit_gets_413_with_a_readable_error(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    text = "x" * 300_000
    body = {"conversation": new_id(), "id": new_id(), "text": text}
    async with await gateway.post("/api/send", body) as response:
        assert response.status == 413
        assert await response.json() == {"error": "body: too large"}
    assert await gateway.service.store.unfinished_inbound("web") == []
    await _still_answers(gateway)


async def test_a_login_form_over_the_size_limit_or_malformed_gets_a_readable_error(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway(token="a-long-random-web-token")
    huge = {"token": "x" * 300_000}
    async with gateway.http.post(gateway.url + "/login", data=huge) as response:
        assert (response.status, await response.json()) == (413, {"error": "body: too large"})
    for body, ctype in BROKEN_FORMS:
        headers = {"Content-Type": ctype}
        async with gateway.http.post(gateway.url + "/login", data=body, headers=headers) as answer:
            assert (answer.status, await answer.json()) == (400, {"error": "body: expected a form"})


BOUNDARY = "multipart/form-data; boundary=zz"
TOKEN_PART = b"--zz\r\nContent-Disposition: form-data; name=token\r\n"
BROKEN_FORMS = [
    (b"--zz\r\nno headers", BOUNDARY),
    (b"--zz\r\nContent-Disposition: form-data\r\n\r\nx\r\n--zz--", BOUNDARY),
    (b"garbage", "multipart/form-data"),
    (b"token=a", "application/x-www-form-urlencoded; charset=nope"),
    (TOKEN_PART + b"Content-Type: text/plain; charset=nope\r\n\r\nx\r\n--zz--", BOUNDARY),
    (TOKEN_PART + b"Content-Transfer-Encoding: weird\r\n\r\nx\r\n--zz--", BOUNDARY),
    (TOKEN_PART + b"\r\nxxxx", BOUNDARY),
]
