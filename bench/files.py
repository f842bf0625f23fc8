"""What do files cost? The per-turn artifact walk, and uploads through the streaming parser.

- walk: a workspace of many unchanged files plus a few new ones; the time to snapshot it and
  to collect the artifacts (hash + copy into the blob store + rows), against a bare
  `os.walk` + `lstat` of the same tree. Target: collect ≤ 100 ms for 5,000 files.
- upload: a 64 MiB file through the streaming multipart parser in-process (parse, count,
  hash, write to the blob store), against the floor any content-addressed store pays: sha256
  and write the same bytes in the same 64 KiB chunks. Target: ≤ 1.5x that floor. Then the
  same file by `POST /v1/files` to a real `uhp-server serve`, end to end, and
  how long refusing a file one byte over the limit takes (the body is read, none of it kept).

Usage:

    python bench/files.py [--files N] [--upload-mib M] [--walk-rounds N] [--uploads N] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from storage.blobs import BlobStore, BlobWriter
from storage.db import Database
from tests.support.server import ServerProcess
from uhp_server.doors.uhp.uploads import receive_upload
from uhp_server.engine.turns.artifacts import ArtifactCollector, ArtifactLimits, snapshot

KEY = "uhp_sk_bench_files"
COLLECT_TARGET_MS = 100.0
PARSE_RATIO_TARGET = 1.5


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bare_walk(root: Path) -> int:
    count = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            os.lstat(os.path.join(folder, name))
            count += 1
    return count


def bench_walk(files: int, rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        for i in range(files):
            folder = root / f"dir{i % 50}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i}.txt").write_text(f"file {i}\n")
        walks, snaps, collects = [], [], []
        db = Database(Path(tmp) / "db.sqlite3")  # one database, warm, as in the server
        for r in range(rounds):
            started = time.perf_counter()
            bare_walk(root)
            walks.append(time.perf_counter() - started)
            started = time.perf_counter()
            before = snapshot(root)
            snaps.append(time.perf_counter() - started)
            for j in range(20):  # the turn writes 20 files of 64 KiB
                (root / f"out{r}_{j}.bin").write_bytes(os.urandom(64 * 1024))
            collector = ArtifactCollector(
                db, BlobStore(Path(tmp) / "blobs"), ArtifactLimits(10_000, 1 << 30, 1 << 34)
            )
            started = time.perf_counter()
            collected = collector.collect(
                root,
                before,
                principal_id="p",
                session_id=f"s{r}",
                container_id="c",
                response_id=f"r{r}",
            )
            collects.append(time.perf_counter() - started)
            assert len(collected.rows) == 20, collected.skipped
        walk_ms, snap_ms, collect_ms = map(_median_ms, (walks, snaps, collects))
        print(f"workspace: {files} files, the turn adds 20 x 64 KiB")
        print(f"  bare os.walk+lstat   {walk_ms:8.1f} ms")
        print(f"  snapshot             {snap_ms:8.1f} ms   ({snap_ms / walk_ms:.2f}x bare walk)")
        verdict = "met" if collect_ms <= COLLECT_TARGET_MS else "NOT met"
        print(
            f"  collect (walk+store) {collect_ms:8.1f} ms   "
            f"target <= {COLLECT_TARGET_MS:.0f} ms: {verdict}"
        )


class _FakeRequest:
    """What receive_upload reads of a request: headers and a body in 64 KiB chunks."""

    def __init__(self, body: bytes, boundary: str) -> None:
        self.body = body
        self.headers = {
            "content-type": f"multipart/form-data; boundary={boundary}",
            "content-length": str(len(body)),
        }

    async def stream(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self.body), 64 * 1024):
            yield self.body[i : i + 64 * 1024]


def _hash_and_write(path: Path, payload: bytes) -> float:
    started = time.perf_counter()
    digest = hashlib.sha256()
    with path.open("wb") as handle:
        for i in range(0, len(payload), 64 * 1024):
            chunk = payload[i : i + 64 * 1024]
            digest.update(chunk)
            handle.write(chunk)
    digest.hexdigest()
    return time.perf_counter() - started


def _parse_once(tmp: Path, payload: bytes) -> float:
    boundary = "benchboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="p.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + payload
        + f"\r\n--{boundary}--\r\n".encode()
    )
    blobs = BlobStore(tmp / f"blobs{time.monotonic_ns()}")
    started = time.perf_counter()
    request = _FakeRequest(body, boundary)
    receiving = receive_upload(request, blobs.writer, 1 << 40)  # type: ignore[arg-type]  # stand-in
    upload = asyncio.run(receiving)
    assert isinstance(upload.sink, BlobWriter)
    upload.sink.keep()
    elapsed = time.perf_counter() - started
    assert upload.sink.size == len(payload)
    shutil.rmtree(blobs.root)
    return elapsed


def bench_upload(mib: int, rounds: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        payload = os.urandom(mib * 1024 * 1024)
        source = tmp / "payload.bin"
        source.write_bytes(payload)
        floors, parses = [], []
        for i in range(rounds):
            floors.append(_hash_and_write(tmp / f"floor{i}.bin", payload))
            (tmp / f"floor{i}.bin").unlink()
            parses.append(_parse_once(tmp, payload))
        uploads, refusals = _over_http(tmp, source, mib, rounds)
        floor_ms, parse_ms, upload_ms, refuse_ms = map(
            _median_ms, (floors, parses, uploads, refusals)
        )
        ratio = parse_ms / floor_ms
        verdict = "met" if ratio <= PARSE_RATIO_TARGET else "NOT met"
        print(f"upload: {mib} MiB")
        print(f"  sha256 + write (floor) {floor_ms:8.1f} ms")
        print(
            f"  parse+hash+store       {parse_ms:8.1f} ms   ({ratio:.2f}x floor, "
            f"target <= {PARSE_RATIO_TARGET:.1f}x: {verdict})"
        )
        print(
            f"  POST /v1/files (HTTP)  {upload_ms:8.1f} ms   ({mib / (upload_ms / 1000):.0f} MiB/s"
            ", most of it uvicorn's HTTP/1.1 parsing)"
        )
        print(f"  one byte over: 413 in {refuse_ms:.1f} ms (the body read, none of it kept)")


def _over_http(tmp: Path, source: Path, mib: int, rounds: int) -> tuple[list[float], list[float]]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "UHP_API_KEY": KEY,
        "UHP_BASES": "",
        "UHP_MAX_FILE_BYTES": str(mib * 1024 * 1024),
    }
    server = ServerProcess(tmp / "data", env).start()
    uploads, refusals = [], []
    try:
        headers = {"Authorization": f"Bearer {KEY}"}
        over = source.read_bytes() + b"x"
        with httpx.Client(base_url=server.url, headers=headers, timeout=300) as http:
            for _ in range(rounds):
                with source.open("rb") as handle:
                    started = time.perf_counter()
                    answer = http.post("/v1/files", files={"file": ("p.bin", handle)})
                    uploads.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
                started = time.perf_counter()
                refused = http.post("/v1/files", files={"file": ("big.bin", over)})
                refusals.append(time.perf_counter() - started)
                assert refused.status_code == 413, refused.text
    finally:
        server.stop()
    return uploads, refusals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--upload-mib", type=int, default=64)
    parser.add_argument("--walk-rounds", type=int, default=5)
    parser.add_argument("--uploads", type=int, default=3, help="rounds of each upload")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), files=50, upload_mib=1, walk_rounds=1, uploads=1)
    bench_walk(args.files, args.walk_rounds)
    bench_upload(args.upload_mib, args.uploads)


if __name__ == "__main__":
    main()
