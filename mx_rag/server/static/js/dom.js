// SPDX-License-Identifier: Apache-2.0
// Building DOM nodes. Text is always set as text (textContent / text nodes), never as HTML:
// everything the server sends (passages, file names, messages) is untrusted.

/** el("p", {class: "x", onclick: f}, "text", child) -> an element. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

/** Append children (nodes, strings as text, arrays; null/false skipped). */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Show a message in a status/alert element (empty text hides it). */
export function say(node, text) {
  node.textContent = text || "";
  node.hidden = !text;
}

/** Bytes as a short size: "12 KB". */
export function size(bytes) {
  if (typeof bytes !== "number") return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
