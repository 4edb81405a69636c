"""Real context-overflow error replies of the model servers people run, as test data.

Each is the status and the JSON body the server sends when a request does not fit its
context window (``core/model/classify.py`` keeps the one list of wordings that matches them):

* **llama.cpp** ``llama-server`` (build 0.6.0-dev, recorded against SmolLM2 with ``-c 4096``,
  /work/shared/research/real-model-servers.md, I2);
* **OpenAI** — the documented ``context_length_exceeded`` error of the Chat Completions API;
* **vLLM** — its OpenAI-compatible server's ``BadRequestError`` (a top-level error object,
  as quoted in ogx-ai/ogx#4534 and vllm-project/vllm#20409);
* **Ollama** — ``the input length exceeds the context length`` (HTTP 400, as quoted in
  nano-step/nano-brain#208; Ollama truncates silently unless the request exceeds what its
  runner accepts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.model_replies import Reply, reply_json


@dataclass(frozen=True, slots=True)
class ServerError:
    server: str
    status: int
    body: dict[str, Any]

    def reply(self) -> Reply:
        return reply_json(self.body, status=self.status)


LLAMA_CPP = ServerError(
    "llama.cpp",
    400,
    {
        "error": {
            "code": 400,
            "message": (
                "request (4127 tokens) exceeds the available context size (4096 tokens),"
                " try increasing it"
            ),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 4127,
            "n_ctx": 4096,
        }
    },
)
OPENAI = ServerError(
    "openai",
    400,
    {
        "error": {
            "message": (
                "This model's maximum context length is 128000 tokens. However, your messages"
                " resulted in 130244 tokens. Please reduce the length of the messages."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
)
VLLM = ServerError(
    "vllm",
    400,
    {
        "object": "error",
        "message": (
            "This model's maximum context length is 6048 tokens. However, you requested 6616"
            " tokens (568 in the messages, 6048 in the completion). Please reduce the length"
            " of the messages or completion."
        ),
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
)
OLLAMA = ServerError("ollama", 400, {"error": "the input length exceeds the context length"})

CONTEXT_OVERFLOWS = (LLAMA_CPP, OPENAI, VLLM, OLLAMA)
