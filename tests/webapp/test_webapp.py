# SPDX-License-Identifier: Apache-2.0
"""The web app at ``/`` of ``mxrag serve`` in headless Chromium, against a real server (see
``conftest.py``): sign-in with a key and in local mode, a knowledge base made, real files uploaded
with their per-file results, a streamed answer with its sources, a source opened, the conversation
kept over a reload, a document deleted, a wrong key and another user's key, a phone-sized window,
keyboard-only use, and no console error anywhere (local mode and the graph view: ``test_local_mode``).

The tests of the ``alice`` page run in order on one page (one sign-in, one conversation).
Screenshots go to ``docs/images/webapp-chat.png``, ``webapp-phone.png`` and ``webapp-upload.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mx_rag.testing import Reply, ScriptedServer
from tests.webapp.conftest import ALICE, BOB, REFUSED, Served, Watched, last_answer, open_page, question

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "data" / "docs"
PDF = DOCS / "layout-parser-paper-fast.pdf"
DOCX = DOCS / "docx-tables.docx"
IMAGES = ROOT / "docs" / "images"
KB = "papers"
FACTS = "The Zorblax reactor in Building 7 runs on molten salt and was commissioned in 1987.\n"
SHORT_ANSWER = ["The ", "Zorblax ", "reactor ", "runs ", "on ", "molten ", "salt ", "[1], ", "and ", "it ", "was ",
                "commissioned ", "in ", "1987."]
QUESTION = "What does the Zorblax reactor run on?"


def sign_in(page: Any, key: str) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.locator("#workspace").wait_for(state="visible")


def screenshot(page: Any, name: str) -> None:
    """A PNG of the window (or of one element: a locator), in 128 colours (a few tens of KB)."""
    from PIL import Image

    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / name
    page.screenshot(path=str(path))
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=128)
    small.save(path, optimize=True)


def ask_for_a_short_answer(page: Any, llm: ScriptedServer) -> Any:
    """Ask QUESTION with the LLM scripted to a short answer (the echo is long): the screenshots."""
    llm.enqueue(Reply.stream(SHORT_ANSWER))
    question(page).fill(QUESTION)
    question(page).press("Enter")
    answer = last_answer(page)
    assert answer.locator(".text").inner_text() == "".join(SHORT_ANSWER)
    return answer


@pytest.fixture(scope="module")
def alice(browser: Any, keyed: Served) -> Iterator[Watched]:
    watched = open_page(browser, keyed)
    yield watched
    watched.page.context.close()


# -- keys mode ----------------------------------------------------------------------------------------


def test_a_wrong_key_is_refused_with_a_message(browser: Any, keyed: Served) -> None:
    watched = open_page(browser, keyed)
    page = watched.page
    page.locator("#signin").wait_for(state="visible")
    assert page.locator("#workspace").is_hidden()
    sign_in_error = page.locator("#signin-error")
    page.get_by_label("API key").fill("mxr_not_a_key")
    page.get_by_role("button", name="Sign in").click()
    sign_in_error.wait_for(state="visible")
    assert "Sign-in failed" in sign_in_error.inner_text() and "unknown or revoked" in sign_in_error.inner_text()
    assert page.locator("#workspace").is_hidden()
    watched.assert_clean(allow=REFUSED)
    page.context.close()


def test_sign_in_and_create_a_knowledge_base(alice: Watched, keyed: Served) -> None:
    page = alice.page
    page.locator("#signin").wait_for(state="visible")
    sign_in(page, keyed.keys[ALICE])
    assert "Signed in" in page.locator("#whoami").inner_text()
    # the key is kept for this tab only, never in localStorage (issue 29, case 12)
    assert page.evaluate("sessionStorage.getItem('mxrag.key')") == keyed.keys[ALICE]
    assert page.evaluate("localStorage.getItem('mxrag.key')") is None
    page.get_by_text("Create a knowledge base to add documents.").wait_for()
    page.get_by_label("New knowledge base name").fill(KB)
    page.get_by_role("button", name="Create").click()
    page.get_by_text(f"Created {KB}.").wait_for()
    assert page.locator("#kb-select").input_value() == KB
    page.get_by_text("No documents yet").wait_for()
    alice.assert_clean(allow=REFUSED)  # the first visit asks /v1/models without a key: 401


def test_upload_files_shows_a_result_per_file(alice: Watched, tmp_path: Path) -> None:
    page = alice.page
    facts, unsupported = tmp_path / "facts.txt", tmp_path / "notes.xyz"
    facts.write_text(FACTS)
    unsupported.write_text("no loader reads this")
    page.locator("#file-input").set_input_files([str(PDF), str(DOCX), str(facts), str(unsupported)])
    rows = page.locator("li.upload[data-result]")
    rows.nth(3).wait_for(timeout=120_000)
    results = {r.locator(".name").inner_text(): r.locator(".result").inner_text() for r in rows.all()}
    assert results[PDF.name] == results[DOCX.name] == results["facts.txt"] == "stored", results
    assert results["notes.xyz"].startswith("failed:") and "not supported" in results["notes.xyz"]
    table = page.locator("#documents tr")
    table.nth(1).wait_for()
    chunks = {r.locator("th").inner_text(): int(r.locator("td").first.inner_text()) for r in table.all()}
    assert set(chunks) == {PDF.name, DOCX.name, "facts.txt"} and all(n > 0 for n in chunks.values())
    assert page.locator("#documents-status").inner_text().startswith("3 documents")
    alice.assert_clean(allow=REFUSED)  # the .xyz file is refused with a 400


def test_drop_files_on_the_drop_zone(alice: Watched) -> None:
    page = alice.page
    page.evaluate("""(facts) => {
        const data = new DataTransfer();
        data.items.add(new File(["Visitors to Building 7 must sign in at the east gate."], "gate.txt",
                                {type: "text/plain"}));
        data.items.add(new File([facts], "facts.txt", {type: "text/plain"}));  // the same content again
        document.getElementById("dropzone").dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true}));
    }""", FACTS)
    row = page.locator("li.upload[data-result]", has_text="gate.txt")
    row.wait_for(timeout=120_000)
    assert row.locator(".result").inner_text() == "stored"
    again = page.locator("li.upload[data-result]", has_text="facts.txt").first
    again.wait_for()
    assert again.locator(".result").inner_text() == "unchanged"
    page.locator("#documents th", has_text="gate.txt").wait_for()
    screenshot(page.locator("section", has=page.locator("#kb-title")), "webapp-upload.png")
    alice.assert_clean()


def test_ask_streams_the_answer_and_lists_its_sources(alice: Watched) -> None:
    page = alice.page
    page.evaluate("""() => {
        window.__updates = 0;
        new MutationObserver(() => { window.__updates += 1; })
            .observe(document.getElementById("log"), {subtree: true, childList: true, characterData: true});
    }""")
    question(page).fill(QUESTION)
    with page.expect_response("**/v1/chat/completions") as reply:
        question(page).press("Enter")
    assert reply.value.headers["content-type"].startswith("text/event-stream")
    answer = last_answer(page)
    assert page.locator("article.user").last.inner_text() == QUESTION
    assert "molten salt" in answer.locator(".text").inner_text()
    assert page.evaluate("window.__updates") > 5  # the text grew piece by piece
    sources = answer.locator("ol.sources > li")
    labels = [s.locator("button").inner_text() for s in sources.all()]
    assert labels and labels[0].startswith("[1] facts.txt") and " · score " in labels[0]
    assert "molten salt" in sources.first.locator(".excerpt").inner_text()
    alice.assert_clean()


def test_a_source_opens_in_a_dialog(alice: Watched) -> None:
    page = alice.page
    last_answer(page).locator("ol.sources button").first.click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for(state="visible")
    assert dialog.locator("#passage-title").inner_text() == "facts.txt"
    assert "commissioned in 1987" in dialog.locator("#passage-text").inner_text()
    assert "Zorblax" in dialog.locator("mark").all_inner_texts()  # the question's words are marked
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    alice.assert_clean()


def test_chain_k_and_temperature_go_with_the_question(alice: Watched) -> None:
    page = alice.page
    page.get_by_label("Chain", exact=True).select_option("hybrid")
    page.get_by_label("Passages (k)").fill("2")
    page.get_by_label("Temperature").fill("0.3")
    question(page).fill("What is LayoutParser for in document image analysis?")
    with page.expect_request("**/v1/chat/completions") as request:
        page.get_by_role("button", name="Send").click()
    body = request.value.post_data_json
    assert body["model"] == f"{KB}/hybrid" and body["k"] == 2 and body["temperature"] == 0.3
    assert body["stream"] is True and body["messages"][0] == {"role": "user", "content": QUESTION}
    labels = last_answer(page).locator("ol.sources button").all_inner_texts()
    assert len(labels) == 2 and any(PDF.name in label and "page 1" in label for label in labels)
    page.get_by_label("Chain", exact=True).select_option("single")
    page.get_by_label("Passages (k)").fill("")
    page.get_by_label("Temperature").fill("")
    alice.assert_clean()


def test_the_conversation_survives_a_reload(alice: Watched) -> None:
    page = alice.page
    before = page.locator("#log").inner_text()
    page.reload()
    page.locator("#workspace").wait_for(state="visible")
    page.locator("article.user").nth(1).wait_for()
    assert page.locator("#log").inner_text() == before
    assert page.locator("article.user").all_inner_texts()[0] == QUESTION
    alice.assert_clean()


def test_keyboard_only_send(alice: Watched) -> None:
    page = alice.page
    page.locator("body").focus()
    for _ in range(40):  # Tab through the page until the question box has focus
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "question":
            break
    assert page.evaluate("document.activeElement.id") == "question"
    page.keyboard.type("Where must visitors")
    page.keyboard.press("Shift+Enter")  # a new line, not a send
    page.keyboard.type("sign in?")
    assert question(page).input_value() == "Where must visitors\nsign in?"
    count = page.locator("article.user").count()
    page.keyboard.press("Enter")
    page.locator("article.user").nth(count).wait_for()
    assert "east gate" in last_answer(page).inner_text()
    assert page.evaluate("document.activeElement.id") == "question"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "send"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")  # focus is visible
    alice.assert_clean()


def test_delete_a_document(alice: Watched, keyed: Served) -> None:
    page = alice.page
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete gate.txt").click()
    page.get_by_text("Deleted gate.txt. 3 documents").wait_for()
    assert sorted(page.locator("#documents th").all_inner_texts()) == sorted([PDF.name, DOCX.name, "facts.txt"])
    headers = {"Authorization": f"Bearer {keyed.keys[ALICE]}"}
    listed = httpx.get(keyed.server.base_url + f"/v1/knowledge-bases/{KB}/documents", headers=headers).json()
    assert sorted(d["name"] for d in listed["documents"]) == sorted([PDF.name, DOCX.name, "facts.txt"])
    alice.assert_clean()


def test_screenshot_of_a_chat_with_sources(alice: Watched, llm_server: ScriptedServer) -> None:
    page = alice.page
    answer = ask_for_a_short_answer(page, llm_server)
    assert answer.locator("ol.sources li").count() >= 2
    answer.scroll_into_view_if_needed()
    screenshot(page, "webapp-chat.png")
    alice.assert_clean()


def test_another_users_key_reaches_none_of_it(browser: Any, keyed: Served) -> None:
    watched = open_page(browser, keyed)
    page = watched.page
    sign_in(page, keyed.keys[BOB])
    page.get_by_text("Create a knowledge base to add documents.").wait_for()
    assert KB not in page.locator("#kb-select").inner_text()
    assert question(page).is_disabled()
    page.get_by_role("button", name="Sign out").click()
    page.locator("#signin").wait_for(state="visible")
    assert page.evaluate("sessionStorage.getItem('mxrag.key')") is None
    watched.assert_clean(allow=REFUSED)
    page.context.close()


def test_a_phone_sized_window(browser: Any, keyed: Served, llm_server: ScriptedServer) -> None:
    watched = open_page(browser, keyed, viewport={"width": 375, "height": 667}, is_mobile=True, has_touch=True)
    page = watched.page
    sign_in(page, keyed.keys[ALICE])
    answer = ask_for_a_short_answer(page, llm_server)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375  # nothing wider than the screen
    page.locator("article.user").last.evaluate("e => e.scrollIntoView({block: 'start'})")
    screenshot(page, "webapp-phone.png")
    answer.locator("ol.sources button").first.click()
    box = page.get_by_role("dialog").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    watched.assert_clean(allow=REFUSED)
    page.context.close()


def test_screenshots_are_small_and_not_blank(browser: Any) -> None:
    """The two screenshots this run took (the tests above) are small and show something."""
    from PIL import Image

    for name in ("webapp-chat.png", "webapp-phone.png", "webapp-upload.png"):
        path = IMAGES / name
        assert path.stat().st_size < 200_000, f"{name} is {path.stat().st_size} bytes"
        with Image.open(path) as image:
            colours = image.convert("L").getextrema()
        assert colours[1] - colours[0] > 100, f"{name} looks blank"
