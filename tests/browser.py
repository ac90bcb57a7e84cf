"""A headless Chromium for tests: Debian's ``chromium`` driven by Debian's ``chromedriver`` through Selenium.

Nothing is downloaded: Selenium is pointed at the system browser and driver
(``CHROMIUM``, ``CHROMEDRIVER``), so Selenium Manager never runs. The
browser gets a fresh profile in the test's temp dir and the flags that keep
it off the network (this machine's network is closed: background
networking, component updates, sync and QUIC would only fail).

Missing browser or driver: under ``CI=true`` the test fails (CI installs
both: ``scripts/install_system_packages.sh``), elsewhere it is skipped with
the reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def chromium_missing() -> str:
    """Why no browser can be started here ("" when it can); under ``CI=true`` a missing one fails the test."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (os.path.exists(p) or shutil.which(os.path.basename(p)))]
    if not missing:
        return ""
    why = f"{' and '.join(missing)} missing: install Debian's chromium and chromium-driver (scripts/install_system_packages.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(why + "; CI installs them")
    return why


def require_chromium() -> None:
    """Skip (fail under CI) when Debian's chromium or chromedriver is not installed."""
    why = chromium_missing()
    if why:
        pytest.skip(why)


def chromium(root: Path, width: int = 1280, height: int = 900, insecure_certs: bool = False) -> Any:
    """A headless Chromium with a fresh profile under ``root``; ``insecure_certs``: accept the test CA's certificates."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if os.path.exists(CHROMIUM) else str(shutil.which("chromium"))
    profile = root / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.accept_insecure_certs = insecure_certs
    driver_path = CHROMEDRIVER if os.path.exists(CHROMEDRIVER) else str(shutil.which("chromedriver"))
    service = Service(executable_path=driver_path, log_output=str(root / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def click_and_wait(driver: Any, element: Any, timeout: float = 30.0) -> None:
    """Click ``element`` and wait until the page it was on is gone and the next one has loaded.

    A click that submits a form or follows a link returns before the browser
    has navigated: an element looked up right after it may belong to the old
    page and go stale under the test (``StaleElementReferenceException``).
    """
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def gone(_driver: Any) -> bool:
        """The old page's element is stale. ChromeDriver says so with StaleElementReferenceException, or, when
        it asks while the old document is being torn down, with "Node with given id does not belong to the
        document": the same fact, in another error."""
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise

    element.click()
    wait = WebDriverWait(driver, timeout)
    wait.until(gone)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


class Screenshots:
    """Saves a numbered screenshot of each page into a folder of the test's temp dir, and says where."""

    def __init__(self, driver: Any, folder: Path) -> None:
        self.driver = driver
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.saved: list[Path] = []

    def take(self, name: str, max_height: int = 4000) -> Path:
        """The whole page (the window grown to the page's height, at most ``max_height``), then as it was."""
        path = self.folder / f"{len(self.saved) + 1:02d}-{name}.png"
        size = self.driver.get_window_size()
        height = int(self.driver.execute_script("return document.documentElement.scrollHeight"))
        self.driver.set_window_size(size["width"], min(max(height + 140, size["height"]), max_height))
        try:
            assert self.driver.save_screenshot(str(path)), f"no screenshot saved at {path}"
        finally:
            self.driver.set_window_size(size["width"], size["height"])
        self.saved.append(path)
        print(f"screenshot: {path}")
        return path

    def __iter__(self) -> Iterator[Path]:
        return iter(self.saved)
