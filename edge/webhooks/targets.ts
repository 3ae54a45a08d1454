/*
 * Where outbound webhooks may go (SSRF): not to this machine or a private network unless an
 * admin allows it. Checked on the URL as given - literal addresses and local names. A public name
 * that resolves to a private address is not caught here (a Worker cannot resolve names); on
 * Cloudflare such fetches leave through its network and cannot reach a private one anyway.
 */

function ipv4(host: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  return parts.every((p) => p <= 255) ? parts : null;
}

function privateIpv4([a, b]: number[]): boolean {
  return a === 0 || a === 10 || a === 127 || (a === 100 && b! >= 64 && b! <= 127) || (a === 169 && b === 254) || (a === 172 && b! >= 16 && b! <= 31) || (a === 192 && b === 168) || (a === 198 && (b === 18 || b === 19)) || a! >= 224;
}

/** Why a webhook URL is refused, or null when it may be called. */
export function refusedTarget(raw: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "not a URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "only http and https URLs are called";
  if (url.username || url.password) return "credentials in the URL are not allowed";
  if (allowPrivate) return null;
  const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, "");
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".internal") || !host.includes(".") && !host.includes(":")) {
    return `${host} is a local name; an admin can allow private targets (PUT /api/admin/webhooks)`;
  }
  const v4 = ipv4(host);
  if (v4 && privateIpv4(v4)) return `${host} is a loopback, private or reserved address; an admin can allow private targets (PUT /api/admin/webhooks)`;
  if (host.includes(":")) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host)?.[1];
    if (mapped && ipv4(mapped) && privateIpv4(ipv4(mapped)!)) return `${host} is a private address`;
    if (host === "::1" || host === "::" || /^f[cd]/.test(host) || /^fe[89ab]/.test(host) || /^::ffff:/.test(host) || /^ff/.test(host)) {
      return `${host} is a loopback, private or reserved address; an admin can allow private targets (PUT /api/admin/webhooks)`;
    }
  }
  return null;
}
