// SPDX-License-Identifier: Apache-2.0
// Knowledge bases (pick, create) and the documents of the chosen one (list, delete).

import { call, kbPath } from "./api.js";
import { el, say, size } from "./dom.js";

const CHOSEN = "mxrag.kb";

export function chosenKb() {
  return localStorage.getItem(CHOSEN) || "";
}

/** The names of the caller's graph knowledge bases (those that keep an entity graph). */
export const graphKbs = new Set();

/** Fill the <select> with the caller's knowledge bases; returns the chosen name ("" if none). */
export async function loadKbs(select) {
  const { knowledge_bases: kbs } = await call("GET", "/v1/knowledge-bases");
  const names = kbs.map((kb) => kb.name);
  graphKbs.clear();
  for (const kb of kbs) if (kb.graph) graphKbs.add(kb.name);
  const chosen = names.includes(chosenKb()) ? chosenKb() : names[0] || "";
  select.replaceChildren(
    ...(names.length ? [] : [el("option", { value: "" }, "(none yet: create one)")]),
    ...names.map((name) => el("option", { value: name, selected: name === chosen },
      graphKbs.has(name) ? `${name} (graph)` : name)),
  );
  select.value = chosen;
  choose(chosen);
  return chosen;
}

export function choose(name) {
  if (name) localStorage.setItem(CHOSEN, name);
  else localStorage.removeItem(CHOSEN);
}

export async function createKb(name, graph) {
  await call("POST", "/v1/knowledge-bases", graph ? { name, graph: true } : { name });
  choose(name);
}

/** Show the documents of `kb` in `body` (a <tbody>); `status` says how many. */
export async function loadDocuments(kb, body, status) {
  if (!kb) {
    body.replaceChildren();
    say(status, "Create a knowledge base to add documents.");
    return;
  }
  const { documents, chunks } = await call("GET", kbPath(kb));
  body.replaceChildren(...documents.map((doc) => documentRow(kb, doc, body, status)));
  say(status, documents.length
    ? `${documents.length} document${documents.length === 1 ? "" : "s"}, ${chunks} chunks`
    : "No documents yet: drop files above.");
}

function documentRow(kb, doc, body, status) {
  const remove = async () => {
    if (!window.confirm(`Delete ${doc.name} from ${kb}? Its chunks stop being used for answers.`)) return;
    try {
      await call("DELETE", `${kbPath(kb)}/documents/${encodeURIComponent(doc.id)}`);
      await loadDocuments(kb, body, status);
      say(status, `Deleted ${doc.name}. ${status.textContent}`);
    } catch (error) {
      say(status, `Could not delete ${doc.name}: ${error.message}`);
    }
  };
  return el("tr", {},
    el("th", { scope: "row", class: "doc-name" }, doc.name),
    el("td", { class: "num" }, String(doc.chunks)),
    el("td", { class: "num" }, size(doc.bytes)),
    el("td", {}, el("button", { type: "button", class: "danger", "aria-label": `Delete ${doc.name}`, onclick: remove },
      "Delete")));
}
