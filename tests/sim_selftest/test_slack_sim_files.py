"""Contract tests of the Slack simulator's files: the real slack-bolt / slack-sdk and httpx
against shared files, the authenticated download route and the v2 external upload flow."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.platform_sim.base import SimError
from tests.platform_sim.slack_sim import BOT_USER, GENERAL, SlackSim
from tests.sim_selftest.test_slack_sim import socket_mode

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 300  # > one 64 KiB chunk


def web_client(sim: SlackSim) -> AsyncWebClient:
    return AsyncWebClient(token=sim.bot_token, base_url=sim.api_url)


async def fetch(url: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(trust_env=False, follow_redirects=True) as http:
        return await http.get(url, headers=headers)


async def test_a_shared_file_reaches_a_bolt_app_as_a_file_share_message(
    slack_sim: SlackSim,
) -> None:
    app = AsyncApp(name="sim-selftest", client=web_client(slack_sim), signing_secret="x")
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        seen.put_nowait(event)

    shot = slack_sim.add_file("shot.png", PNG, "image/png")
    clip = slack_sim.audio_clip(b"webm-bytes")
    async with socket_mode(app, slack_sim):
        await slack_sim.user_shares(GENERAL, [shot, clip], "look")
        event = await asyncio.wait_for(seen.get(), 5)
    assert (event["subtype"], event["text"], event["upload"]) == ("file_share", "look", False)
    image, audio = event["files"]
    assert {k: image[k] for k in ("id", "name", "title", "mimetype", "filetype", "size")} == {
        "id": shot.id, "name": "shot.png", "title": "shot.png", "mimetype": "image/png",
        "filetype": "png", "size": len(PNG),
    }  # fmt: skip
    assert image["url_private_download"].endswith(f"-{shot.id}/download/shot.png")
    assert image["url_private"].endswith(f"-{shot.id}/shot.png")
    assert (audio["subtype"], audio["mimetype"], audio["name"]) == (
        "slack_audio", "audio/webm", "audio_message.webm",
    )  # fmt: skip
    assert audio["media_display_type"] == "audio"


async def test_url_private_download_serves_the_file_only_with_the_bot_token(
    slack_sim: SlackSim,
) -> None:
    shot = slack_sim.add_file("shot.png", PNG, "image/png")
    url = shot.to_json(slack_sim.url)["url_private_download"]
    got = await fetch(url, slack_sim.bot_token)
    assert (got.status_code, got.headers["content-type"], got.content) == (200, "image/png", PNG)
    assert (
        await fetch(shot.to_json(slack_sim.url)["url_private"], slack_sim.bot_token)
    ).content == PNG
    assert slack_sim.downloads[shot.id] == 2


@pytest.mark.parametrize("token", [None, "xoxb-wrong"])
async def test_a_download_without_the_token_is_the_sign_in_page(
    slack_sim: SlackSim, token: str | None
) -> None:
    shot = slack_sim.add_file("shot.png", PNG, "image/png")
    got = await fetch(shot.to_json(slack_sim.url)["url_private_download"], token)
    assert got.status_code == 200  # the pitfall: a success status, and no file
    assert got.headers["content-type"].startswith("text/html")
    assert "Sign in to Sim" in got.text
    assert [r.status_code for r in got.history] == [302]
    assert slack_sim.downloads[shot.id] == 0
    assert slack_sim.files.refused == [shot.id]
    assert [c.params["authorized"] for c in slack_sim.calls_to("files.download")] == [False]


async def test_a_token_without_files_read_gets_the_sign_in_page_too(slack_sim: SlackSim) -> None:
    slack_sim.scopes.discard("files:read")
    shot = slack_sim.add_file("notes.txt", b"hello", "text/plain")
    got = await fetch(shot.to_json(slack_sim.url)["url_private_download"], slack_sim.bot_token)
    assert got.headers["content-type"].startswith("text/html")
    assert slack_sim.downloads[shot.id] == 0


async def test_download_faults_and_a_broken_body(slack_sim: SlackSim) -> None:
    shot = slack_sim.add_file("shot.png", PNG, "image/png")
    url = shot.to_json(slack_sim.url)["url_private_download"]
    slack_sim.fail_next("files.download", SimError.server_error(500))
    assert (await fetch(url, slack_sim.bot_token)).status_code == 500
    missing = url.replace(shot.id, "F0000NOPE")
    assert (await fetch(missing, slack_sim.bot_token)).status_code == 404
    slack_sim.cut_next_download(1000)
    with pytest.raises(httpx.HTTPError):
        await fetch(url, slack_sim.bot_token)
    assert slack_sim.downloads[shot.id] == 0


async def test_files_upload_v2_shares_the_file_in_the_thread(
    slack_sim: SlackSim, tmp_path: Path
) -> None:
    parent = await slack_sim.user_says(GENERAL, "send me the report")
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.7 report")
    done = await web_client(slack_sim).files_upload_v2(
        file=str(path), filename="report.pdf", title="report.pdf", channel=GENERAL,
        thread_ts=parent.id, initial_comment="here it is",
    )  # fmt: skip
    assert [c.method for c in slack_sim.calls if c.method.startswith("files.")] == [
        "files.getUploadURLExternal", "files.upload_url", "files.completeUploadExternal",
    ]  # fmt: skip
    shared = await slack_sim.wait_for_bot_message(GENERAL, lambda m: bool(m.raw.get("files")))
    assert (shared.thread, shared.text, shared.raw["upload"]) == (parent.id, "here it is", True)
    [file] = shared.raw["files"]
    assert done["file"]["id"] == file["id"] == slack_sim.files.uploaded[0].id
    assert (file["name"], file["size"], file["user"]) == ("report.pdf", 15, BOT_USER)
    assert slack_sim.files.uploaded[0].content == b"%PDF-1.7 report"
    got = await fetch(file["url_private_download"], slack_sim.bot_token)
    assert got.content == b"%PDF-1.7 report"


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        ("no_scope", "missing_scope"),
        ("disabled", "file_uploads_disabled"),
        ("not_member", "not_in_channel"),
        ("no_thread", "thread_not_found"),
    ],
)
async def test_upload_errors_are_slacks_own(
    slack_sim: SlackSim, tmp_path: Path, setup: str, error: str
) -> None:
    if setup == "no_scope":
        slack_sim.scopes.discard("files:write")
    elif setup == "disabled":
        slack_sim.uploads_disabled = True
    elif setup == "not_member":
        slack_sim.channels[GENERAL]["is_member"] = False
    path = tmp_path / "a.txt"
    path.write_bytes(b"abc")
    thread = "1.000001" if setup == "no_thread" else None
    with pytest.raises(SlackApiError) as caught:
        await web_client(slack_sim).files_upload_v2(
            file=str(path), filename="a.txt", channel=GENERAL, thread_ts=thread
        )
    assert caught.value.response["error"] == error
    if error == "missing_scope":
        assert caught.value.response["needed"] == "files:write"
    assert slack_sim.files.uploaded == []
    assert not [m for m in slack_sim.bot_messages(GENERAL) if m.raw.get("files")]


async def test_completing_a_file_that_was_never_uploaded_is_file_not_found(
    slack_sim: SlackSim,
) -> None:
    client = web_client(slack_sim)
    ticket = await client.files_getUploadURLExternal(filename="a.txt", length=3)
    with pytest.raises(SlackApiError) as caught:
        await client.files_completeUploadExternal(
            files=[{"id": ticket["file_id"], "title": "a.txt"}], channel_id=GENERAL
        )
    assert caught.value.response["error"] == "file_not_found"
    with pytest.raises(SlackApiError) as zero:
        await client.files_getUploadURLExternal(filename="a.txt", length=0)
    assert zero.value.response["error"] == "missing_argument"
