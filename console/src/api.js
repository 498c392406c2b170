// The gateway's APIs as the console calls them: the SageMaker control plane (JSON 1.1 with X-Amz-Target), its
// CloudWatch metrics (JSON 1.0), pier's own /pier routes, and the invocation routes. The user's key (if the
// gateway has keys) rides on every call as a bearer token; it is kept for this tab only.

const KEY = 'pier.console.key';

export function apiKey() {
  return sessionStorage.getItem(KEY) || '';
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

export function authHeaders(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : { ...extra };
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Every route family answers errors in its own shape: AWS JSON ({__type, message}), OpenAI ({error: {message}}),
// TGI ({error, error_type}), or text.
export async function failure(response) {
  const text = await response.text();
  let code = String(response.status);
  let message = text || response.statusText;
  try {
    const body = JSON.parse(text);
    const error = body.error;
    message = body.message || body.Message || (typeof error === 'object' ? error?.message : error) || message;
    code = body.__type || (typeof error === 'object' ? error?.type : body.error_type) || code;
  } catch {
    // not JSON: the text is the message
  }
  return new ApiError(response.status, code, message);
}

export async function sagemaker(operation, body = {}) {
  const response = await fetch('/', {
    method: 'POST',
    headers: authHeaders({ 'X-Amz-Target': `SageMaker.${operation}`, 'Content-Type': 'application/x-amz-json-1.1' }),
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

// CloudWatch (JSON 1.0, X-Amz-Target GraniteServiceVersion20100801.*, as boto3 sends it) over the gateway's own
// AWS/SageMaker metrics.
export async function cloudwatch(operation, body = {}) {
  const response = await fetch('/', {
    method: 'POST',
    headers: authHeaders({ 'X-Amz-Target': `GraniteServiceVersion20100801.${operation}`, 'Content-Type': 'application/x-amz-json-1.0' }),
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  return response.json();
}

export async function getJson(path) {
  const response = await fetch(path, { headers: authHeaders() });
  if (!response.ok) throw await failure(response);
  return response.json();
}

export async function getText(path) {
  const response = await fetch(path, { headers: authHeaders() });
  if (!response.ok) throw await failure(response);
  return response.text();
}

export async function send(path, body, contentType = 'application/json', signal = undefined, headers = {}) {
  const response = await fetch(path, {
    method: 'POST',
    headers: authHeaders({ 'Content-Type': contentType, ...headers }),
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  return response;
}

// Every page of a paged SageMaker List* call.
export async function listAll(operation, key, body = {}) {
  const items = [];
  let token;
  do {
    const page = await sagemaker(operation, { ...body, MaxResults: 100, ...(token ? { NextToken: token } : {}) });
    items.push(...page[key]);
    token = page.NextToken;
  } while (token);
  return items;
}

// What the key may do: 'admin' (everything), 'invoke' (the invocation routes only: the console hides every write
// and the gateway refuses them anyway), or 'none' (the gateway wants a key, or this one is not valid).
export async function role() {
  try {
    await sagemaker('ListEndpoints', { MaxResults: 1 });
    return { role: 'admin' };
  } catch (error) {
    try {
      await getJson('/v1/models');
      return { role: 'invoke', reason: error.message };
    } catch (second) {
      return { role: 'none', reason: second.message };
    }
  }
}
