"""The review desk in a real browser: Debian's Chromium driven by Selenium, on review records a real
worker (`seqstream worker`, tiny BLOOM) wrote to a real broker, served by `seqstream review serve`.

A reviewer signs in, accepts a candidate the lexicon backoff offered, corrects a value by selecting
text, rejects a document; the test then reads what reached the fields and audit topics.

The README's screenshot (docs/review-desk.png) is taken by this test: run it with
SEQSTREAM_UPDATE_SCREENSHOT=1 to write it and docs/review-desk.txt, the page's document text and
labels as shown. Without the flag the test compares what it sees with docs/review-desk.txt, so the
committed picture cannot drift from the page (pixels differ between Chromium builds; the text does not).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import msgspec
import pytest

from ops.demo.samples import sample_documents
from ops.stress.worker_process import OutputReader, WorkerProcess, free_port, http_get, isolated_settings
from schemas.messages import FieldRecord, ReviewDecision
from streams.kafka.clients import produce_lines
from streams.kafka.topics import create_topics
from tests.test_review_desk import committed_records

pytestmark = pytest.mark.kafka
SECRET = "browser-test-secret"
DOCS = Path(__file__).resolve().parents[1] / "docs"
SCREENSHOT, SHOWN = DOCS / "review-desk.png", DOCS / "review-desk.txt"


@pytest.fixture
def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert browser and driver_path, "Debian's chromium and chromium-driver are needed (.ci/run installs them)"
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1100", "--lang=en"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def review_records_from_a_worker(settings, env, tmp_path: Path, count: int) -> None:
    raw = [msgspec.json.encode(doc) for doc, _ in sample_documents(count, seed=11)]
    produce_lines(settings, settings.topics.raw, raw)
    worker = WorkerProcess(env, tmp_path / "worker.log")
    reader = OutputReader(settings)
    worker.start()
    try:
        reader.read_until(lambda o: len(o.records[settings.topics.review]) >= count, timeout_s=240, worker=worker)
    finally:
        worker.stop()
        reader.close()


def serve_desk(env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "streams.cli.main", "review", "serve", "--port", str(port)]
    desk = subprocess.Popen(command, env={**os.environ, **env}, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if http_get(f"http://127.0.0.1:{port}/healthz", timeout_s=1) == (200, b"ok"):
            return desk
        time.sleep(0.3)
    desk.kill()
    raise AssertionError(f"the desk did not start: {log.read_text()[-2000:]}")


def shown(driver) -> str:
    """What the screenshot shows that must not drift: the document's text and the labels."""
    from selenium.webdriver.common.by import By

    labels = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "span.label")]
    return driver.find_element(By.ID, "doc").text + "\n---\n" + "\n".join(labels) + "\n"


def gone(element):
    """A wait condition: `element`'s page has been replaced.

    Selenium's `staleness_of` knows only "stale element reference"; while a page unloads chromedriver
    may instead answer "Node with given id does not belong to the document", which means the same.
    """
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def predicate(_driver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error.msg):
                return True
            raise
        return False

    return predicate


def select_text(driver, chars: int) -> tuple[int, str]:
    """Select the first `chars` characters of the first unmarked piece of the text that has them; its offset."""
    return driver.execute_script(
        """
        for (const el of document.querySelectorAll('#doc span[data-start]')) {
          const text = el.firstChild && el.firstChild.textContent;
          const at = text ? text.search(/[\\u4e00-\\u9fff]/) : -1;
          if (at < 0 || text.length < at + arguments[0]) continue;
          const range = document.createRange();
          range.setStart(el.firstChild, at); range.setEnd(el.firstChild, at + arguments[0]);
          const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
          return [Number(el.dataset.start) + at, text.slice(at, at + arguments[0])];
        }
        return null;""",
        chars,
    )


def test_a_reviewer_in_chromium_accepts_a_candidate_corrects_a_value_and_rejects_one(
    chromium, kafka_bootstrap, tiny_model_dir, tmp_path
) -> None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as expected
    from selenium.webdriver.support.ui import WebDriverWait

    group = f"desk-{uuid.uuid4().hex[:6]}"
    overrides = {"topics__partitions": "1", "review__secret": SECRET, "review__group_id": group}
    settings, env = isolated_settings(kafka_bootstrap, tiny_model_dir, tmp_path / "faust", **overrides)
    create_topics(settings)
    review_records_from_a_worker(settings, env, tmp_path, count=4)
    port = free_port()
    desk = serve_desk(env, port, tmp_path / "desk.log")
    try:
        chromium.get(f"http://127.0.0.1:{port}/")
        chromium.find_element(By.ID, "reviewer").send_keys("ann")
        chromium.find_element(By.ID, "secret").send_keys(SECRET)
        chromium.find_element(By.ID, "signin").click()
        # The desk may not have read its partition yet: its empty page reloads itself until it has.
        try:
            WebDriverWait(chromium, 60).until(expected.presence_of_element_located((By.ID, "doc-id")))
        except TimeoutException:
            page, log = chromium.page_source[-2000:], (tmp_path / "desk.log").read_text()[-3000:]
            raise AssertionError(f"no record shown after 60 s; page:\n{page}\ndesk:\n{log}") from None
        seen = shown(chromium)
        if os.environ.get("SEQSTREAM_UPDATE_SCREENSHOT"):
            DOCS.mkdir(exist_ok=True)
            chromium.save_screenshot(str(SCREENSHOT))
            SHOWN.write_text(seen)
        assert seen == SHOWN.read_text(), (
            "the page differs from docs/review-desk.txt: rerun with SEQSTREAM_UPDATE_SCREENSHOT=1"
        )

        done: dict[str, tuple[str, str]] = {}  # action -> (doc_id, what was chosen)
        for _ in range(4):
            heading = chromium.find_element(By.ID, "doc-id")
            doc_id = heading.text
            candidates = chromium.find_elements(By.CSS_SELECTOR, "input.candidate")
            if "candidate" not in done and candidates:
                candidates[0].click()
                done["candidate"] = (doc_id, candidates[0].find_element(By.XPATH, "..").text.split(" (")[0])
                chromium.find_element(By.ID, "accept").click()
            elif "correct" not in done:
                start, text = select_text(chromium, 2)
                chromium.find_element(By.CSS_SELECTOR, "button.take[data-index='0']").click()
                assert chromium.find_element(By.ID, "custom-0").get_attribute("value") == f"{start}-{start + 2}"
                done["correct"] = (doc_id, text)
                chromium.find_element(By.ID, "accept").click()
            elif "reject" not in done:
                chromium.find_element(By.ID, "reason").send_keys("not a real document")
                chromium.find_element(By.ID, "reject").click()
                done["reject"] = (doc_id, "")
            else:
                break
            # A click returns before the next page has loaded: wait for this one to go.
            WebDriverWait(chromium, 30).until(gone(heading))
            assert doc_id in chromium.find_element(By.ID, "message").text
        assert set(done) == {"candidate", "correct", "reject"}, f"no record offered a candidate: {done}"
    finally:
        desk.terminate()
        desk.wait(30)

    written = committed_records(settings, settings.topics.fields)
    fields = {f.doc_id: f for f in (msgspec.json.decode(v, type=FieldRecord) for v in written)}
    assert set(fields) == {done["candidate"][0], done["correct"][0]}
    picked = fields[done["candidate"][0]]
    assert done["candidate"][1] in [s.text for spans in picked.fields.values() for s in spans]
    corrected = fields[done["correct"][0]]
    assert [s.text for s in corrected.fields[corrected.labels[0]]] == [done["correct"][1]]
    assert {f.reviewed.reviewer for f in fields.values()} == {"ann"}
    decisions = [
        msgspec.json.decode(v, type=ReviewDecision) for v in committed_records(settings, settings.topics.audit)
    ]
    actions = {d.doc_id: d.action for d in decisions}
    assert (
        len(decisions) == 3 and actions[done["correct"][0]] == "corrected" and actions[done["reject"][0]] == "rejected"
    )
    # Taking the backoff's pick where the record already holds it is an acceptance, else a correction.
    assert actions[done["candidate"][0]] in ("accepted", "corrected")
