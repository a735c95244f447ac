// SPDX-License-Identifier: Apache-2.0
// The server's API (/v1/...) with the signed-in key. Errors come back as ApiError with the
// server's own message ({"error": {"code", "message"}}).

import { readSse } from "./sse.js";

// The key lives in sessionStorage: it survives a reload of this tab, never reaches another tab,
// and is gone when the tab closes (localStorage would keep it on disk for any later page).
const KEY = "mxrag.key";
localStorage.removeItem(KEY); // where earlier versions kept it

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function savedKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function saveKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headers(key, extra = {}) {
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) {
      return new ApiError(response.status, body.error.code, body.error.message);
    }
  } catch {
    // not JSON: fall through to the status line
  }
  return new ApiError(response.status, "http_error", `the server answered ${response.status} ${response.statusText}`);
}

const UNREACHABLE = "the server cannot be reached; is `mxrag serve` running?";

/** A JSON request; resolves to the parsed body, rejects with ApiError. */
export async function call(method, path, body, key = savedKey()) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(key, body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, "unreachable", UNREACHABLE);
  }
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export const kbPath = (kb) => `/v1/knowledge-bases/${encodeURIComponent(kb)}`;

/** Upload one file; `onProgress(fraction)` while it is sent; resolves to the ingestion job. */
export function uploadFile(kb, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `${kbPath(kb)}/documents`);
    const key = savedKey();
    if (key) xhr.setRequestHeader("Authorization", `Bearer ${key}`);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onload = () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // handled below
      }
      if (xhr.status === 202 && body) resolve(body);
      else {
        const message = body && body.error ? body.error.message : `the server answered ${xhr.status}`;
        reject(new ApiError(xhr.status, body && body.error ? body.error.code : "http_error", message));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, "unreachable", UNREACHABLE));
    const form = new FormData();
    form.append("files", file, file.name);
    xhr.send(form);
  });
}

/** Poll an ingestion job until it ends; `onUpdate(job)` on each answer. */
export async function waitJob(kb, job, onUpdate, intervalMs = 400) {
  while (job.status !== "done" && job.status !== "failed") {
    await new Promise((r) => setTimeout(r, intervalMs));
    job = await call("GET", `${kbPath(kb)}/jobs/${encodeURIComponent(job.id)}`);
    onUpdate(job);
  }
  return job;
}

/** A streamed chat completion: yields the chunks (objects) of the SSE stream. */
export async function* streamChat(body, signal) {
  let response;
  try {
    response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(savedKey(), { "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify({ ...body, stream: true }),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "unreachable", UNREACHABLE);
  }
  if (!response.ok) throw await errorOf(response);
  for await (const chunk of readSse(response.body)) {
    if (chunk.error) throw new ApiError(502, chunk.error.code || "upstream_error", chunk.error.message || "the answer failed");
    yield chunk;
  }
}
