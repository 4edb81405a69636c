"""Skill folders written for tests."""

from __future__ import annotations

from pathlib import Path

PDF_BODY = "Run `pdftk form.pdf fill_form data.fdf output out.pdf`. Check every field."


def write_skill(root: Path, folder: str, front: str, body: str = PDF_BODY) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return path


def pdf_skill(root: Path) -> Path:
    """A valid skill with a script beside it."""
    folder = write_skill(
        root, "pdf-forms", "name: pdf-forms\ndescription: Fill in PDF forms with pdftk."
    )
    (folder / "scripts").mkdir()
    (folder / "scripts" / "fill.sh").write_text("#!/bin/sh\necho filled\n")
    return folder
