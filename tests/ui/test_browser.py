"""The page in a real browser (Debian's chromium driven by Playwright), on both engines: the
tables fill, the numbers move, Deactivate stops the spout. A screenshot of each run is kept
in artifacts/ (gitignored). Skipped with a reason when the browser is missing, required when
CI=true."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from squall import Config, LocalCluster
from tests.support.ui_topology import build, get

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CI = os.environ.get("CI", "").strip().lower() == "true"
WAIT_MS = 120_000  # a bound for what the page must show, not a timing goal


def _browser_or_skip():
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        why = f"the playwright package is missing ({e}); ./dev setup installs it"
    if why is None and not os.access(CHROMIUM, os.X_OK):
        why = f"{CHROMIUM} is missing; ./dev setup installs it as root (apt-get install -y chromium)"
    if why is not None:
        if CI:
            pytest.fail(f"the browser test is required when CI=true: {why}", pytrace=False)
        pytest.skip(why)
    return sync_playwright


def _number(text: str) -> int:
    return int(re.sub(r"[^0-9]", "", text) or 0)


def test_the_page_fills_moves_and_deactivate_stops_the_spout(cluster_kwargs, engine):
    sync_playwright = _browser_or_skip()
    with LocalCluster(ui_port=0, **cluster_kwargs) as cluster, sync_playwright() as p:
        cluster.submit_topology("browsed", Config(), build(None))
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1800})
            page.goto(cluster.ui_url + "#/topology/browsed")
            emitted = "#spouts-table td[data-field=emitted]"
            page.wait_for_selector(emitted, timeout=WAIT_MS)
            first = _number(page.inner_text(emitted))
            page.wait_for_function(  # the numbers move as the page refreshes
                f"() => Number(document.querySelector('{emitted}').textContent.replace(/[^0-9]/g, '')) > {first}",
                timeout=WAIT_MS)
            assert page.locator("#bolts-table tbody tr").count() == 2
            assert page.locator("#graph .node").count() == 3
            assert page.locator("#status").inner_text() == "ACTIVE"
            page.wait_for_selector("#errors details", timeout=WAIT_MS)  # the bolt's error, with its traceback
            assert "cannot split boom" in page.inner_text("#errors")
            page.click("#btn-deactivate")
            page.wait_for_function("() => document.querySelector('#status').textContent === 'INACTIVE'",
                                   timeout=WAIT_MS)
            cluster.wait_idle(300)  # what was in flight settles; the spout is not asked again
            stopped = get(cluster.ui_url + "api/v1/topology/browsed")[1]["spouts"][0]["emitted"]
            cluster.wait_idle(300)
            page.wait_for_function(
                f"() => Number(document.querySelector('{emitted}').textContent.replace(/[^0-9]/g, '')) === {stopped}",
                timeout=WAIT_MS)
            assert get(cluster.ui_url + "api/v1/topology/browsed")[1]["spouts"][0]["emitted"] == stopped
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"ui-topology-{engine}.png"), full_page=True)
            page.click("#bolts-table a:text('split')")
            page.wait_for_selector("#tasks-table tbody tr", timeout=WAIT_MS)
            assert page.locator("#tasks-table tbody tr").count() == 2
            page.screenshot(path=str(ARTIFACTS / f"ui-component-{engine}.png"), full_page=True)
        finally:
            browser.close()
