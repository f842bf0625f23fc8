"""Cline's files for one turn, under `~/.cline` in the session's agent home.

`data/settings/providers.json` makes our gateway the `openai-compatible` provider: its base URL
and the turn's model, never the token (Cline takes that from `CLINE_API_KEY`, base.py; the
file's key is a stand-in, and Cline ignores a provider entry without `updatedAt`);
`global-settings.json` opts out of its telemetry, a fresh feature-flags cache keeps it from
fetching them. The system
prompt, the disabled tools and each skill's SKILL.md path and description reach the model as
a global rule (`rules/`); skills go whole into `skills/<name>/`, where Cline
looks. Everything is rewritten every turn.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders
from harness_bases.skill_notes import skills_note

PROVIDER_ID = "openai-compatible"
CONFIG_DIR = ".cline"
SETTINGS_DIR = f"{CONFIG_DIR}/data/settings"
PROVIDERS_FILE = "providers.json"
# Its telemetry (OpenTelemetry to Cline's collector) is on unless this file opts out.
GLOBAL_SETTINGS_FILE = "global-settings.json"
# Its feature flags come from PostHog unless a cache younger than 30 days holds them: a fresh,
# empty one every turn, so nothing is fetched (the flags keep their defaults).
FLAGS_CACHE = f"{CONFIG_DIR}/data/cache/feature-flags.json"
RULES_DIR = f"{CONFIG_DIR}/rules"
RULE_FILE = "uhp-instructions.md"
# Cline starts the agent's commands with `/bin/bash -c` and a socket for stdin: bash then reads
# ~/.bashrc rather than BASH_ENV. Both run the read-only scrub script (install.py).
BASHRC = ".bashrc"
# Cline's key is read from the environment; the file's is never sent.
KEY_STAND_IN = "from-environment"


def providers(turn: TurnSpec) -> dict:
    """The providers.json contents for a turn: the gateway as the one provider in use."""
    settings = {
        "provider": PROVIDER_ID,
        "apiKey": KEY_STAND_IN,
        "model": turn.model,
        "baseUrl": turn.gateway_url,
    }
    entry = {
        "settings": settings,
        "updatedAt": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "tokenSource": "manual",
    }
    return {
        "version": 1,
        "lastUsedProvider": PROVIDER_ID,
        "modes": {},
        "providers": {PROVIDER_ID: entry},
    }


def flags_cache() -> bytes:
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    empty: dict[str, dict[str, object]] = {"featureFlags": {}, "featureFlagPayloads": {}}
    cache = {"version": 2, "updatedAt": now_ms, "userId": None, "flagsPayload": empty}
    return json.dumps(cache).encode()


def instructions(turn: TurnSpec) -> str:
    """The standing instructions: the system prompt, the disabled tools, the skills."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    if turn.skills:
        folders = f"{turn.paths.home}/{CONFIG_DIR}/skills"
        how = "read one with your file tools"
        parts.append(skills_note(turn.skills, lambda name: f"{folders}/{name}", how))
    return "\n\n".join(parts)


def bashrc(scrub_script: str) -> bytes:
    return f"# Written by uhp-server every turn.\n. {scrub_script}\n".encode()


def write_turn_files(turn: TurnSpec, scrub_script: str) -> Path:
    """Write providers.json, the rule, the skills and ~/.bashrc; returns the config folder."""
    settings = real_dir(turn.host_home, SETTINGS_DIR)  # never a link the agent left
    text = json.dumps(providers(turn), indent=2, ensure_ascii=False)
    write_file(settings / PROVIDERS_FILE, text.encode("utf-8"))
    write_file(settings / GLOBAL_SETTINGS_FILE, json.dumps({"telemetryOptOut": True}).encode())
    write_file(
        real_dir(turn.host_home, str(Path(FLAGS_CACHE).parent)) / Path(FLAGS_CACHE).name,
        flags_cache(),
    )
    rules = real_dir(turn.host_home, RULES_DIR)
    rule = instructions(turn)
    if rule:
        write_file(rules / RULE_FILE, rule.encode("utf-8"))
    else:
        (rules / RULE_FILE).unlink(missing_ok=True)
    folder = real_dir(turn.host_home, CONFIG_DIR)
    write_skill_folders(folder, "skills", "uhp-skills.json", turn.skills)
    write_file(turn.host_home / BASHRC, bashrc(scrub_script))
    return folder
