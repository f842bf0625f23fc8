"""`uhp-server`: serve, manage API keys, install the pinned agent CLIs."""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sqlite3
import sys
import time
from pathlib import Path

from alembic.util.exc import CommandError as AlembicError
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from harness_bases import compile_cache, registry
from harness_bases.base import HarnessBase
from storage import keys, mcp_secrets, sealing
from storage.db import Database
from uhp_server.http import connections
from uhp_server.http.connections import ACCEPT_BATCH
from uhp_server.ops.logs import configure_logging
from uhp_server.sandbox.registry import sandbox_names
from uhp_server.settings import Settings


def _settings(args: argparse.Namespace) -> Settings:
    """The settings, and the logs every command writes: a command's warnings (a data
    directory others can enter, a base that does not load) come with their fields, as the
    server logs them, instead of Python's bare last-resort line; its info lines are the
    server's start log, which `serve` raises to UHP_LOG_LEVEL."""
    overrides = {}
    for name in ("host", "port", "data_dir", "sandbox"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    settings = Settings(**overrides)
    configure_logging("WARNING")
    return settings


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from uhp_server.app import create_app
    from uhp_server.gateway.embeddings import EmbeddingModelSettingError
    from uhp_server.gateway.providers_file import ProvidersFileError, load_providers
    from uhp_server.harnesses.default_base import DefaultBaseError
    from uhp_server.memories.registry import ProviderSetupError

    settings = _settings(args)
    configure_logging(settings.log_level)
    try:
        load_providers(settings)  # a bad providers file stops start-up before anything else
    except ProvidersFileError as exc:
        print(f"uhp-server: bad UHP_PROVIDERS_FILE: {exc}", file=sys.stderr)
        return 2
    try:  # a key that is not one stops start-up before anything else
        sealing.load_sealer(settings.secrets_key, settings.data_dir)
    except sealing.SealingError as exc:
        print(f"uhp-server: secrets key: {exc}", file=sys.stderr)
        return 2
    db = Database(settings.database)
    if not settings.api_key and not db.run(keys.any_key_exists):
        _key_id, key = db.run(keys.create_key, keys.DEFAULT_PRINCIPAL)
        print("Created an API key for the default principal. It is shown only this once:")
        print(f"  {key}")
    db.close()
    # The connection cap in force (the descriptor limit may lower it): streams stay below it.
    cap = connections.connection_cap(settings.max_connections, connections.raise_fd_limit())
    settings = settings.model_copy(update={"max_connections": cap})
    try:
        app = create_app(settings)
    except (DefaultBaseError, ProviderSetupError, EmbeddingModelSettingError) as exc:
        # one line naming the setting, not a traceback
        print(f"uhp-server: {exc}", file=sys.stderr)
        return 2
    print(f"UHP Server listening on http://{settings.host}:{settings.port}", flush=True)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        timeout_graceful_shutdown=15,
        http=_connection_guarded_protocol(settings),
        backlog=ACCEPT_BATCH,
    )
    return 0


def _connection_guarded_protocol(settings: Settings) -> type:

    connections.quiet_repeated_errors()
    guard = connections.ConnectionGuard(
        max_connections=settings.max_connections,
        header_timeout=settings.request_header_timeout_seconds,
        body_timeout=settings.request_body_timeout_seconds,
    )
    return connections.guarded_protocol(guard)


def cmd_keys(args: argparse.Namespace) -> int:
    settings = _settings(args)
    db = Database(settings.database)
    if args.keys_command == "create":
        key_id, key = db.run(keys.create_key, args.principal)
        # The key alone on stdout, so `export UHP_KEY=$(uhp-server keys create …)` works.
        print(key)
        print(
            f"created {key_id} for principal {args.principal!r}; the key is shown only once",
            file=sys.stderr,
        )
        return 0
    if args.keys_command == "revoke":
        if db.run(keys.revoke_key, args.key):
            print("revoked")
            return 0
        print("no such active key", file=sys.stderr)
        return 1
    for row, principal in db.run(keys.list_keys):
        state = "revoked" if row.revoked_at else "active"
        print(f"{row.id} {principal} {state}")
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from storage import migrate

    settings = _settings(args)
    db = Database(settings.database)  # opening it upgrades it (storage/migrate.py)
    try:
        print(f"at revision {migrate.current(db.engine)} (newest: {migrate.head()})")
    finally:
        db.close()
    return 0


def cmd_secrets(args: argparse.Namespace) -> int:
    """`new-key` prints a key for UHP_SECRETS_KEY; `rotate` seals every stored secret again
    with the first key (with the data directory's key file: a new key, put first)."""
    if args.secrets_command == "new-key":
        print(sealing.new_key())
        return 0
    settings = _settings(args)
    try:
        if not settings.secrets_key:
            path = sealing.key_file(settings.data_dir)
            old = path.read_text(encoding="ascii").split() if path.exists() else []
            sealing.write_key_file(path, [sealing.new_key(), *old])
            print(f"added a new key, first, to {path}", file=sys.stderr)
        sealer = sealing.load_sealer(settings.secrets_key, settings.data_dir)
    except (sealing.SealingError, OSError) as exc:
        print(f"uhp-server: {exc}", file=sys.stderr)
        return 2
    db = Database(settings.database, sealer)
    try:
        done = db.run(mcp_secrets.reseal)
    finally:
        db.close()
    print(f"resealed {done.resealed} secrets with key {sealer.current_id}")
    if done.unreadable:
        print(
            f"{done.unreadable} secrets are sealed with a key this server was not given; "
            "they stay as they are",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_bases(args: argparse.Namespace) -> int:
    settings = _settings(args)
    known = registry()
    if args.bases_command == "list":
        for name, base in known.items():
            if args.default_only and not base.enabled_by_default:
                continue
            if args.wire and base.wire != args.wire:
                continue
            if args.names_only:
                print(name)
                continue
            version = base.installed_version(settings.tools_dir) or "not installed"
            pins = " ".join(f"{p.registry}:{p.package}@{p.version}" for p in base.cli_pins)
            print(f"{name} pinned={base.cli_version} installed={version} ({pins})")
        return 0
    if args.bases_command == "host-packages":
        needed = {package for base in known.values() for package in base.host_packages}
        print("\n".join(sorted(needed)))
        return 0
    names = args.names or list(known)  # every registered base
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown bases: {', '.join(unknown)}", file=sys.stderr)
        return 2
    print(f"installing {', '.join(names)} into {settings.tools_dir} ...", flush=True)
    # Side by side: an install mostly waits on a registry and on npm's or pip's own work, and
    # the bases' folders are their own (the pinned node they share takes turns itself).
    errors = _install_side_by_side([known[n] for n in names], settings.tools_dir, args.jobs)
    if errors:
        # npm's and pip's caches are shared, and each has had races between processes
        # (npm/cli#1484, pypa/pip#9034): what failed is tried again, one at a time.
        retried = [known[n] for n in errors]
        errors = _install_side_by_side(retried, settings.tools_dir, 1)
    failed: BaseException | None = None
    for name, error in errors.items():
        if isinstance(error, RuntimeError) and not (args.names or known[name].enabled_by_default):
            # Installing every base: an opt-in one this host cannot install (Kimi CLI and
            # OpenHands CLI need a host CPython >= 3.12) is left out, loudly, and the server
            # installs and runs without it; named, or a default base, it is an error.
            print(f"{name}: LEFT OUT, not installed: {error}", file=sys.stderr)
        else:
            print(f"{name}: NOT INSTALLED: {error}", file=sys.stderr)
            failed = failed or error
    if failed is not None:
        raise failed
    return 0


def _install_side_by_side(
    bases: list[HarnessBase], tools_dir: Path, jobs: int
) -> dict[str, BaseException]:
    """Install `bases`, `jobs` at once, each printed as it is done; what failed, by name."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs))
    errors: dict[str, BaseException] = {}
    try:
        installs = {pool.submit(_install_base, base, tools_dir): base.name for base in bases}
        for done in concurrent.futures.as_completed(installs):
            error = done.exception()
            if error is None:
                print(f"{installs[done]}: {done.result()}", flush=True)
            else:
                errors[installs[done]] = error
    except BaseException:  # Ctrl-C: the installs not begun never begin
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return errors


def _install_base(base: HarnessBase, tools_dir: Path) -> str:
    """Install one base's pinned CLI, and node's compile cache of it where it is a node CLI
    (harness_bases/compile_cache.py); what it then reports, and how long that took."""
    started = time.monotonic()
    base.install(tools_dir)
    made = compile_cache.warm(tools_dir, base)  # None: no node CLI
    cached = "" if made is None else ", compile cache made" if made else ", NO compile cache"
    took = time.monotonic() - started
    return f"{base.installed_version(tools_dir)} ({took:.0f} s{cached})"


def cmd_images(args: argparse.Namespace) -> int:
    import docker.errors

    from uhp_server.context import usable_bases
    from uhp_server.sandbox.docker import images
    from uhp_server.sandbox.docker.bootstrap import BootstrapError
    from uhp_server.sandbox.docker.sandbox import engine_client

    settings = _settings(args)
    try:
        api = engine_client()
    except docker.errors.DockerException as exc:
        print(f"no Docker engine answers: {exc}", file=sys.stderr)
        return 1
    if args.images_command == "list":
        packages = images.runtime_packages(usable_bases(settings).values())
        tag = settings.docker_image or images.runtime_tag(packages)
        labels = images.image_labels(api, tag)
        state = "missing" if labels is None else "present"
        print(f"{tag} {state}")
        for key, value in sorted((labels or {}).items()):
            print(f"  {key}={value}")
        return 0 if labels is not None else 1
    known = registry()
    names = args.names or list(usable_bases(settings))  # what `serve` would enable
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown bases: {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        tag = images.build_runtime(
            api,
            base_image=args.base_image or settings.docker_base_image,
            bootstrap_mode=args.bootstrap,
            clis={name: known[name].cli_version for name in names},
            packages=images.runtime_packages(known[name] for name in names),
            force=args.force,
        )
    except (images.ImageError, BootstrapError, docker.errors.DockerException) as exc:
        print(f"images build failed: {exc}", file=sys.stderr)
        return 1
    print(tag)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="uhp-server", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", type=Path, help="data folder (UHP_DATA_DIR)")

    serve = sub.add_parser("serve", help="start the server")
    serve.add_argument("--host", help="listen address (UHP_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (UHP_PORT, default 8080)")
    serve.add_argument("--sandbox", choices=sandbox_names(), help="sandbox backend (UHP_SANDBOX)")
    data_dir(serve)
    serve.set_defaults(func=cmd_serve)

    keys_parser = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys_parser.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="print a new key for a principal (once)")
    create.add_argument("--principal", default=keys.DEFAULT_PRINCIPAL)
    data_dir(create)
    revoke = keys_sub.add_parser("revoke", help="revoke a key (by id or by the key itself)")
    revoke.add_argument("key")
    data_dir(revoke)
    data_dir(keys_sub.add_parser("list", help="list keys (ids only)"))
    keys_parser.set_defaults(func=cmd_keys)

    db_parser = sub.add_parser("db", help="the database's schema (UHP_DATABASE_URL)")
    db_sub = db_parser.add_subparsers(dest="db_command", required=True)
    data_dir(db_sub.add_parser("upgrade", help="migrate it to the newest revision now"))
    db_parser.set_defaults(func=cmd_db)

    secrets_parser = sub.add_parser("secrets", help="the keys that seal stored secrets")
    secrets_sub = secrets_parser.add_subparsers(dest="secrets_command", required=True)
    secrets_sub.add_parser("new-key", help="print a new key for UHP_SECRETS_KEY")
    data_dir(
        secrets_sub.add_parser(
            "rotate",
            help="seal every stored secret with the first key (key file: a new key first); "
            "drop an old key only after this has run, reporting nothing unreadable, and "
            "every replica seals with the new key",
        )
    )
    secrets_parser.set_defaults(func=cmd_secrets)

    bases = sub.add_parser("bases", help="install and inspect the pinned agent CLIs")
    bases_sub = bases.add_subparsers(dest="bases_command", required=True)
    install = bases_sub.add_parser("install", help="install pinned CLIs (default: every base)")
    install.add_argument("names", nargs="*")
    install.add_argument(
        "--jobs", type=int, default=4, help="how many to install at once (default: 4)"
    )
    listing = bases_sub.add_parser("list", help="every registered base: pins, installed versions")
    listing.add_argument("--names", dest="names_only", action="store_true", help="names only")
    listing.add_argument(
        "--default",
        dest="default_only",
        action="store_true",
        help="only the bases enabled when UHP_BASES is unset",
    )
    listing.add_argument("--wire", help="only the bases whose CLI speaks this wire (e.g. chat)")
    bases_sub.add_parser("host-packages", help="Debian packages the bases' installs need")
    bases.set_defaults(func=cmd_bases)

    images = sub.add_parser("images", help="the docker sandbox's agent runtime image")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    build = images_sub.add_parser("build", help="build it unless current (labels tell)")
    build.add_argument("names", nargs="*", help="bases it serves (default: what serve enables)")
    build.add_argument("--base-image", help="FROM image (UHP_DOCKER_BASE_IMAGE)")
    build.add_argument(
        "--bootstrap",
        choices=["auto", "always", "never"],
        default="auto",
        help="make the base image from Debian packages: when it cannot be pulled (auto)",
    )
    build.add_argument("--force", action="store_true", help="rebuild even when current")
    images_sub.add_parser("list", help="the runtime image this version runs, and its labels")
    images.set_defaults(func=cmd_images)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValidationError as exc:
        print(f"uhp-server: {settings_problem(exc)}", file=sys.stderr)
        return 2
    except (AlembicError, SQLAlchemyError, sqlite3.Error) as exc:
        # The database cannot be opened or brought to this release's schema: one line that
        # says which, not a traceback.
        print(f"uhp-server: {database_problem(exc)}", file=sys.stderr)
        return 1


def database_problem(exc: Exception) -> str:
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    if isinstance(exc, AlembicError):
        return (
            f"the database's schema is not one this release knows ({first}); was it made by a "
            "newer release? Point UHP_DATABASE_URL at this release's database."
        )
    return f"cannot open the database (UHP_DATABASE_URL / UHP_DATA_DIR): {first}"


def settings_problem(exc: ValidationError) -> str:
    """pydantic's multi-line dump as one line a person can act on: the first bad variable."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or "settings"
    value = first.get("input")
    shown = f" (got {value!r})" if isinstance(value, (str, int, float)) else ""
    return f"bad setting UHP_{field.upper()}{shown}: {first.get('msg', 'invalid')}"


if __name__ == "__main__":
    raise SystemExit(main())
