"""Which uid a turn's agent runs as: one of the principal's own, where the server can.

Per-uid kernel quotas (inotify instances and watches, the pipe-buffer quota, the user keyring,
RLIMIT_NPROC) are shared by every process of a uid: were every principal's agent one uid,
one principal's agent exhausting them would break another's (a Node CLI's file watchers fail
with EMFILE). So a server running as root gives each principal a uid of its own, from
UHP_AGENT_UID_RANGE: its start plus one plus the principal's agent number (storage/keys.py,
given once and kept), the gid the same; the start itself is for turns of no principal (the
readiness probe's). The range's default, 200000-299999, lies above every login uid
(login.defs' UID_MAX, 60000) and clear of nobody (65534); an operator whose /etc/subuid hands
out that range moves it. An explicit uid:gid setting (UHP_LOCAL_SANDBOX_USER,
UHP_DOCKER_USER) means that one uid for every principal, as does a server that is not root
(its agents run as itself).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_UID_RANGE = "200000-299999"


def parse_uid_range(text: str) -> tuple[int, int]:
    """`first-last` (inclusive) from UHP_AGENT_UID_RANGE; never root's, never reversed."""
    first_text, _, last_text = text.partition("-")
    try:
        first, last = int(first_text), int(last_text)
    except ValueError:
        raise ValueError(f"UHP_AGENT_UID_RANGE must be first-last: {text!r}") from None
    if first <= 0 or last <= first or last >= 2**32 - 1:
        raise ValueError(f"UHP_AGENT_UID_RANGE must be 1 <= first < last: {text!r}")
    return first, last


def parse_user(setting: str, name: str) -> tuple[int, int] | None:
    """An explicit `uid[:gid]`, or None for `auto`. Root is refused."""
    if setting == "auto":
        return None
    uid_text, _, gid_text = setting.partition(":")
    try:
        uid = int(uid_text)
        gid = int(gid_text) if gid_text else uid
    except ValueError:
        raise ValueError(f"{name} must be uid:gid or auto: {setting!r}") from None
    if uid == 0:
        raise ValueError(f"{name} must not be root (uid 0)")
    return uid, gid


@dataclass(frozen=True)
class AgentUsers:
    """The uid:gid each turn's agent runs as (see the module docstring)."""

    fixed: tuple[int, int] | None = None  # an explicit setting: one uid for all
    uid_range: tuple[int, int] = parse_uid_range(DEFAULT_UID_RANGE)

    @classmethod
    def from_settings(cls, setting: str, name: str, uid_range: str) -> AgentUsers:
        return cls(parse_user(setting, name), parse_uid_range(uid_range))

    @property
    def per_principal(self) -> bool:
        """True when each principal gets a uid of its own: `auto`, and the server is root."""
        return self.fixed is None and os.getuid() == 0

    @property
    def default(self) -> tuple[int, int]:
        """A turn with no principal's number (the sandbox's own tests, the readiness probe):
        the explicit setting, the server's own ids, or the range's first uid under root."""
        if self.fixed is not None:
            return self.fixed
        if os.getuid() == 0:
            return self.uid_range[0], self.uid_range[0]
        return os.getuid(), os.getgid()

    def for_principal(self, agent_number: int | None) -> tuple[int, int]:
        """The uid:gid for the principal whose agent number is `agent_number` (0, 1, ...)."""
        if agent_number is None or not self.per_principal:
            return self.default
        first, last = self.uid_range
        uid = first + 1 + agent_number
        if agent_number < 0 or uid > last:
            raise ValueError(
                f"UHP_AGENT_UID_RANGE {first}-{last} has no uid left for agent number "
                f"{agent_number}: widen it"
            )
        return uid, uid


def account_files(user: tuple[int, int], home: str) -> dict[str, bytes]:
    """/etc/passwd and /etc/group naming the agent's uid `agent` (and root and nobody, which
    programs expect), for a sandbox to mount: a uid from the range has no entry on the host,
    and programs that look theirs up fail without one (Node's os.userInfo() throws, as do
    Python's getpass.getuser() and `whoami`). It shows no host account either."""
    uid, gid = user
    passwd = [
        "root:x:0:0:root:/root:/usr/sbin/nologin",
        f"agent:x:{uid}:{gid}:agent:{home}:/bin/sh",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
    ]
    group = ["root:x:0:", f"agent:x:{gid}:", "nogroup:x:65534:"]
    if uid == 65534:  # nobody itself (an explicit setting): one entry for it
        del passwd[2]
    if gid == 65534:
        del group[2]
    return {
        "/etc/passwd": ("\n".join(passwd) + "\n").encode(),
        "/etc/group": ("\n".join(group) + "\n").encode(),
    }


def host_ids_within(uid_range: tuple[int, int], etc: Path = Path("/etc")) -> list[str]:
    """What of the host's own ids falls in `uid_range`: an account in passwd or group, or a
    subordinate range in subuid or subgid (a user's rootless containers run as those uids). A
    host process with one of these ids would share a principal's agent's uid: its quotas, its
    signals. Returned as `file: entry` lines, for the warning at start."""
    first, last = uid_range
    found: list[str] = []
    for name in ("passwd", "group"):
        for line in _lines(etc / name):
            fields = line.split(":")
            if len(fields) > 2 and fields[2].isdigit() and first <= int(fields[2]) <= last:
                found.append(f"{name}: {fields[0]} ({fields[2]})")
    for name in ("subuid", "subgid"):
        for line in _lines(etc / name):
            fields = line.split(":")
            if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
                start, count = int(fields[1]), int(fields[2])
                if start <= last and start + count - 1 >= first:
                    found.append(f"{name}: {fields[0]} ({start}-{start + count - 1})")
    return found


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line and line[0] != "#"]
    except OSError:
        return []
