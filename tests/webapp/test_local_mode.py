# SPDX-License-Identifier: Apache-2.0
"""The web app in local mode (a server with no API key), and the page's own pieces: the graph
view and its force layout, text never taken as markup, a folder upload, an LLM failure, the SSE
reader. Real server and Chromium as in ``conftest.py``; no console error anywhere.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from mx_rag.testing import TINY_PNG, Reply, ScriptedServer
from tests.webapp.conftest import Served, last_answer, open_page, question

pytestmark = pytest.mark.slow

MARKUP = 'Markup in a document stays text: <img src=x onerror="window.__xss=1"> <b>not bold</b>\n'

# -- local mode -------------------------------------------------------------------------------------


def test_local_mode_needs_no_key(browser: Any, local: Served) -> None:
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    assert page.locator("#signin").is_hidden() and "Local mode" in page.locator("#whoami").inner_text()
    assert page.get_by_role("button", name="Sign out").is_hidden()
    page.get_by_label("New knowledge base name").fill("notes")
    page.get_by_role("button", name="Create").click()
    page.get_by_text("Created notes.").wait_for()
    unnamed = page.evaluate("""() => [...document.querySelectorAll("input, select, textarea, button")]
        .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim())
        .map((e) => e.outerHTML)""")
    assert unnamed == []  # every control has a label
    watched.assert_clean()
    page.context.close()


def test_upload_a_folder(browser: Any, local: Served, tmp_path: Path) -> None:
    folder = tmp_path / "handbook"
    (folder / "rules").mkdir(parents=True)
    (folder / "intro.md").write_text("# Intro\n\nThe handbook explains the east gate.\n")
    (folder / "rules" / "visits.txt").write_text("Visitors sign in at the east gate.\n")
    (folder / ".DS_Store").write_bytes(b"\0\1")
    (folder / ".git").mkdir()
    (folder / ".git" / "notes.txt").write_text("a hidden folder is skipped\n")
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    page.locator("#folder-input").set_input_files(str(folder))
    rows = page.locator("li.upload[data-result]")
    rows.nth(1).wait_for(timeout=120_000)
    results = {r.locator(".name").inner_text(): r.locator(".result").inner_text() for r in rows.all()}
    assert results == {"handbook/intro.md": "stored", "handbook/rules/visits.txt": "stored"}  # hidden file skipped
    page.locator("#documents th", has_text="visits.txt").wait_for()
    watched.assert_clean()
    page.context.close()


def test_passages_are_shown_as_text_never_as_markup(browser: Any, local: Served, tmp_path: Path) -> None:
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    markup = tmp_path / "markup.txt"
    markup.write_text(MARKUP)
    page.locator("#file-input").set_input_files(str(markup))
    page.locator("li.upload[data-result='stored']", has_text="markup.txt").wait_for(timeout=120_000)
    question(page).fill("What does the markup document say?")
    question(page).press("Enter")
    answer = last_answer(page)
    typed = '<img src=x onerror="window.__xss=1"> <b>not bold</b>'
    assert typed in answer.locator(".text").inner_text()  # the echoed prompt holds the passage
    assert typed in answer.locator(".excerpt").first.inner_text()
    assert page.locator("#log img, #log b").count() == 0 and page.evaluate("window.__xss") is None
    watched.assert_clean()
    page.context.close()


# -- the graph view -----------------------------------------------------------------------------------

GRAPH = {
    "nodes": [
        {"id": "zorblax", "label": "Zorblax reactor", "passages": [0]},
        {"id": "salt", "label": "molten salt", "passages": [0, 1]},
        {"id": "b7", "label": "Building 7", "passages": [1]},
        {"id": "gate", "label": "east <gate>", "passages": []},
    ],
    "edges": [
        {"source": "zorblax", "target": "salt", "label": "runs on"},
        {"source": "zorblax", "target": "b7", "label": "located in"},
        {"source": "b7", "target": "gate", "label": "has"},
        {"source": "b7", "target": "nowhere", "label": "dangling edges are dropped"},
    ],
}
SOURCES = [{"text": "The Zorblax reactor runs on molten salt.", "source": "facts.txt", "score": 0.9},
           {"text": "Building 7 stores molten salt.", "source": "plan.pdf", "page": 3, "score": 0.7,
            "image_base64": base64.b64encode(TINY_PNG).decode(), "image_mime": "image/png"}]


def test_the_force_layout_keeps_nodes_apart_and_neighbours_close(browser: Any, local: Served) -> None:
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    pos = page.evaluate("""async (graph) => {
        const {layout} = await import("/static/js/graph.js");
        return layout(graph, {width: 640, height: 360});
    }""", GRAPH)
    assert set(pos) == {"zorblax", "salt", "b7", "gate"}
    assert all(70 <= p["x"] <= 570 and 30 <= p["y"] <= 330 for p in pos.values())  # room for the labels

    def dist(a: str, b: str) -> float:
        return float(((pos[a]["x"] - pos[b]["x"]) ** 2 + (pos[a]["y"] - pos[b]["y"]) ** 2) ** 0.5)

    pairs = [(a, b) for a in pos for b in pos if a < b]
    assert min(dist(a, b) for a, b in pairs) > 40  # no two nodes on top of each other
    assert dist("salt", "zorblax") < dist("salt", "gate")  # a neighbour is nearer than a node 3 hops away
    watched.assert_clean()
    page.context.close()


def test_the_graph_of_an_answer_links_entities_to_passages(browser: Any, local: Served) -> None:
    """The server does not send ``graph`` yet: the answer is put in the stored conversation, and the
    page draws it on load with the same code that draws a streamed answer."""
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    conversation = [{"role": "user", "content": "What runs on molten salt?"},
                    {"role": "assistant", "content": "The Zorblax reactor.", "question": "What runs on molten salt?",
                     "sources": SOURCES, "graph": GRAPH}]
    page.evaluate("c => { localStorage.setItem('mxrag.kb', 'notes'); localStorage.setItem('mxrag.chat.notes', c); }",
                  json.dumps(conversation))
    page.reload()
    answer = page.locator("article.assistant").last
    answer.locator(".graph svg").wait_for()
    assert answer.locator(".graph svg g.node").count() == 4 and answer.locator(".graph svg line").count() == 3
    assert answer.locator(".entities button").all_inner_texts()[3] == "east <gate> (0)"  # a label is text
    answer.get_by_role("button", name="molten salt (2)").click()
    assert answer.locator("ol.sources li.supporting").count() == 2
    assert "molten salt: supported by passages 1, 2." in answer.inner_text()
    answer.get_by_role("button", name="Building 7 (1)").press("Enter")  # the keyboard path
    supporting = answer.locator("ol.sources li.supporting")
    assert supporting.count() == 1 and "Building 7 stores" in supporting.inner_text()
    assert answer.locator("g.node.selected").get_attribute("data-id") == "b7"
    image = supporting.get_by_role("img", name="Image from plan.pdf")  # a retrieved image is shown
    assert image.evaluate("img => img.complete && img.naturalWidth") == 2
    watched.assert_clean()
    page.context.close()


# -- the page's own pieces ----------------------------------------------------------------------------


def test_an_llm_failure_is_shown_in_place_of_the_answer(browser: Any, local: Served,
                                                         llm_server: ScriptedServer) -> None:
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    page.get_by_label("Use").select_option("notes")
    llm_server.enqueue(Reply.status(500, {"error": {"message": "the model crashed"}}))
    question(page).fill("Where must visitors sign in?")
    question(page).press("Enter")
    alert = last_answer(page).get_by_role("alert")
    alert.wait_for()
    assert alert.inner_text().startswith("The answer failed:") and "500" in alert.inner_text()
    assert question(page).is_enabled() and page.get_by_role("button", name="Send").is_visible()
    watched.assert_clean()
    page.context.close()


def test_the_sse_reader_takes_what_openai_servers_send(browser: Any, local: Served) -> None:
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    got = page.evaluate("""async () => {
        const {readSse} = await import("/static/js/sse.js");
        const parts = ['data: {"a":1}\\r\\n\\r\\ndata:{"b"', ':2}\\n\\n: a comment\\n\\ndata: {"c":', '3}\\n\\n',
                       'data: [DONE]\\n\\ndata: {"after": true}\\n\\n'];
        const bytes = new TextEncoder();
        const body = new ReadableStream({start(c) { for (const p of parts) c.enqueue(bytes.encode(p)); c.close(); }});
        const out = [];
        for await (const item of readSse(body)) out.push(item);
        return out;
    }""")
    assert got == [{"a": 1}, {"b": 2}, {"c": 3}]  # split anywhere, CRLF, no space, comments; nothing after [DONE]
    watched.assert_clean()
    page.context.close()


def test_a_graph_knowledge_base_answers_with_the_graph_chain(browser: Any, local: Served) -> None:
    """Last in this module: it makes ``atlas`` a graph knowledge base, which the page may choose."""
    watched = open_page(browser, local)
    page = watched.page
    page.locator("#workspace").wait_for(state="visible")
    page.get_by_label("New knowledge base name").fill("atlas")
    page.get_by_label("Keep an entity graph (for the graph chain)").check()
    page.get_by_role("button", name="Create").click()
    page.get_by_text("Created atlas.").wait_for()
    assert page.locator("#kb-select option:checked").inner_text() == "atlas (graph)"
    assert page.get_by_label("Chain", exact=True).input_value() == "graph"
    assert page.get_by_label("Keep an entity graph (for the graph chain)").is_checked() is False
    page.get_by_label("Use").select_option("notes")
    assert page.get_by_label("Chain", exact=True).input_value() == ""  # back to the server's default chain
    watched.assert_clean()
    page.context.close()
