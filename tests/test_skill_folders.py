"""The skill folders every base writes where its CLI looks (harness_bases/skill_folders.py)."""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import SkillBundle, SkillFile
from harness_bases.skill_folders import write_skill_folders


def bundle(name: str, *files: tuple[str, bytes]) -> SkillBundle:
    return SkillBundle(name, tuple(SkillFile(path, data) for path, data in files))


def test_each_turn_replaces_what_the_previous_wrote_and_leaves_the_agents_own(
    tmp_path: Path,
) -> None:
    first = (
        bundle("alpha", ("SKILL.md", b"# alpha"), ("bin/run.sh", b"#!/bin/sh\necho hi\n")),
        bundle("beta", ("SKILL.md", b"# beta")),
    )
    write_skill_folders(tmp_path, "skills", "uhp/skills.json", first)
    root = tmp_path / "skills"
    assert (root / "alpha" / "SKILL.md").read_bytes() == b"# alpha"
    assert (root / "alpha" / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (root / "beta" / "SKILL.md").stat().st_mode & 0o777 == 0o644
    (root / "alpha" / "stale.txt").write_text("left by the old version")
    (root / "mine").mkdir()  # the agent's own skill
    (root / ".system").mkdir()  # the CLI's own (Codex)

    write_skill_folders(
        tmp_path, "skills", "uhp/skills.json", (bundle("alpha", ("SKILL.md", b"v2")),)
    )
    assert (root / "alpha" / "SKILL.md").read_bytes() == b"v2"
    assert not (root / "alpha" / "stale.txt").exists()  # each folder is written whole
    assert not (root / "beta").exists()  # disabled or deleted since: gone
    assert (root / "mine").is_dir() and (root / ".system").is_dir()


def test_names_and_paths_that_would_leave_the_folder_are_skipped(tmp_path: Path) -> None:
    hostile = (
        bundle("../escape", ("SKILL.md", b"x")),
        bundle("ok", ("../../outside.txt", b"x"), ("/etc/abs", b"x"), ("SKILL.md", b"fine")),
    )
    write_skill_folders(tmp_path / "home", "skills", "uhp-skills.json", hostile)
    assert (tmp_path / "home" / "skills" / "ok" / "SKILL.md").read_bytes() == b"fine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    # A record someone tampered with never removes anything outside the skills folder.
    (tmp_path / "home" / "uhp-skills.json").write_text('["../../home", ".system", 7]')
    (tmp_path / "home" / "keep").mkdir()
    write_skill_folders(tmp_path / "home", "skills", "uhp-skills.json", ())
    assert (tmp_path / "home" / "keep").is_dir()
