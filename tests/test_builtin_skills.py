"""The built-in skills under skills/: well-formed, within the limits clients get, packaged."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from uhp_server.harnesses import skills as skill_rules
from uhp_server.harnesses.builtin_skills import builtin_skills, skills_root
from uhp_server.harnesses.skill_paths import check_unique, normalise_path

ROOT = Path(__file__).resolve().parents[1]


def test_every_builtin_skill_has_front_matter_naming_it() -> None:
    skills = builtin_skills()
    assert skills_root() == ROOT / "skills"
    assert {"uhp-artifacts", "workspace-hygiene"} <= set(skills)
    for name, skill in skills.items():
        files = {f.path: f.data for f in skill.files}
        head = files["SKILL.md"].decode()
        match = re.match(r"---\nname: (.+)\ndescription: (.+)\n---\n", head)
        assert match, f"{name}: SKILL.md needs name/description front matter"
        assert match.group(1) == name
        # The same rules a client's skill meets.
        assert [normalise_path(path, "p") for path in files] == list(files)
        check_unique(list(files), "files")
        assert sum(map(len, files.values())) <= skill_rules.MAX_BUNDLE_BYTES


def test_every_builtin_skill_folder_is_packaged() -> None:
    """A wheel install has no checkout: pyproject's data-files must list each folder."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data_files = project["tool"]["setuptools"]["data-files"]
    packaged = set()
    for target, patterns in data_files.items():
        for pattern in patterns:
            packaged |= {p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern)}
            assert target == "share/uhp-server/" + str(Path(pattern).parent)
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "skills").rglob("*") if p.is_file()}
    assert shipped == packaged
