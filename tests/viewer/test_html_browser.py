"""The HTML replay in a real headless Chromium, fully offline (issue 6): the page loads from a
file, the Right arrow key advances the visible step counter and changes the board, Left goes
back; a screenshot is saved as a test artifact (its path is printed)."""

import os
import shutil
import tempfile

import pytest

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
OFFLINE_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage", "--window-size=1200,900")

# Extended suite (`pytest -m slow`): Chromium drives the HTML replay, about 60 s
# (test_watch_agent checks the HTML file itself in the default suite).
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs the Debian chromium and chromium-driver packages "
           "(apt-get install -y chromium chromium-driver)")]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (pip)")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in OFFLINE_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium_profile')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def board_tokens(driver):
    from selenium.webdriver.common.by import By
    return [cell.get_attribute("data-token")
            for cell in driver.find_elements(By.CSS_SELECTOR, "#board .cell")]


def test_keyboard_steps_through_the_replay(browser, watch_run):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get("file://" + os.path.abspath(watch_run["html"]))
    counter = browser.find_element(By.ID, "step-counter")
    frames = sum(len(e["actions"]) + 1 for e in watch_run["record"]["episodes"])
    assert counter.text == f"episode 0 step 0 (frame 1 / {frames})"
    first_board = board_tokens(browser)
    assert len(first_board) == 36 and "@" in "".join(first_board)

    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_RIGHT)
    assert counter.text == f"episode 0 step 1 (frame 2 / {frames})"
    # The first recorded step changed the position (the player moved, shot or siphoned, and
    # the turn counter in the header advanced).
    assert board_tokens(browser) != first_board or "turn 1" in browser.find_element(
        By.ID, "header").text
    assert "action" in browser.find_element(By.ID, "panel").text

    screenshot = os.path.join(tempfile.mkdtemp(prefix="hackmatrix_replay_"), "step1.png")
    assert browser.save_screenshot(screenshot)
    print(f"screenshot of the HTML replay at step 1: {screenshot}")

    body.send_keys(Keys.ARROW_LEFT)
    assert counter.text == f"episode 0 step 0 (frame 1 / {frames})"
    assert board_tokens(browser) == first_board
    body.send_keys(Keys.END)
    assert counter.text.endswith(f"(frame {frames} / {frames})")
    assert "episode over" in browser.find_element(By.ID, "panel").text
