"""Real wire shapes of OpenAI-compatible transcription servers, as recorded test data.

Each constant is a body a real server sends from ``POST /v1/audio/transcriptions`` (or,
for whisper.cpp, its inference path), with the place it was recorded. Identifiers that
were personal (request ids, organisation ids, key fragments) are replaced by stand-ins of
the same shape. :mod:`tests.support.transcription_server` answers with them.

Not confirmed, so not here: the exact 429 body OpenAI sends for ``whisper-1`` (the Groq
one below is a recorded 429 of the same OpenAI-style shape), and a body for HTTP 415 from
any of these servers (none of them was seen to use 415; the client still maps it).
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

# OpenAI (api.openai.com/v1) ------------------------------------------------------------

OPENAI_TEXT: Json = {"text": "Hello, this is a voice note."}
"""``response_format=json``: only ``text`` (platform.openai.com/docs/api-reference/audio/
json-object; the same model is ``CreateTranscriptionResponseJson`` in
fedirz/faster-whisper-server ``src/faster_whisper_server/api_models.py``)."""

OPENAI_BAD_KEY: Json = {
    # HTTP 401. Recorded in vivekuppal/transcribe#179 (2024-03-18): OpenAI echoes a
    # *masked* form of the key it was sent, so a client must not pass this message on.
    "error": {
        "message": "Incorrect API key provided: sk-0oJ1K***************************************"
        "cMnE. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}

OPENAI_BAD_FORMAT: Json = {
    # HTTP 400, a file whose name/contents are not a supported type. Recorded in
    # supershaneski/openai-whisper-api#5 (2023-11-03) and B4PT0R/streamlit-mic-recorder#10.
    "error": {
        "message": "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3', 'mp4', "
        "'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}

OPENAI_TOO_LARGE: Json = {
    # HTTP 413 (limit 25 MiB). Recorded in chidiwilliams/buzz#381 (2023-03-21), with the
    # response headers (Content-Type: application/json).
    "error": {
        "message": "Maximum content size limit (26214400) exceeded (222592852 bytes read)",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}

OPENAI_WRONG_ENDPOINT: Json = {
    # HTTP 404: a model that is not a transcription model (e.g. tts-1), or a wrong path.
    # Recorded in openai/openai-go#85 for /v1/audio/speech; the same message for
    # /v1/audio/transcriptions in openai/openai-dotnet#290 and norish-recipes/norish#348.
    "error": {
        "message": "Invalid URL (POST /v1/audio/transcriptions)",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}

OPENAI_NO_QUOTA: Json = {
    # HTTP 429 from whisper when the account has no credit: retrying does not help.
    # Message and type recorded in srcnalt/OpenAI-Unity#136 (2025-07-17, whisper);
    # ardha27/AI-Waifu-Vtuber#91 shows it raised from openai.Audio.transcribe.
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing "
        "details. For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}

# Groq (api.groq.com/openai/v1) -------------------------------------------------------
# Groq's error object has no "param" (and no "code" where there is none).

GROQ_BAD_KEY: Json = {
    # HTTP 401. Recorded in ag5826000/resume-commentor#4 (2025-03-04, content-length 96)
    # and nark/WiredSwift#44.
    "error": {
        "message": "Invalid API Key",
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }
}

GROQ_BAD_FORMAT: Json = {
    # HTTP 400 for a file name without a suffix it knows. Recorded in vercel/ai#6413
    # (2025-05-21) and vercel/ai#8846.
    "error": {
        "message": "file must be one of the following types: "
        "[flac mp3 mp4 mpeg mpga m4a ogg opus wav webm]",
        "type": "invalid_request_error",
    }
}

GROQ_NO_MODEL: Json = {
    # HTTP 404. Recorded in Vexa-ai/vexa#355 (2026-05-23) for /audio/transcriptions.
    "error": {
        "message": "The model `large-v3-turbo` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "code": "model_not_found",
    }
}

GROQ_RATE_LIMITED: Json = {
    # HTTP 429. Recorded in danielmiessler/Fabric#364 (2024-04-24, a chat model; the
    # organisation id replaced). Groq's whisper limits are RPM/ASH (audio seconds per hour).
    "error": {
        "message": "Rate limit reached for model `llama3-70b-8192` in organization "
        "`org_01hrsvc1b8ey0anvbgha0xckf2` on tokens per minute (TPM): Limit 7000, Used 0, "
        "Requested ~12903. Please try again in 50.597142857s. Visit "
        "https://console.groq.com/docs/rate-limits for more information.",
        "type": "tokens",
        "code": "rate_limit_exceeded",
    }
}

# faster-whisper-server / speaches (FastAPI) ---------------------------------------------
# Errors are FastAPI's {"detail": ...}. Success is OpenAI's {"text": ...}.

FASTER_WHISPER_FORBIDDEN: Json = {"detail": "Unauthorized"}
"""HTTP 403 for a wrong key when the server has ``API_KEY`` set: fedirz/faster-whisper-server
``src/faster_whisper_server/security.py`` (commit b47bc0d5), ``HTTPException(status_code=403,
detail="Unauthorized")``."""

FASTER_WHISPER_MISSING_FILE: Json = {
    # HTTP 422 for a missing required form field (``file: Annotated[UploadFile, Form()]``
    # in ``routers/stt.py``, commit 214c1e51). NOT recorded from this server: it is
    # FastAPI's documented validation-error shape under pydantic 2.
    "detail": [{"type": "missing", "loc": ["body", "file"], "msg": "Field required", "input": None}]
}

# whisper.cpp examples/server (whisper-server) ------------------------------------------
# ggerganov/whisper.cpp examples/server/server.cpp (commit 00797403): errors are set with
# ``res.set_content(error_resp, "application/json")`` and no status, so they arrive as
# HTTP 200; unknown paths get 404 text/plain "File Not Found (<path>)". The ``json`` answer
# is ``{"text": <segments joined, each with its leading space, each ending "\n">}``.

WHISPER_CPP_TEXT: Json = {
    "text": " And so my fellow Americans, ask not what your country can do for you.\n"
}
WHISPER_CPP_BAD_AUDIO: Json = {"error": "failed to read WAV file"}
WHISPER_CPP_FAILED: Json = {"error": "failed to process audio"}
WHISPER_CPP_NOT_FOUND = "File Not Found (/v1/audio/transcriptions)"
