// Server-sent events: each `data:` payload, parsed as JSON, until `[DONE]` or the end. From a fetch() response, or
// from any stream of byte chunks (the payloads of an AWS event stream carry SSE too).
export function events(response) {
  return eventsOf(bytesOf(response));
}

export async function* bytesOf(response) {
  const reader = response.body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    yield value;
  }
}

export async function* eventsOf(chunks) {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of chunks) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const data = dataOf(buffer.slice(0, end));
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      if (data === '[DONE]') return;
      if (data !== null) yield JSON.parse(data);
    }
  }
  const data = dataOf(buffer);
  if (data !== null && data !== '[DONE]') yield JSON.parse(data);
}

export function dataOf(block) {
  const lines = block.split(/\r?\n/).filter((line) => line.startsWith('data:'));
  if (!lines.length) return null;
  return lines.map((line) => line.slice(5).replace(/^ /, '')).join('\n');
}
