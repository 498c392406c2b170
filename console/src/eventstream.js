// AWS event-stream frames (InvokeEndpointWithResponseStream): each PayloadPart's bytes; an exception frame
// (ModelStreamError, InternalStreamFailure) is thrown with its message.
// Frame: total length, headers length, prelude CRC (4 bytes each, big-endian), headers, payload, message CRC.

const SIZES = { 0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16 };

export function headersOf(view, start, end) {
  const headers = {};
  const decoder = new TextDecoder();
  let at = start;
  while (at < end) {
    const nameLength = view.getUint8(at);
    const name = decoder.decode(new Uint8Array(view.buffer, view.byteOffset + at + 1, nameLength));
    at += 1 + nameLength;
    const type = view.getUint8(at);
    at += 1;
    if (type === 6 || type === 7) {
      const length = view.getUint16(at);
      const bytes = new Uint8Array(view.buffer, view.byteOffset + at + 2, length);
      headers[name] = type === 7 ? decoder.decode(bytes) : bytes;
      at += 2 + length;
    } else {
      at += SIZES[type] ?? 0;
    }
  }
  return headers;
}

export async function* payloads(chunks) {
  let buffer = new Uint8Array(0);
  for await (const chunk of chunks) {
    buffer = concat(buffer, chunk);
    while (buffer.length >= 12) {
      const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.length);
      const total = view.getUint32(0);
      if (buffer.length < total) break;
      const headersLength = view.getUint32(4);
      const headers = headersOf(view, 12, 12 + headersLength);
      const payload = buffer.slice(12 + headersLength, total - 4);
      buffer = buffer.slice(total);
      if (headers[':message-type'] === 'exception' || headers[':message-type'] === 'error') {
        const text = new TextDecoder().decode(payload);
        let message = text;
        try {
          message = JSON.parse(text).Message || JSON.parse(text).message || text;
        } catch {
          // the payload is the message
        }
        throw new Error(`${headers[':exception-type'] || headers[':error-code'] || 'StreamError'}: ${message}`);
      }
      if (headers[':event-type'] === 'PayloadPart') yield payload;
    }
  }
}

function concat(a, b) {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}
