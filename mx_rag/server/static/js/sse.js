// SPDX-License-Identifier: Apache-2.0
// Server-sent events as OpenAI streams them: "data: {...}" events separated by a blank line.

/**
 * Split off the complete events of `buffer`: returns {events, rest}, where each event is the
 * joined text of its "data:" lines (with or without the space) and `rest` is the incomplete tail.
 */
export function parseSse(buffer) {
  const events = [];
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    const data = block.split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5));
    if (data.length) events.push(data.join("\n"));
  }
  return { events, rest };
}

/** The JSON objects of an SSE response body, until "[DONE]". */
export async function* readSse(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      const { events, rest } = parseSse(done ? buffer + "\n\n" : buffer);
      buffer = rest;
      for (const data of events) {
        if (data.trim() === "[DONE]") return;
        yield JSON.parse(data);
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}
