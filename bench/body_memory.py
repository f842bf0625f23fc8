"""What does one large JSON request body cost in memory? A real `uhp-server serve` gets one
`POST /v1/responses` whose input holds an inline file of about 46 MiB (a 62 MiB body, the
base64 of the file in a data URL), and the server's peak RSS (VmHWM in /proc/<pid>/status) is
read before and after. Printed: the growth of the peak, and that growth ÷ the body size.
Target: a few times the body size at most.

Usage:

    python bench/body_memory.py [--body-mib 62] [--smoke]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from tests.conftest import tools_dir
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess

KEY = "uhp_sk_bench_body_memory"
PROVIDER_KEY = "sk-bench-body-memory"


def peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert found is not None, status
    return int(found.group(1)) * 1024


def large_body(body_mib: int) -> bytes:
    data = os.urandom(body_mib * 1024 * 1024 * 3 // 4 - 4096)
    url = "data:application/octet-stream;base64," + base64.b64encode(data).decode()
    part = {"type": "input_file", "filename": "big.bin", "file_data": url}
    text = {"type": "input_text", "text": "SAY done"}
    body = {"model": "gpt-test", "input": [{"role": "user", "content": [text, part]}]}
    return json.dumps({**body, "background": True}).encode()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body-mib", type=int, default=62)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), body_mib=1)
    body = large_body(args.body_mib)
    with (
        start_provider(PROVIDER_KEY, ["gpt-test"]) as provider,
        tempfile.TemporaryDirectory() as tmp,
    ):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "UHP_API_KEY": KEY,
            "UHP_TOOLS_DIR": str(tools_dir()),
            "UHP_BASES": "codex",
            "OPENAI_API_KEY": PROVIDER_KEY,
            "OPENAI_BASE_URL": provider.base_url,
            "UHP_OPENAI_DEFAULT_MODEL": "gpt-test",
        }
        server = ServerProcess(Path(tmp) / "data", env).start()
        try:
            assert server.proc is not None
            pid = server.proc.pid
            httpx.get(f"{server.url}/v1/uhp")
            before = peak_rss(pid)
            started = time.monotonic()
            answer = httpx.post(
                f"{server.url}/v1/responses",
                content=body,
                headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
                timeout=300,
            )
            took = time.monotonic() - started
            after = peak_rss(pid)
        finally:
            server.stop()
    if answer.is_error:  # a refused body measures nothing
        raise SystemExit(f"the server refused the body: {answer.status_code} {answer.text[:300]}")
    growth = after - before
    print(f"body: {len(body) / 2**20:.1f} MiB, answer {answer.status_code} in {took:.1f} s")
    print(f"peak RSS (VmHWM): {before / 2**20:.0f} MiB before, {after / 2**20:.0f} MiB after")
    print(f"peak growth: {growth / 2**20:.0f} MiB = {growth / len(body):.1f}x the body")


if __name__ == "__main__":
    main()
