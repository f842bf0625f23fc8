"""What each step of a build runs in the sandbox (Environments §4's table), as shell scripts
made here from the project's manifests and the owner's declared specs.

Every script runs with the version's folder as its working directory, at the path sessions
mount it at, and writes what the installers print to its stdout (stderr joins it): that is
the build's log. Specs are the owner's words: each is quoted, and one that reads as an
option is refused before anything runs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from uhp_server.environments.builder import BuildFailed, Declared
from uhp_server.sandbox.egress import EGRESS_PROXY_PORT

# Where the build's own folders appear inside its sandbox.
CACHE_MOUNT = "/opt/uhp-build-cache"  # the principal's download caches (pip, npm, apt lists)
CA_MOUNT = "/opt/uhp-build-ca"  # the operator's CA bundle, read-only
CA_FILE = f"{CA_MOUNT}/ca.pem"
PROXY = f"http://127.0.0.1:{EGRESS_PROXY_PORT}"  # the egress proxy's relay inside a sandbox
REPORTS = "/workspace"  # what a step reports (package lists) lands in the build's workspace
APT_REPORT = "apt.list"  # there: the apt step's `dpkg-deb --show` lines
PIP_REPORT = "pip.json"  # there: the finishing step's `pip list --format json`

# Where installed things live in the version (a session's PATH begins with their bins).
VENV = ".venv"
NODE_MODULES = "node_modules"
APT_ROOT = "apt"
NODE_LOCKFILES = ("package-lock.json", "npm-shrinkwrap.json")

# Debian's archive, plain HTTP (apt checks the signatures itself), through the egress proxy.
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY = "http://deb.debian.org/debian-security"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass(frozen=True)
class Project:
    """What the version's folder declares, read on the host before the build runs."""

    requirements: bool  # requirements.txt
    pyproject: bool  # pyproject.toml
    package_json: bool
    lockfile: bool  # package-lock.json or npm-shrinkwrap.json
    setup_sh: bool
    declared: Declared

    @classmethod
    def read(cls, folder: Path, declared: Declared) -> Project:
        for spec in (*declared.pip, *declared.npm, *declared.apt):
            if not spec.strip() or spec.lstrip().startswith("-"):
                raise BuildFailed(f"Not a package spec: {spec!r}.")
        return cls(
            requirements=(folder / "requirements.txt").is_file(),
            pyproject=(folder / "pyproject.toml").is_file(),
            package_json=(folder / "package.json").is_file(),
            lockfile=any((folder / name).is_file() for name in NODE_LOCKFILES),
            setup_sh=(folder / "setup.sh").is_file(),
            declared=declared,
        )

    @property
    def python(self) -> bool:
        return self.requirements or self.pyproject or bool(self.declared.pip)

    @property
    def node(self) -> bool:
        return self.package_json or bool(self.declared.npm)

    @property
    def apt(self) -> bool:
        return bool(self.declared.apt)

    def python_needs_network(self, folder: Path) -> bool:
        """An empty requirements.txt needs none (a virtual environment is made offline)."""
        return self.pyproject or bool(self.declared.pip) or _has_requirements(folder)

    def node_needs_network(self, folder: Path) -> bool:
        return bool(self.declared.npm) or (self.package_json and _has_dependencies(folder))


def _has_requirements(folder: Path) -> bool:
    path = folder / "requirements.txt"
    if not path.is_file():
        return False
    lines = path.read_text(errors="replace").splitlines()
    return any(line.strip() and not line.strip().startswith("#") for line in lines)


def _has_dependencies(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "package.json").read_text())
    except (OSError, ValueError):
        return True  # npm says what is wrong with it, in the log
    kinds = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
    return not isinstance(manifest, dict) or any(manifest.get(kind) for kind in kinds)


def environment(mount: str, *, proxy: bool, ca: bool) -> dict[str, str]:
    """The build's environment, from nothing (the sandbox adds the proxy's variables when
    egress is on): the version's own bins first, caches in the principal's cache folder."""
    env = {
        "PATH": ":".join(
            (
                f"{mount}/{VENV}/bin",
                f"{mount}/{NODE_MODULES}/.bin",
                f"{mount}/{APT_ROOT}/usr/bin",
                "/usr/local/bin:/usr/bin:/bin",
            )
        ),
        "HOME": "/home/agent",
        "LANG": "C.UTF-8",
        "PROJECT_ROOT": mount,
        "PIP_CACHE_DIR": f"{CACHE_MOUNT}/pip",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_PROGRESS_BAR": "off",
        "PYTHONDONTWRITEBYTECODE": "1",
        "npm_config_cache": f"{CACHE_MOUNT}/npm",
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        "npm_config_progress": "false",
        "npm_config_loglevel": "notice",
    }
    if proxy:  # npm reads its own settings before the conventional variables
        env |= {"npm_config_proxy": PROXY, "npm_config_https_proxy": PROXY}
    if ca:
        # pip and Python's ssl take the bundle in place of theirs; Node adds it to its own.
        env |= dict.fromkeys(("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"), CA_FILE)
        env["NODE_EXTRA_CA_CERTS"] = CA_FILE
    return env


def _words(specs: Iterable[str]) -> str:
    return " ".join(shlex.quote(spec.strip()) for spec in specs)


_PREAMBLE = "set -eu\nexec 2>&1\nsay() { printf '\\n$ %s\\n' \"$*\"; }\n"


def python_script(project: Project, interpreter: str) -> str:
    """A virtual environment at .venv, then what requirements.txt, pyproject.toml and the
    declared specs ask for, in that order."""
    lines = [
        _PREAMBLE,
        f"say {shlex.quote(interpreter)} -m venv {VENV}",
        f"{shlex.quote(interpreter)} -m venv {VENV}",
        f"pip={VENV}/bin/python",
    ]
    if project.requirements:
        lines += [
            "say pip install -r requirements.txt",
            '"$pip" -m pip install -r requirements.txt',
        ]
    if project.pyproject:
        lines += ["say pip install .", '"$pip" -m pip install .']
    if project.declared.pip:
        specs = _words(project.declared.pip)
        lines += [f"say pip install {specs}", f'"$pip" -m pip install {specs}']
    return "\n".join(lines) + "\n"


def node_script(project: Project) -> str:
    """npm ci when a lockfile pins the tree, else npm install; then the declared specs
    (without saving them into package.json: they are the owner's declaration, not the
    project's)."""
    lines = [_PREAMBLE]
    if project.package_json:
        command = "npm ci" if project.lockfile else "npm install"
        lines += [f"say {command}", command]
    if project.declared.npm:
        specs = _words(project.declared.npm)
        lines += [f"say npm install --no-save {specs}", f"npm install --no-save {specs}"]
    return "\n".join(lines) + "\n"


def apt_script(packages: Iterable[str], proxy: bool) -> str:
    """The named packages and the dependencies the system lacks (apt's answer against the
    system's own dpkg status), downloaded by apt as the build's user with folders of its own
    (its lists in the principal's cache), each unpacked with dpkg -x under apt/. Nothing is
    installed: no maintainer script runs, the system's dpkg database is only read."""
    specs = _words(packages)
    proxy_option = f'Acquire::http::Proxy "{PROXY}";' if proxy else ""
    return f"""{_PREAMBLE}
state={CACHE_MOUNT}/apt
etc={REPORTS}/apt-etc
debs={REPORTS}/debs
mkdir -p "$state/lists/partial" "$debs/partial" "$etc/apt.conf.d" "$etc/preferences.d" \\
  "$etc/sources.list.d" "$etc/trusted.gpg.d"
. /usr/lib/os-release 2>/dev/null || . /etc/os-release
codename=${{VERSION_CODENAME:?the system names no Debian release}}
cat >"$etc/sources.list" <<SOURCES
deb [signed-by={DEBIAN_KEYRING}] {DEBIAN_MIRROR} $codename main
deb [signed-by={DEBIAN_KEYRING}] {DEBIAN_MIRROR} $codename-updates main
deb [signed-by={DEBIAN_KEYRING}] {DEBIAN_SECURITY} $codename-security main
SOURCES
cat >"$etc/apt.conf" <<CONF
Dir::Etc "$etc";
Dir::Etc::sourcelist "$etc/sources.list";
Dir::State::Lists "$state/lists";
Dir::Cache "$state";
Dir::Cache::archives "$debs";
Dir::State::status "/var/lib/dpkg/status";
Debug::NoLocking "true";
Acquire::Retries "3";
Acquire::Languages "none";
{proxy_option}
CONF
export APT_CONFIG="$etc/apt.conf"  # read before anything of the system's
apt() {{ apt-get -q "$@"; }}
say apt-get update
apt update
say apt-get install --download-only {specs}
apt install --download-only --no-install-recommends -y {specs}
mkdir -p {APT_ROOT}
: >"{REPORTS}/{APT_REPORT}"
for deb in "$debs"/*.deb; do
  [ -e "$deb" ] || continue
  say dpkg -x "$(basename "$deb")" {APT_ROOT}
  dpkg -x "$deb" {APT_ROOT}
  dpkg-deb --show --showformat='${{Package}}\\t${{Version}}\\n' "$deb" >>"{REPORTS}/{APT_REPORT}"
done
"""


def setup_script() -> str:
    return f"{_PREAMBLE}say bash setup.sh\nbash ./setup.sh\n"


def finishing_script() -> str:
    """What pip reports installed in the virtual environment (after setup.sh, which may have
    added to it)."""
    return f"{_PREAMBLE}{VENV}/bin/python -m pip list --format json >{REPORTS}/{PIP_REPORT}\n"
