"""Model presets: the models a chat may switch to with ``/model NAME``.

Each ``[models.<name>]`` table of ``config.toml`` (:class:`~gateway.config.schema.
ModelPresetSection`) becomes one :class:`ModelPreset`: its own client (``base_url``,
``model``, the API key read from the env var ``api_key_env`` names), whether it takes
images (``vision``) and streams (``stream``). ``"default"`` is never a preset's name: it
is the profile's own model (``[model]`` and the profile), which ``/model default`` returns to.

Who may pick: a preset with ``owners_only = true`` may be picked only by an owner (the
platform's ``owners`` and approvers, and the dashboard's operators: pairing's owners,
:meth:`gateway.inbound.pairing.Pairing.owns`); anyone admitted may pick the others. A session that
chose a preset later removed from the file falls back to the profile's model (the choice
stays stored, and ``/status`` names it as unavailable).

The presets own their clients: :meth:`ModelPresets.aclose` closes them (the service does
at its stop).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from core.agent.model_choice import ModelChoice
from core.model.base import ModelClient
from core.model.factory import build_model_client
from gateway.config.schema import ModelPresetSection, ModelSection

logger = logging.getLogger(__name__)

DEFAULT_NAME = "default"
"""``/model default``: the profile's own model."""


@dataclass(frozen=True, slots=True)
class ModelPreset:
    name: str
    client: ModelClient
    vision: bool = False
    stream: bool = True
    owners_only: bool = False

    @property
    def model(self) -> str:
        return self.client.model

    def choice(self) -> ModelChoice:
        return ModelChoice(self.client, self.vision, self.stream)


class ModelPresets:
    """The configured presets by name, in the file's order."""

    def __init__(self, presets: Iterable[ModelPreset] = ()) -> None:
        self._by_name = {preset.name: preset for preset in presets}

    def __iter__(self) -> Iterator[ModelPreset]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> ModelPreset | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return list(self._by_name)

    async def aclose(self) -> None:
        for preset in self:
            try:
                await preset.client.aclose()
            except Exception:
                logger.warning("model preset %s did not close cleanly", preset.name, exc_info=True)


NO_PRESETS = ModelPresets()


def build_presets(
    sections: Mapping[str, ModelPresetSection], model: ModelSection | None = None
) -> ModelPresets:
    """One client per ``[models.<name>]`` (``model``: ``[model]``'s timeouts; never its
    headers, which may carry another server's credentials)."""
    return ModelPresets(_preset(section, model) for section in sections.values())


def _preset(section: ModelPresetSection, model: ModelSection | None) -> ModelPreset:
    client = build_model_client(
        section.provider,
        base_url=section.base_url,
        api_key=section.api_key,
        model=section.model,
        timeouts=model.timeouts() if model is not None else None,
    )
    return ModelPreset(
        section.name, client, section.vision, section.stream, owners_only=section.owners_only
    )
