"""Secrets never reach the logs.

Libraries log request URLs (python-telegram-bot's token is part of every Bot API URL,
httpx logs each request at INFO); a traceback may quote a header. :class:`RedactSecrets`
sits on the log handlers and replaces every configured secret in the rendered message and
traceback with a mask before anything is written — verbatim, base64- and URL-encoded
(:func:`core.redaction.encoded_forms`, the same forms the chat redactor masks) — and then
every credential *shape* (:func:`core.redaction.redact_shapes`: URL passwords,
``Authorization`` values, ``--password`` flags, ``*_KEY=`` assignments, well-known token
prefixes, random-looking base64 runs). The shapes are for the logs only: replies and every
other text to a chat are masked for the configured values alone (:mod:`core.redaction`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from core.redaction import MIN_SECRET_LENGTH, encoded_forms, redact_shapes
from gateway.config import Config, mask


class RedactSecrets(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        unique = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        forms = {form: mask(secret) for secret in unique for form in encoded_forms(secret)}
        self._forms = sorted(forms.items(), key=lambda item: len(item[0]), reverse=True)

    def redact(self, text: str) -> str:
        """``text`` with the configured secrets, then the credential shapes, masked."""
        for form, masked in self._forms:
            if form in text:
                text = text.replace(form, masked)
        return redact_shapes(text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def config_secrets(config: Config) -> list[str]:
    """Every value of a field marked secret, in every section, plus header values."""
    return [*config.secrets(), *config.model.headers.values()]


def install(config: Config, logger: logging.Logger | None = None) -> RedactSecrets:
    """Attach a redacting filter to every handler of ``logger`` (the root by default)."""
    redactor = RedactSecrets(config_secrets(config))
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(redactor)
    return redactor
