"""Drive a real chat UI, Open WebUI, through the Chat Completions door in headless Chromium.

A manual check, not part of CI: `pip install open-webui` brings about 260 packages (torch and
CUDA libraries among them, a 7.4 GB environment here) and the UI takes a minute to start.

    python3 -m venv /tmp/owui && /tmp/owui/bin/pip install open-webui
    .venv/bin/python scripts/open_webui_check.py /tmp/owui/bin/open-webui

It starts the scripted provider and a server (Codex base), starts Open WebUI offline with
the door as its only OpenAI connection (no title, tag or follow-up calls, which would be
extra tasks), sends two messages in one chat from the browser, and checks the answers, the
file link and that both turns ran in one session. Screenshots go to the printed folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, server_env
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess, free_port

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def open_webui_env(door: str, model: str, data_dir: Path) -> dict[str, str]:
    quiet = ("TITLE", "FOLLOW_UP", "TAGS", "AUTOCOMPLETE", "RETRIEVAL_QUERY", "SEARCH_QUERY")
    return {
        **os.environ,
        "DATA_DIR": str(data_dir),
        "WEBUI_AUTH": "False",
        "WEBUI_SECRET_KEY": "open-webui-check-" + "x" * 16,
        "ENABLE_OLLAMA_API": "False",
        "OPENAI_API_BASE_URL": door,
        "OPENAI_API_KEY": API_KEY,
        "DEFAULT_MODELS": model,
        "OFFLINE_MODE": "True",
        "HF_HUB_OFFLINE": "1",
        "RAG_EMBEDDING_ENGINE": "openai",  # no local embedding model to download
        **{f"ENABLE_{name}_GENERATION": "False" for name in quiet},
    }


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("open-webui exited; see its log")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("open-webui did not start")


def send(page: Page, *lines: str) -> None:
    box = page.locator("#chat-input")
    box.click()
    for index, line in enumerate(lines):
        if index:
            page.keyboard.press("Shift+Enter")
        page.keyboard.type(line)
    page.keyboard.press("Enter")


def drive(url: str, shots: Path) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url, wait_until="domcontentloaded", timeout=120_000)
        page.locator("#chat-input").wait_for(timeout=90_000)
        for _ in range(3):  # the "what's new" dialog of a first visit
            if page.locator("div[role=dialog]").count() == 0:
                break
            page.keyboard.press("Escape")
            time.sleep(1)
        send(page, "RUN echo from-the-ui > ui.txt", "SAY hello from open webui")
        page.get_by_text("hello from open webui").first.wait_for(timeout=120_000)
        page.get_by_role("link", name="ui.txt").first.wait_for(timeout=30_000)
        page.screenshot(path=str(shots / "first.png"))
        send(page, "RUN cat ui.txt", "SAY again {output}")
        page.get_by_text("again from-the-ui").first.wait_for(timeout=120_000)
        page.screenshot(path=str(shots / "second.png"))
        browser.close()


def main() -> None:
    open_webui = sys.argv[1] if len(sys.argv) > 1 else "open-webui"
    scratch = Path(tempfile.mkdtemp(prefix="open-webui-check-"))
    print("logs and screenshots:", scratch, flush=True)
    provider = start_provider(PROVIDER_KEY, MODELS)
    server = ServerProcess(scratch / "uhp", server_env(provider, UHP_BASES="codex")).start()
    model = httpx.get(f"{server.url}/openai/v1/models", headers=AUTH).json()["data"][0]["id"]
    port = free_port()
    (scratch / "owui").mkdir()
    env = open_webui_env(f"{server.url}/openai/v1", model, scratch / "owui")
    with open(scratch / "open-webui.log", "wb") as log:
        proc = subprocess.Popen(
            [open_webui, "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        drive(f"http://127.0.0.1:{port}/", scratch)
        sessions = httpx.get(f"{server.url}/v1/sessions", headers=AUTH).json()["sessions"]
        assert len(sessions) == 1, f"expected one session, got {len(sessions)}"
        print("Open WebUI: both answers shown, the file linked, one session", flush=True)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)
        server.stop()
        provider.stop()


if __name__ == "__main__":
    main()
