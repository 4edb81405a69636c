"""Loading user hooks: Python entry points and a hooks directory.

**Entry points** (group ``commonos.hooks``): each entry point names a callable
``register(registry)`` that calls ``registry.register(hook_name, fn, ...)``. The installed
distributions' ``entry_points.txt`` are first read as text: when none names the group (no
plugin installed), ``importlib.metadata`` is never imported (2.6 MiB and ~12 ms at start).

**Hooks directory**: one subdirectory per hook package (names starting with ``.`` or ``_``
are skipped)::

    hooks/
      audit/
        HOOK.yaml       name: audit
                        description: Log every tool call
                        priority: 100            # optional, default 100
                        hooks:
                          post_tool_call: log_call   # hook name: function in handler.py
        handler.py

Each source loads all-or-nothing: its registrations are staged and applied only when the
whole source loaded, so a broken one (bad YAML, unknown hook name, missing function, an
import error, a ``register`` that raises) registers nothing and is reported as a
:class:`HookLoadError` naming the file; the others still load.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from core.hooks.registry import HookFn, HookRegistry, UnknownHookError
from core.hooks.spec import HOOK_NAMES

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "commonos.hooks"
MANIFEST = "HOOK.yaml"
HANDLER = "handler.py"
DEFAULT_PRIORITY = 100


@dataclass(frozen=True, slots=True)
class HookLoadError:
    source: str
    """The file or entry point that failed."""
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


@dataclass(slots=True)
class HookLoadReport:
    loaded: list[str] = field(default_factory=list)
    """Sources that loaded (hook directory names, entry point names)."""
    errors: list[HookLoadError] = field(default_factory=list)

    def extend(self, other: HookLoadReport) -> None:
        self.loaded.extend(other.loaded)
        self.errors.extend(other.errors)


class _HookSourceError(Exception):
    """One hook source could not load; ``source`` names the file to fix."""

    def __init__(self, source: Path | str, message: str) -> None:
        super().__init__(message)
        self.source = str(source)


@dataclass(frozen=True, slots=True)
class _Staged:
    name: str
    fn: HookFn
    priority: int
    source: str


class _StagingRegistry(HookRegistry):
    """A registry that also records registrations, to apply them only on success."""

    def __init__(self) -> None:
        super().__init__()
        self.staged: list[_Staged] = []

    def register(self, name: str, fn: HookFn, *, priority: int = 100, source: str = "") -> None:
        super().register(name, fn, priority=priority, source=source)
        self.staged.append(_Staged(name, fn, priority, source))

    def apply(self, registry: HookRegistry) -> None:
        for s in self.staged:
            registry.register(s.name, s.fn, priority=s.priority, source=s.source)


def load_hooks(
    registry: HookRegistry,
    *,
    directory: Path | None = None,
    group: str | None = ENTRY_POINT_GROUP,
) -> HookLoadReport:
    """Load entry-point hooks (unless ``group`` is None), then the hooks directory."""
    report = HookLoadReport()
    if group is not None:
        report.extend(load_entry_point_hooks(registry, group=group))
    if directory is not None:
        report.extend(load_hook_directory(registry, directory))
    for error in report.errors:
        logger.error("hook not loaded: %s", error)
    return report


# entry points ------------------------------------------------------------------------
def load_entry_point_hooks(
    registry: HookRegistry, *, group: str = ENTRY_POINT_GROUP
) -> HookLoadReport:
    report = HookLoadReport()
    if not _declared(group):
        return report
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        source = f"entry point {ep.name} = {ep.value}"
        try:
            _staged(ep.load(), ep.value).apply(registry)
        except Exception as exc:
            report.errors.append(HookLoadError(source, _reason(exc)))
            continue
        report.loaded.append(ep.name)
    return report


def _declared(group: str) -> bool:
    """Whether an installed distribution may declare ``group``: some ``entry_points.txt``
    on ``sys.path`` has its section, or a path entry is an archive (looked into by
    ``importlib.metadata`` only)."""
    section = re.compile(rf"^\s*\[\s*{re.escape(group)}\s*\]", re.MULTILINE)
    for entry in sys.path:
        folder = entry or "."
        if os.path.isfile(folder):
            return True
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")) and _declares(section, folder, name):
                return True
    return False


def _declares(section: re.Pattern[str], folder: str, distribution: str) -> bool:
    try:
        with open(os.path.join(folder, distribution, "entry_points.txt"), encoding="utf-8") as f:
            return section.search(f.read()) is not None
    except (OSError, UnicodeDecodeError):
        return False


def _staged(register: object, value: str) -> _StagingRegistry:
    """What the entry point ``value`` (loaded as ``register``) registers, staged."""
    if not callable(register):
        raise TypeError(f"{value} is not callable; expected register(registry)")
    staging = _StagingRegistry()
    register(staging)
    return staging


# hooks directory -----------------------------------------------------------------------
def load_hook_directory(registry: HookRegistry, directory: Path) -> HookLoadReport:
    report = HookLoadReport()
    if not directory.is_dir():
        report.errors.append(HookLoadError(str(directory), "hooks directory does not exist"))
        return report
    for hook_dir in sorted(p for p in directory.iterdir() if _is_hook_dir(p)):
        try:
            _load_hook_dir(hook_dir).apply(registry)
        except _HookSourceError as exc:
            report.errors.append(HookLoadError(exc.source, str(exc)))
            continue
        report.loaded.append(hook_dir.name)
    return report


def _is_hook_dir(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith((".", "_"))


@dataclass(frozen=True, slots=True)
class _Manifest:
    name: str
    hooks: dict[str, str]
    priority: int


def _load_hook_dir(hook_dir: Path) -> _StagingRegistry:
    manifest = _read_manifest(hook_dir / MANIFEST)
    module = _import_handler(hook_dir / HANDLER)
    staging = _StagingRegistry()
    for hook_name, function_name in manifest.hooks.items():
        fn = getattr(module, function_name, None)
        if not callable(fn):
            raise _HookSourceError(
                hook_dir / HANDLER, f"no function {function_name!r} (for hook {hook_name!r})"
            )
        source = f"{manifest.name} ({hook_dir / HANDLER}:{function_name})"
        staging.register(hook_name, fn, priority=manifest.priority, source=source)
    return staging


def _read_manifest(path: Path) -> _Manifest:
    import yaml  # only when a hook folder holds a manifest: no hooks, no YAML parser loaded

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _HookSourceError(path, f"cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise _HookSourceError(path, f"invalid YAML: {exc}") from exc
    return _parse_manifest(path, raw)


def _parse_manifest(path: Path, raw: Any) -> _Manifest:
    if not isinstance(raw, dict):
        raise _HookSourceError(path, "expected a mapping with 'name' and 'hooks'")
    name, hooks, priority = raw.get("name"), raw.get("hooks"), raw.get("priority", DEFAULT_PRIORITY)
    if not isinstance(name, str) or not name:
        raise _HookSourceError(path, "'name' must be a non-empty string")
    if not isinstance(hooks, dict) or not hooks:
        raise _HookSourceError(path, "'hooks' must map hook names to function names")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise _HookSourceError(path, "'priority' must be an integer")
    for hook_name, function_name in hooks.items():
        if hook_name not in HOOK_NAMES:
            raise _HookSourceError(path, f"unknown hook {hook_name!r}")
        if not isinstance(function_name, str) or not function_name.isidentifier():
            raise _HookSourceError(path, f"hook {hook_name!r}: function name must be a name")
    return _Manifest(name, {str(k): str(v) for k, v in hooks.items()}, priority)


def _import_handler(path: Path) -> ModuleType:
    if not path.is_file():
        raise _HookSourceError(path, "missing handler module")
    module_name = "commonos_hook_" + re.sub(r"\W", "_", path.parent.name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise _HookSourceError(path, "cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise _HookSourceError(path, f"import failed: {_reason(exc)}") from exc
    return module


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnknownHookError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
