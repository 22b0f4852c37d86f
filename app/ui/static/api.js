// The API as the dashboard calls it: the key from sessionStorage, in the Authorization header of
// every call (never a cookie, never a URL); errors in the house shape {"error": {code, message}}.

const KEY = "pqs.key";

export function storedKey() {
  return sessionStorage.getItem(KEY);
}

export function keepKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// One call to the REST API; `key` defaults to the signed-in one. Resolves to the parsed JSON
// answer (null for 204), rejects with an ApiError.
export async function call(method, path, { body, key = storedKey() } = {}) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  if (answer.status === 204) return null;
  const data = await answer.json().catch(() => null);
  if (!answer.ok) {
    const error = data && data.error ? data.error : { code: "http_" + answer.status, message: answer.statusText };
    throw new ApiError(answer.status, error.code, error.message);
  }
  return data;
}

export const q = (name) => "/v1/queues/" + encodeURIComponent(name);
