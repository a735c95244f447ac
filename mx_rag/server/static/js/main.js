// SPDX-License-Identifier: Apache-2.0
// The page: sign-in (or local mode), the knowledge-base panel, uploads and the chat.

import { ApiError, call, savedKey, saveKey } from "./api.js";
import { Chat, forgetConversations } from "./chat.js";
import { say } from "./dom.js";
import { choose, createKb, graphKbs, loadDocuments, loadKbs } from "./kb.js";
import { droppedFiles, inputFiles, uploadAll } from "./upload.js";

const $ = (id) => document.getElementById(id);
const chat = new Chat($("log"), $("passage"));
let kb = "";
let running = null; // the AbortController of the answer being streamed

/** Local mode (no key needed), a saved key that works, or the sign-in form. */
async function start() {
  const key = savedKey();
  try {
    await call("GET", "/v1/models", undefined, key);
    return enter(key ? "Signed in with an API key" : "Local mode: this server needs no API key", Boolean(key));
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 401) return showSignIn(error.message);
    saveKey("");
    return showSignIn(key ? `Your saved API key was refused: ${error.message}` : "");
  }
}

function showSignIn(message) {
  $("workspace").hidden = true;
  $("whoami").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  say($("signin-error"), message);
  $("key").focus();
}

async function signIn(event) {
  event.preventDefault();
  const key = $("key").value.trim();
  if (!key) return say($("signin-error"), "Enter your API key.");
  try {
    await call("GET", "/v1/models", undefined, key);
  } catch (error) {
    return say($("signin-error"), `Sign-in failed: ${error.message}`);
  }
  saveKey(key);
  $("key").value = "";
  await enter("Signed in with an API key", true);
}

async function enter(who, signedIn) {
  $("signin").hidden = true;
  $("workspace").hidden = false;
  $("whoami").textContent = who;
  $("whoami").hidden = false;
  $("signout").hidden = !signedIn;
  await refreshKbs();
}

async function refreshKbs() {
  try {
    kb = await loadKbs($("kb-select"));
    say($("kb-error"), "");
  } catch (error) {
    kb = "";
    say($("kb-error"), `Could not list knowledge bases: ${error.message}`);
  }
  showKb();
}

function showKb() {
  chat.load(kb);
  const chain = $("chain");
  if (graphKbs.has(kb)) chain.value = "graph"; // answers over its entity graph by default
  else if (chain.value === "graph") chain.value = ""; // the server's chain.type
  for (const id of ["question", "send", "file-input", "folder-input"]) $(id).disabled = !kb;
  $("dropzone").classList.toggle("disabled", !kb);
  refreshDocuments();
}

async function refreshDocuments() {
  try {
    await loadDocuments(kb, $("documents"), $("documents-status"));
  } catch (error) {
    say($("documents-status"), `Could not list documents: ${error.message}`);
  }
}

async function create(event) {
  event.preventDefault();
  const name = $("kb-name").value.trim();
  try {
    await createKb(name, $("kb-graph").checked);
  } catch (error) {
    return say($("kb-error"), `Could not create ${name || "it"}: ${error.message}`);
  }
  $("kb-name").value = "";
  $("kb-graph").checked = false;
  await refreshKbs();
  say($("kb-error"), "");
  say($("kb-status"), `Created ${name}.`);
}

async function upload(files) {
  if (!kb || !files.length) return;
  await uploadAll(kb, files, $("uploads"), refreshDocuments);
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || running || !kb) return;
  const number = (id) => ($(id).value.trim() === "" ? NaN : Number($(id).value));
  running = new AbortController();
  $("question").value = "";
  $("send").hidden = true;
  $("stop").hidden = false;
  $("kb-select").disabled = true; // the answer belongs to this knowledge base's conversation
  try {
    await chat.send(question, { chain: $("chain").value, k: number("k"), temperature: number("temperature") },
      running.signal);
  } finally {
    running = null;
    $("kb-select").disabled = false;
    $("stop").hidden = true;
    $("send").hidden = false;
    $("question").focus();
  }
}

function wire() {
  $("signin-form").addEventListener("submit", signIn);
  $("signout").addEventListener("click", () => {
    saveKey("");
    choose("");
    forgetConversations();
    showSignIn("Signed out.");
  });
  $("kb-select").addEventListener("change", () => {
    kb = $("kb-select").value;
    choose(kb);
    showKb();
  });
  $("kb-create").addEventListener("submit", create);
  $("ask").addEventListener("submit", ask);
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => running && running.abort());
  $("clear").addEventListener("click", () => chat.clear());
  for (const id of ["file-input", "folder-input"]) {
    $(id).addEventListener("change", async (event) => {
      const files = inputFiles(event.target);
      event.target.value = "";
      await upload(files);
    });
  }
  const zone = $("dropzone");
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", async (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    await upload(await droppedFiles(event.dataTransfer));
  });
}

wire();
start();
