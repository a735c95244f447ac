// SPDX-License-Identifier: Apache-2.0
// Uploads: files or folders from a drop or a file input, one request per file (so each has its
// own progress and result), two at a time; then the ingestion job is polled to its result.

import { uploadFile, waitJob } from "./api.js";
import { el } from "./dom.js";

const PARALLEL = 2;

/** The files of a drop, folders walked (hidden files skipped); [{file, path}]. */
export async function droppedFiles(dataTransfer) {
  const entries = [...(dataTransfer.items || [])]
    .map((item) => (item.kind === "file" && item.webkitGetAsEntry ? item.webkitGetAsEntry() : null));
  if (!entries.length || entries.some((e) => !e)) {
    return [...dataTransfer.files].map((file) => ({ file, path: file.name }));
  }
  const out = [];
  for (const entry of entries) await walk(entry, "", out);
  return out;
}

async function walk(entry, prefix, out) {
  if (entry.name.startsWith(".")) return;
  const path = prefix + entry.name;
  if (entry.isFile) {
    out.push({ file: await new Promise((ok, fail) => entry.file(ok, fail)), path });
    return;
  }
  const reader = entry.createReader();
  for (;;) {
    const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail));
    if (!batch.length) return;
    for (const child of batch) await walk(child, path + "/", out);
  }
}

/** The files of a file input (a folder input gives relative paths). */
export function inputFiles(input) {
  return [...input.files]
    .map((file) => ({ file, path: file.webkitRelativePath || file.name }))
    .filter(({ path }) => !path.split("/").some((part) => part.startsWith(".")));
}

/** One row of the upload list: name, progress bar, result. */
function row(path) {
  const progress = el("progress", { max: "1", value: "0", "aria-label": `Progress of ${path}` });
  const result = el("span", { class: "result" }, "waiting");
  const item = el("li", { class: "upload" }, el("span", { class: "name" }, path), progress, result);
  return {
    item,
    sending(fraction) { progress.value = fraction; result.textContent = `uploading ${Math.round(fraction * 100)}%`; },
    ingesting() { progress.removeAttribute("value"); result.textContent = "reading and indexing"; },
    done(text) {
      progress.max = 1;
      progress.value = 1;
      const kind = text.split(":")[0];
      item.dataset.result = kind;
      result.textContent = text;
    },
  };
}

/** Upload `files` ([{file, path}]) into `kb`, rows added to `list`; `onFileDone()` after each. */
export async function uploadAll(kb, files, list, onFileDone) {
  const rows = files.map(({ path }) => row(path));
  list.prepend(...rows.map((r) => r.item));
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      rows[i].done(await uploadOne(kb, files[i].file, rows[i]));
      onFileDone();
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, files.length) }, worker));
}

async function uploadOne(kb, file, view) {
  try {
    const job = await uploadFile(kb, file, (f) => view.sending(f));
    view.ingesting();
    const end = await waitJob(kb, job, () => {});
    if (end.status === "failed") return `failed: ${end.error || "ingestion failed"}`;
    return end.results[file.name] || Object.values(end.results)[0] || "stored";
  } catch (error) {
    return `failed: ${error.message}`;
  }
}
