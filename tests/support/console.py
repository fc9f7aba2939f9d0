"""The web console in a real headless Chromium (Debian's ``chromium`` driven by Playwright), for
the console tests: the ``browser`` fixture, and :func:`signed_in`, a page that has opened the
console and given it an API key, whose screenshots are written out if the test fails.

Importing this module skips the importing test module when Playwright or Chromium is missing
(``NOETA_REQUIRE_BROWSER=1``, as in CI, makes that a failure instead)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("NOETA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if os.environ.get("NOETA_REQUIRE_BROWSER") == "1":  # CI: a missing browser is a failure, not a skip
    import playwright.async_api as playwright_api
else:
    playwright_api = pytest.importorskip("playwright.async_api", reason="needs the [browser] extra")
    if CHROMIUM is None:
        pytest.skip("needs a system Chromium (e.g. apt-get install chromium)", allow_module_level=True)

#: Generous: the page polls and streams; only a broken console takes this long.
WAIT_MS = 30_000


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium for one test (import it into the test module to use it)."""
    assert CHROMIUM is not None, "NOETA_REQUIRE_BROWSER=1 but no chromium on PATH"
    async with playwright_api.async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


class Pages:
    """A page, the script errors it raised, and a screenshot of each page the test visits
    (written out if the test fails)."""

    def __init__(self, page: Any, folder: Path) -> None:
        self.page, self.folder, self.shots = page, folder, {}
        self.errors: list[str] = []
        page.on("pageerror", lambda err: self.errors.append(str(err)))

    async def visit(self, name: str, url: str) -> None:
        """Open ``url`` and take its screenshot as ``name``."""
        await self.page.goto(url)
        await self.snap(name)

    async def snap(self, name: str) -> None:
        """Take a screenshot of the page as it is now, as ``name``."""
        self.shots[name] = await self.page.screenshot(full_page=True)

    async def write(self) -> list[Path]:
        """Write every screenshot (and one of the page now) into the folder; their paths."""
        try:
            self.shots["at-failure"] = await self.page.screenshot(full_page=True)
        except Exception:  # the browser itself may be gone
            pass
        paths = []
        for name, png in self.shots.items():
            path = self.folder / f"console-{name}.png"
            path.write_bytes(png)
            paths.append(path)
        return paths


async def give_key(page: Any, key: str) -> None:
    """Answer the console's API key dialog (open on a first visit) with ``key``, and wait until
    the console accepted it."""
    await page.wait_for_selector("#key-dialog[open]", timeout=WAIT_MS)
    await page.fill("#key-input", key)
    await page.click("#key-save")
    await page.wait_for_selector("#key-dialog", state="hidden", timeout=WAIT_MS)


@contextlib.asynccontextmanager
async def signed_in(
    browser: Any, url: str, key: str, folder: Path, *, first: str = "tasks", width: int = 1280
) -> AsyncIterator[Pages]:
    """``async with signed_in(browser, url, key, tmp_path) as pages:`` — a new page that opened the
    console at ``url`` (its screenshot named ``first``) and gave it ``key``. When the block ends,
    the page must have raised no script error; if anything in it fails, every screenshot is
    written into ``folder`` and their paths printed."""
    page = await browser.new_page(viewport={"width": width, "height": 900})
    pages = Pages(page, folder)
    try:
        await pages.visit(first, url)
        await give_key(page, key)
        yield pages
        assert pages.errors == []
    except BaseException:
        print("console screenshots:", *await pages.write(), sep="\n  ")
        raise


async def start_wire_task(pages: Pages, base_url: str, goal: str, task_queue: str) -> str:
    """Start, from the console's form, a task that may wire money under the amount guard (as
    tests.support.inbox's body does over HTTP); the task's id, once its page is open."""
    page = pages.page
    await pages.visit("new-task", base_url + "/#/new")
    await page.fill("[data-testid=new-goal]", goal)
    await page.fill("input[name=provider]", "FakeLLMProvider")
    await page.fill("[data-testid=new-tools]", "wire_money")
    await page.fill("[data-testid=new-guards]", "amount")
    await page.fill("[data-testid=new-queue]", task_queue)
    await page.click("[data-testid=start]")
    await page.wait_for_url("**/#/tasks/*", timeout=WAIT_MS)
    return str(page.url.split("#/tasks/")[1])
