"""Every report kind opened from disk in headless Chromium (Debian's chromium and chromium-driver, driven by
Selenium): the violating step is marked and its explanation shown, every link resolves in the rendered
DOM, the console is clean and nothing but the file itself was loaded. A screenshot of each page goes to
$KCM_SCREENSHOTS (default: the test's temporary folder).

Skipped, saying why, where Chromium or its driver is missing (.ci/run installs both).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from test_report import KINDS, build_pages

CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMEDRIVER: Final = Path("/usr/bin/chromedriver")
WIDTH, MAX_HEIGHT = 1400, 2400

# Every internal link's target, and every loaded resource's URL, as the browser sees them.
_BROKEN_LINKS: Final = """
return Array.from(document.querySelectorAll('a[href]'))
  .filter(a => !a.getAttribute('href').startsWith('#') || !document.getElementById(a.hash.slice(1)))
  .map(a => a.getAttribute('href'));
"""
_RESOURCES: Final = """
return ['navigation', 'resource'].flatMap(type => performance.getEntriesByType(type)).map(e => e.name);
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.skip(f"no {' or '.join(missing)}: install Debian's chromium and chromium-driver to run the browser "
                    "tests")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={WIDTH},1000"):
        options.add_argument(argument)
    if os.geteuid() == 0:
        # Chromium refuses to run as root inside its sandbox.
        options.add_argument("--no-sandbox")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> dict[str, Path]:
    return build_pages(tmp_path_factory.mktemp("report-browser"))


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("KCM_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def problems(browser: Any, url: str) -> list[str]:
    """What is wrong with the page at `url` as the browser rendered it: links without a target, anything
    loaded but the file itself, console messages."""
    browser.get(url)
    found = [f"broken link {href}" for href in browser.execute_script(_BROKEN_LINKS)]
    resources = browser.execute_script(_RESOURCES)
    found += [f"loaded {name}" for name in resources if name != url and not name.startswith("data:")]
    found += [f"console: {entry['message']}" for entry in browser.get_log("browser")
              if entry["level"] in ("SEVERE", "WARNING")]
    return found


def test_a_broken_page_is_caught(browser: Any, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>x</title></head><body>'
                    '<a href="#nowhere">a</a><img src="http://127.0.0.1:9/x.png" alt=""></body></html>',
                    encoding="utf-8")
    found = problems(browser, page.as_uri())
    assert "broken link #nowhere" in found
    assert "loaded http://127.0.0.1:9/x.png" in found, found
    assert any(p.startswith("console: http://127.0.0.1:9/x.png") for p in found), found


@pytest.mark.parametrize("kind", KINDS)
def test_the_page_renders_marked_linked_and_offline(browser: Any, pages: dict[str, Path], screenshots: Path,
                                                     kind: str) -> None:
    from selenium.webdriver.common.by import By

    url = pages[kind].resolve().as_uri()
    assert problems(browser, url) == []
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-report") == kind

    marked = browser.find_elements(By.CSS_SELECTOR, "tr.violating[data-violation=true]")
    assert marked, "the violating step is marked"
    explanation = marked[0].find_element(By.CSS_SELECTOR, ".explanation")
    assert explanation.is_displayed() and "violated:" in explanation.text
    # The section's own headline repeats the checker's explanation beside the step's link.
    headline = browser.find_element(By.CSS_SELECTOR, "section.trace .explanation")
    assert explanation.text.split("violated:", 1)[1].strip() in headline.text

    # Follow the first link to a timeline: the target is on the page and scrolled into view.
    link = browser.find_element(By.CSS_SELECTOR, "a[href^='#']")
    target = link.get_attribute("href").partition("#")[2]
    link.click()
    assert browser.execute_script("return location.hash") == f"#{target}"
    assert browser.execute_script(f"return document.getElementById('{target}').getBoundingClientRect().top") < 1000

    browser.get(url)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(WIDTH, min(int(height) + 120, MAX_HEIGHT))
    assert browser.save_screenshot(str(screenshots / f"{kind}.png"))
    browser.set_window_size(WIDTH, 1000)
