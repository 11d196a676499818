"""`python -m builder ui` for the tests, through the real CLI: `running_ui` starts it on a free
loopback port and stops it; `browser` is headless chromium driven by selenium (Debian's chromium
and chromedriver, which localstack/setup.d/40-browser.sh installs; `needs_browser` skips a test
only when they are missing)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                   reason="chromium/chromedriver not installed: run localstack/setup.d/40-browser.sh")
START_TIMEOUT = 30.0  # seconds until the ui accepts connections
STOP_TIMEOUT = 10.0   # seconds after SIGINT before SIGKILL


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_ui(store: str | os.PathLike[str], *extra: str, env: Mapping[str, str] | None = None) -> Iterator[int]:
    """`python -m builder ui --store STORE --port P [extra...]` (from the repository, with `env`
    added to this environment) once it accepts connections on 127.0.0.1:P, at most 30 s; stopped
    when the block ends (SIGINT to its process group, SIGKILL after 10 s). Yields P."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "builder", "ui", "--store", str(store), "--port", str(port), *extra],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                raise AssertionError(f"the ui exited ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
            assert time.monotonic() < deadline, f"the ui did not accept connections on port {port} in {START_TIMEOUT:.0f} s"
            time.sleep(0.1)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless chromium (selenium's webdriver), pages loaded within 30 s; quit afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def wait_for(driver: Any, css: str, text: str | None = None, timeout: float = 20) -> Any:
    """The element matching `css` once present (and, with `text`, once it contains `text`)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout)
    if text is None:
        return wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))
    wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    return driver.find_element(By.CSS_SELECTOR, css)


def click(driver: Any, css: str, text: str | None = None, timeout: float = 20) -> None:
    """Click the first element matching `css` (and, with `text`, whose text is exactly `text`),
    found and clicked in one script: the page redraws its list and detail panes every second,
    so an element found by one webdriver call can be stale by the next (a StaleElementReference
    in CI between a `find_element` and its `click`)."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = ("const hit = [...document.querySelectorAll(arguments[0])]"
              ".find(e => arguments[1] === null || e.textContent.trim() === arguments[1]);"
              "if (hit) hit.click(); return !!hit;")
    WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script, css, text))
