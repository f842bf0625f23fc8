"""The agent runtime image: one image for every base, built from image/ in this folder.

What the enabled bases need on top of the recipe's common tools (`runtime_packages`, each
base's declaration) goes in as the BASE_PACKAGES build argument. The tag carries a digest of
the recipe and those packages, so a server runs exactly the image its code and bases expect
and `images build` is a no-op when that image exists. The base image comes from a registry
(`debian:bookworm-slim` by default) or, on a host with no registry, is bootstrapped from the
host's Debian mirror with debootstrap and imported (bootstrap.py).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import docker.errors

from uhp_server.sandbox.docker import bootstrap

log = logging.getLogger(__name__)

RECIPE_DIR = Path(__file__).parent / "image"
RUNTIME_REPOSITORY = "uhp-runtime"
LABEL_RECIPE = "uhp.image.recipe"  # digest of the recipe files
LABEL_BASE = "uhp.image.base"  # the FROM image
LABEL_CLI_PREFIX = "uhp.cli."  # uhp.cli.<base>=<pinned CLI version> this image serves

Say = Callable[[str], None]


class ImageError(RuntimeError):
    """The runtime image could not be built (detail for the operator, never for clients)."""


def runtime_packages(bases: Iterable[Any]) -> tuple[str, ...]:
    """The Debian packages the given bases declare for the runtime image, sorted, once each."""
    return tuple(sorted({package for base in bases for package in base.runtime_packages}))


def recipe_digest(packages: Iterable[str] = ()) -> str:
    digest = hashlib.sha256()
    for path in sorted(RECIPE_DIR.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for package in sorted(set(packages)):
        digest.update(b"package\0" + package.encode() + b"\0")
    return digest.hexdigest()


def runtime_tag(packages: Iterable[str] = ()) -> str:
    return f"{RUNTIME_REPOSITORY}:{recipe_digest(packages)[:12]}"


def image_labels(api: Any, ref: str) -> dict[str, str] | None:
    """The image's labels, or None when the engine does not have it."""
    try:
        info = api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return None
    return dict((info.get("Config") or {}).get("Labels") or {})


def is_current(
    api: Any, ref: str, clis: Mapping[str, str] = {}, packages: Iterable[str] = ()
) -> bool:
    """True when `ref` exists, was built from this recipe with `packages` and records every
    CLI in `clis`."""
    labels = image_labels(api, ref)
    if labels is None or labels.get(LABEL_RECIPE) != recipe_digest(packages):
        return False
    return all(labels.get(LABEL_CLI_PREFIX + name) == v for name, v in clis.items())


def ensure_base_image(api: Any, base_image: str, mode: str, say: Say) -> str:
    """The FROM image to build on. mode: "auto" (local, else pull, else bootstrap),
    "always" (bootstrap from Debian packages), "never" (local or pull only)."""
    if mode == "always":
        return bootstrap.base_image(api, say)
    if image_labels(api, base_image) is not None:
        return base_image
    try:
        say(f"pulling {base_image} ...")
        api.pull(base_image)
        return base_image
    except docker.errors.APIError as exc:
        if mode == "never":
            raise ImageError(f"cannot pull {base_image}: {exc.explanation or exc}") from exc
        say(f"cannot pull {base_image} (no registry?); bootstrapping from Debian packages")
    return bootstrap.base_image(api, say)


def build_runtime(
    api: Any,
    *,
    base_image: str,
    bootstrap_mode: str = "auto",
    clis: Mapping[str, str] = {},
    packages: Iterable[str] = (),
    tag: str | None = None,
    force: bool = False,
    say: Say = print,
) -> str:
    """Build the runtime image with the bases' `packages` unless it is current; returns its
    tag."""
    packages = tuple(sorted(set(packages)))
    tag = tag or runtime_tag(packages)
    if not force and is_current(api, tag, clis, packages):
        say(f"{tag} is up to date")
        return tag
    source = ensure_base_image(api, base_image, bootstrap_mode, say)
    labels = {LABEL_RECIPE: recipe_digest(packages), LABEL_BASE: source}
    labels.update({LABEL_CLI_PREFIX + name: version for name, version in clis.items()})
    say(f"building {tag} from {source} ...")
    stream = api.build(
        path=str(RECIPE_DIR),
        tag=tag,
        buildargs={"BASE_IMAGE": source, "BASE_PACKAGES": " ".join(packages)},
        labels=labels,
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            raise ImageError(f"building {tag} failed: {chunk['error'].strip()}")
        text = chunk.get("stream", "").rstrip()
        if text:
            log.debug("image_build", extra={"line": text})
    if not is_current(api, tag, clis, packages):
        raise ImageError(f"building {tag} produced no image")
    say(f"built {tag}")
    return tag


def copy_image(source: Any, target: Any, ref: str) -> None:
    """Copy image `ref` from engine `source` to engine `target` (docker save | docker load,
    streamed): engines with no registry between them still run one image."""
    target.load_image(source.get_image(ref))
    if image_labels(target, ref) is None:
        raise ImageError(f"copying {ref} to another engine produced no image")
