// SPDX-License-Identifier: Apache-2.0
// The conversation: questions, streamed answers, their sources (and, for the graph chain, the
// entities around the answer). Kept in localStorage per knowledge base, so it survives a reload.

import { streamChat } from "./api.js";
import { el } from "./dom.js";
import { renderGraph } from "./graph.js";

const PREFIX = "mxrag.chat.";
const HISTORY_TURNS = 10; // earlier messages sent with a question
const EXCERPT = 220;
const IMAGE_MIME = /^image\/(png|jpeg|gif|webp|bmp)$/;

export function forgetConversations() {
  for (const key of Object.keys(localStorage)) if (key.startsWith(PREFIX)) localStorage.removeItem(key);
}

export class Chat {
  /** log: the role="log" element; dialog: the passage <dialog> (see openPassage). */
  constructor(log, dialog) {
    this.log = log;
    this.dialog = dialog;
    this.kb = "";
    this.messages = [];
  }

  load(kb) {
    this.kb = kb;
    try {
      this.messages = JSON.parse(localStorage.getItem(PREFIX + kb) || "[]");
    } catch {
      this.messages = [];
    }
    if (!Array.isArray(this.messages)) this.messages = [];
    this.render();
  }

  save() {
    if (!this.kb) return;
    let done = this.messages.filter((m) => !m.streaming);
    while (done.length) {
      try {
        localStorage.setItem(PREFIX + this.kb, JSON.stringify(done));
        return;
      } catch {
        done = done.slice(2); // storage is full: forget the oldest question and answer
      }
    }
    localStorage.removeItem(PREFIX + this.kb);
  }

  clear() {
    this.messages = [];
    if (this.kb) localStorage.removeItem(PREFIX + this.kb);
    this.render();
  }

  render() {
    const views = this.messages.map((m, i) => this.view(m, i));
    this.log.replaceChildren(...(views.length ? views : [el("p", { class: "hint" },
      this.kb ? `Ask a question about the documents of ${this.kb}.` : "Choose or create a knowledge base first.")]));
  }

  /**
   * Ask `question` with settings {chain, k, temperature}; the answer streams into the log.
   * Resolves when the answer is complete (or failed: the error is shown in its place).
   */
  async send(question, { chain = "", k, temperature } = {}, signal) {
    const history = this.messages.filter((m) => !m.error && m.content)
      .slice(-HISTORY_TURNS).map((m) => ({ role: m.role, content: m.content }));
    const asked = { role: "user", content: question };
    const answer = { role: "assistant", content: "", question, chain, streaming: true };
    this.messages.push(asked, answer);
    this.render();
    const box = this.log.lastElementChild;
    const text = box.querySelector(".text");
    box.setAttribute("aria-busy", "true");
    const body = { model: chain ? `${this.kb}/${chain}` : this.kb, messages: [...history, asked] }; // "": chain.type
    if (Number.isFinite(k)) body.k = k;
    if (Number.isFinite(temperature)) body.temperature = temperature;
    try {
      for await (const chunk of streamChat(body, signal)) {
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && delta.content) {
          answer.content += delta.content;
          text.textContent = answer.content;
        }
        if (Array.isArray(chunk.sources)) answer.sources = chunk.sources;
        if (chunk.graph && typeof chunk.graph === "object") answer.graph = chunk.graph;
      }
    } catch (error) {
      answer.error = error.name === "AbortError" ? "stopped" : error.message;
    } finally {
      delete answer.streaming;
      this.save();
      this.render();
      this.log.lastElementChild.scrollIntoView({ block: "nearest" });
    }
  }

  view(message, index) {
    if (message.role === "user") {
      return el("article", { class: "msg user", "aria-label": "Your question" }, el("p", { class: "text" }, message.content));
    }
    const parts = [el("p", { class: "text" }, message.content)];
    if (message.error) {
      parts.push(el("p", { class: "error", role: "alert" },
        message.error === "stopped" ? "Stopped." : `The answer failed: ${message.error}`));
    }
    const sources = Array.isArray(message.sources) ? message.sources : [];
    const items = sources.map((s, i) => this.sourceItem(s, i, message.question || ""));
    if (sources.length) {
      parts.push(el("h4", { id: `src-h-${index}` }, "Sources"),
        el("ol", { class: "sources", "aria-labelledby": `src-h-${index}` }, items));
    } else if (!message.streaming && !message.error) {
      parts.push(el("p", { class: "hint" }, "No passage was retrieved for this answer."));
    }
    if (message.graph) {
      const note = el("p", { class: "hint", "aria-live": "polite" }, "Choose an entity to see the passages that support it.");
      parts.push(renderGraph(message.graph, (node) => {
        const chosen = new Set(node.passages);
        items.forEach((item, i) => item.classList.toggle("supporting", chosen.has(i)));
        const numbers = node.passages.filter((i) => i >= 0 && i < items.length).map((i) => i + 1);
        note.textContent = numbers.length
          ? `${node.label}: supported by passage${numbers.length > 1 ? "s" : ""} ${numbers.join(", ")}.`
          : `${node.label}: no passage among the sources supports it.`;
      }), note);
    }
    return el("article", { class: "msg assistant", "aria-label": "Answer" }, parts);
  }

  sourceItem(source, i, question) {
    const label = describe(source, i);
    const text = String(source.text ?? "");
    const excerpt = text.length > EXCERPT ? text.slice(0, EXCERPT) + "…" : text;
    const image = imageOf(source);
    return el("li", { class: "source" },
      el("button", { type: "button", class: "source-open", onclick: () => this.openPassage(source, i, question) }, label),
      image && el("img", { src: image, alt: `Image from ${source.source || "a document"}`, class: "source-image" }),
      el("p", { class: "excerpt" }, excerpt));
  }

  /** Show a passage whole, in a dialog, with the question's words marked. */
  openPassage(source, i, question) {
    const d = this.dialog;
    d.querySelector("#passage-title").textContent = source.source || "Passage";
    d.querySelector("#passage-meta").textContent = describe(source, i);
    const body = d.querySelector("#passage-text");
    body.replaceChildren(...marked(String(source.text ?? ""), question));
    const image = imageOf(source);
    const figure = d.querySelector("#passage-image");
    figure.replaceChildren(...(image ? [el("img", { src: image, alt: `Image from ${source.source || "a document"}` })] : []));
    figure.hidden = !image;
    d.showModal();
  }
}

function describe(source, i) {
  const parts = [`[${i + 1}] ${source.source || "unknown file"}`];
  if (source.page !== undefined && source.page !== null) parts.push(`page ${source.page}`);
  if (typeof source.score === "number") parts.push(`score ${source.score.toFixed(3)}`);
  else if (source.match === "keyword") parts.push("keyword match");
  return parts.join(" · ");
}

/** A data URL for a source's image, only for a plain raster image type. */
function imageOf(source) {
  const mime = source.image_mime || "image/png";
  const data = source.image_base64;
  if (typeof data !== "string" || !data || !IMAGE_MIME.test(mime) || !/^[A-Za-z0-9+/=\s]+$/.test(data)) return "";
  return `data:${mime};base64,${data.replace(/\s/g, "")}`;
}

/** Text nodes and <mark>s: the words of `question` (4+ letters) marked in `text`. */
export function marked(text, question) {
  const words = [...new Set((question.toLowerCase().match(/[\p{L}\p{N}]{4,}/gu) || []))];
  if (!words.length) return [document.createTextNode(text)];
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(${escaped.join("|")})`, "giu");
  return text.split(pattern).map((part, i) => (i % 2 ? el("mark", {}, part) : document.createTextNode(part)));
}
