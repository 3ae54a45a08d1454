/**
 * The API document's prose: what the operations of each area share (the tags' descriptions) and what every area
 * shares (the document's description: levels, errors, rate limiting, security headers). Per-operation details
 * live on the routes themselves; the operator's guide is README.md.
 */

/**
 * The document's description, around the table of levels generated from shared/permissions.ts.
 *
 * @example
 * apiDescription(levelsTable(ROUTE_ACCESS));
 */
export function apiDescription(levelsTable: string): string {
  return `Queue, schedule and control model-training jobs on this service's own GPU box, on remote GPU workers or (later) a
hosted provider. This document is the API reference: every operation with its fields, answers and who may call it,
and one section per area (the groups below) with what the area's operations share. The operator's guide (install,
first run, GPU boxes, deploying, configuration) is the repository's README.

Authenticate with an API key (\`X-API-Key: st_...\` or \`Authorization: Bearer st_...\`) or the session cookie set by
\`POST /api/cloud/auth/login\` (see "Authentication"). Runners on GPU boxes use a worker token (see "Workers"); jobs
upload results to the S3-compatible storage endpoint with SigV4 (see "Storage").

## Levels and what each may call

A user holds one or more levels; the highest decides. Each level may call what the levels below it may. Every route
declares its access in \`shared/permissions.ts\`, which the authorisation middleware reads; the table below and each
operation's "Access:" line are generated from it. A route missing there is refused (500 \`route_access_undeclared\`,
logged as an error), never guessed, and a test fails when the service serves a route the table does not name,
\`.all()\` routes included.

${levelsTable}

No credential gives 401; a credential whose level is too low gives 403. The level is not the whole answer for what
belongs to someone:

- an environment's changes (\`PUT\`, \`DELETE\`, \`activate\`, \`dataloader\`) are for its owner, leads and admins; anyone
  else gets 403 \`not_owner\`;
- a dataset folder's files are changed by its creator, leads and admins (403 \`folder_not_yours\`);
- a job's details (\`/api/training/events\`, \`events/stream\`, \`status\`, \`checkpoints\`, \`webhooks\`, \`config\`) are for
  its owner, leads and admins; anyone else gets 403 \`not_your_job\` (the job's existence is no secret:
  \`GET /api/queue\` lists every job's public fields);
- cancelling, training control and storage credentials act on your own jobs, or any job for leads and admins;
- a user listing or revoking API keys sees only their own;
- \`--trainer_command\` is accepted only from admins (422 \`admin_only_option\` otherwise).

## Errors

Every error is JSON \`{"detail": "...", "code": "..."}\` with the request's correlation id in the \`X-Request-ID\`
header (taken from the request's \`X-Request-ID\`, or generated). The one exception is the storage endpoint
(\`/api/cloud/storage...\`), whose errors, a rate-limit refusal (\`SlowDown\`) included, are S3's XML, since S3 clients
read them (see "Storage").

| Status | When |
| --- | --- |
| 400 \`bad_request\` | the body is not valid JSON; locally, a request the Node front refuses before the Worker sees it, with \
\`Connection: close\` (a bad request line, method or HTTP version; a header without a colon; a head over 16 KiB; a malformed, negative or \
repeated \`Content-Length\`; \`Transfer-Encoding\` other than \`chunked\`; Host missing or repeated; a target that is not a path; CONNECT) |
| 400 \`no_active_job\` | a training command without \`job_id\` while you have no running job |
| 422 \`invalid_request\` | the body, query or path is the wrong shape or has unknown fields; \`errors\` lists \`{path, message}\` with paths such \
as \`body.password\` |
| 422 \`invalid_cursor\` | a listing's \`cursor\` that is malformed, tampered with or from another listing |
| 401 \`unauthenticated\`, \`invalid_api_key\`, \`invalid_credentials\`, \`invalid_worker_token\` | no credential; a wrong, expired or revoked key; \
a wrong password at login; a wrong or removed worker's token |
| 403 \`forbidden\`, \`session_required\`, \`csrf_rejected\`, \`registration_disabled\` | a level too low; a key where a session is needed; a \
cross-site cookie request; registration off |
| 403 \`not_owner\`, \`folder_not_yours\`, \`not_your_job\` | a change to another user's environment (or reading it \`unmasked\`) or dataset folder; another user's job details |
| 403 \`setup_token_required\`, \`invalid_setup_token\`, \`setup_token_unset\` | creating the first admin from another machine without the setup \
token, with a wrong one, or on a deployed Worker without the \`SETUP_TOKEN\` secret |
| 404 \`not_found\` | an unknown route or object |
| 409 \`conflict\` | the first admin exists; the username or email is taken; a name in use |
| 409 \`job_cannot_run\` | storage credentials for a job that can never run as configured |
| 413 \`payload_too_large\` | a request body over its route's cap, counted as it streams: 1 MiB for JSON and forms, 16 MiB for provider webhooks, 100 MiB for \
dataset uploads and a runner's event batch; the message names the cap |
| 413 \`zip_too_large\` | a zip that expands past its caps while it is extracted |
| 422 \`admin_only_option\`, \`mask_without_value\` | \`--trainer_command\` from anyone but an admin; \`********\` sent where nothing is stored |
| 429 \`rate_limited\` | a rate limit was reached, or too many failed logins for one username or failed worker tokens, from one address; \
\`Retry-After\` says when to retry (see "Rate limiting") |
| 429 \`too_many_watchers\` | a live event stream over the per-job (20) or per-user (10) limit |
| 421 \`misdirected_request\` | locally, a request whose Host is not one of the service's names (an IP address, \`localhost\`, the machine's \
name, \`SERVICE_HOST\`, the public URL's host, \`SERVICE_ALLOWED_HOSTS\`): a page on a host name rebound to this machine |
| 403 \`front_only\` | locally, a request sent to workerd's private port instead of the address \`npm start\` printed |
| 503 \`database_busy\` | another process (a backup, a migration tool, \`sqlite3\`) held the database's write lock for more than 5 s; \
nothing was changed; \`Retry-After\` (2 s) says when to try again |
| 507 \`storage_full\` | the disk holding the database is full; nothing was changed |

Provider webhooks are refused with 403 \`address_not_allowed\` (sender outside the allowlist), 401
\`webhook_secret_not_set\` (no signing secret yet: nothing can authenticate it) and 401 \`bad_signature\`; the Prometheus scrape answers 404
\`metrics_disabled\` while export is off.

A client mistake never gives a 5xx. A route that declares no access in \`shared/permissions.ts\` is a bug of the
service: refused with 500 \`route_access_undeclared\` and logged as an error.

## Rate limiting

Every client address gets exact sliding windows: a rule of "N per W seconds" admits a request only if fewer than N
of that client's requests under the rule were admitted in the last W seconds, so there is no burst of 2N across a
window's edge, and a refused client is admitted again the moment its oldest counted request is W seconds old.
Refused requests are not counted. Each address has its own \`RateLimiter\` Durable Object, which decides one request
at a time, so concurrent requests cannot overshoot either; it keeps its windows across restarts (below).

The rules, first match wins (a rule applies to its path and everything under it; \`<id>\` is one path segment). The
order differs from spec 8's table on purpose: job cancellation comes before job submission, whose pattern
\`/api/cloud/jobs\` would otherwise swallow it. The sign-in rules guard both the spec's \`/api/auth/...\` paths and this
service's \`/api/cloud/auth/...\`, in one shared window per rule.

| Rule | Paths | Methods | Limit |
| --- | --- | --- | --- |
| \`login\` | \`/api/auth/login\`, \`/api/cloud/auth/login\` | POST | 5 per 60 s |
| \`register\` | \`/api/auth/register\`, \`/api/cloud/auth/register\` | POST | 3 per 60 s |
| \`api-keys\` | \`/api/auth/api-keys\`, \`/api/cloud/auth/api-keys\` | POST | 10 per 60 s |
| \`job-cancel\` | \`/api/cloud/jobs/<id>/cancel\` | POST | 30 per 60 s |
| \`job-submit\` | \`/api/cloud/jobs\` | POST | 20 per 60 s |
| \`webhooks\` | \`/api/webhooks/\` | all | 100 per 60 s |
| \`storage\` | \`/api/cloud/storage/\` | all | 50 per 60 s |
| \`quotas\` | \`/api/quotas/\` | all | 30 per 60 s |
| \`default\` | every other path (and the paths above with other methods) | all | \`RATE_LIMIT_CALLS\` per \`RATE_LIMIT_PERIOD\` s (100 per 60) |

Never counted: \`/health\` and \`/api/cloud/health\` (with \`/live\` and \`/ready\`: a load balancer's probes are never
refused), the live streams \`/api/events/stream\`, \`/api/training/events/stream\` and \`/api/queue/changes\` (bounded by the
10 live streams per user instead), \`/static/\`, \`/docs/assets/\` and the dashboard's \`/ui/\`, \`/api/cloud/hints\`,
\`/api/users/me\`, \`/api/cloud/providers\`, and the runner protocol \`/api/workers/\` (runners hold worker tokens an admin
issued, and a runner drops an event batch the edge refuses with a 4xx, so a 429 there would lose training events).

The variables (\`RATE_LIMIT_CALLS\`, default 100, \`0\` turns all rate limiting off; \`RATE_LIMIT_PERIOD\`, 60, whole
seconds; \`RATE_LIMIT_LOOPBACK\`, \`0\`; \`TRUSTED_PROXIES\`, loopback) are in the README's configuration table. With
\`SERVICE_ENV=development\` (what \`npm start\` runs) loopback clients are not counted unless \`RATE_LIMIT_LOOPBACK=1\`;
in production (\`wrangler.toml\`) everyone is. A bad value is refused: \`npm start\` stops with a line naming the
variable, and the deployed Worker answers 500 naming it.

**The client address** is the direct peer, \`CF-Connecting-IP\`. Only when that peer is a trusted proxy
(\`TRUSTED_PROXIES\`: comma-separated addresses and CIDR ranges, and the word \`loopback\`; \`none\` or empty: nobody's)
is the client taken from the first address of \`X-Forwarded-For\`, else \`X-Real-IP\` (spec 8); a header that holds no
address means the peer itself. Anyone else's forwarding headers are ignored, or a client could pick a fresh address
per request. Make a trusted proxy overwrite \`X-Forwarded-For\` (or set \`X-Real-IP\`) rather than append to what the
client sent. On Cloudflare, \`CF-Connecting-IP\` is always the real client. Locally, \`npm start\` listens with a small
Node front (\`edge/local/client-front.ts\`) and runs workerd on a private loopback port behind it: the front sets
\`CF-Connecting-IP\` to the TCP peer of every request and drops one the client sent (and Miniflare's \`MF-*\` control
headers), streaming bodies and WebSocket upgrades through unbuffered. A client can therefore not claim \`127.0.0.1\`
or any other address. Loopback goes uncounted in development only when the socket's peer itself is loopback and no
trusted proxy forwarded the request: a loopback address named by a forwarding header is counted like any other, and
so is a forwarded request whose header names no address (it is counted under the proxy's address). IPv6 clients
are counted by their /64 (one subscriber's usual allocation); audit entries keep the exact address. Credentials
play no part: the limit is checked before authentication, so neither a valid nor an invalid key or session changes
it.

Two limits count failures rather than requests:

- **Failed logins per username and address**: 10 in 15 minutes (rule \`login-failures\`) for one name from one
  address (an IPv6 address by its /64), for existing and unknown names alike (so the answer says nothing about which
  exist). Past it every login for that name from that address gets 429, the right password included (refusing it
  is what stops a guesser); a successful login forgives that address's failures. Other addresses are not affected:
  a guesser, wherever they are, cannot lock the user (an admin included) out, and the right password from an address
  that has not been failing logs in. How fast one address guesses at all is bounded by the rule \`login\` (5 a
  minute, any names). The name is matched lower-cased, keyed by its hash; failed logins are logged and
  audited with \`username_hash\` (16 hex digits of its SHA-256), never the typed name.
- **Failed worker-token authentications per address**: 20 a minute (rule \`worker-token-failures\`), then 429 instead
  of 401. A valid token is never counted or refused, so a guesser behind a runner's address cannot lock the runner
  out.

Both follow \`RATE_LIMIT_CALLS=0\` (off) and, for the worker tokens, the loopback rule above.

Every answer carries, whatever its status (200, 401, 404, ...):

| Header | Value |
| --- | --- |
| \`X-RateLimit-Limit\` | the rule's N |
| \`X-RateLimit-Remaining\` | requests admitted right now, after this one |
| \`X-RateLimit-Reset\` | Unix time (seconds, rounded up) when the oldest request in the window leaves it, so Remaining goes up by one; after a \
429, when the next request is admitted |
| \`RateLimit-Policy\` | \`"<rule>";q=<N>;w=<W>\` (IETF draft) |
| \`RateLimit\` | \`"<rule>";r=<remaining>;t=<seconds until the reset>\` (IETF draft) |

A request that is not counted (an excluded path, loopback in development, the limiter unreachable, a malformed request
the local Node front answers by itself) still carries \`X-RateLimit-Limit\`, \`-Remaining\` and \`-Reset\` (spec 2.11),
describing the rule that would apply with all of it remaining, without a trip to the limiter. With
\`RATE_LIMIT_CALLS=0\` (limits off) no rate-limit header is sent: there is no rule to describe. A refused request gets 429 with \`Retry-After\` (seconds, at least 1), Remaining 0 and

\`\`\`json
{"detail": "Rate limit exceeded: at most 5 requests per 60 s for POST /api/cloud/auth/login (rule \\"login\\"); retry in 42 s", "code": \
"rate_limited"}
\`\`\`

Refusals are audited as \`rate_limited\` (client address, User-Agent, the path as target, and \`details\` with method,
path, rule, limit, window_seconds): at most one entry per client, rule and second, whose \`refusals\` says how many
refusals it stands for, so a flood of refused requests cannot become a flood of audit writes.

A limiter stores its windows in its own Durable Object storage: a reservation for the next few admissions (a
quarter of the limit, 1 to 64) before they are answered, the admissions themselves within a second. A restarted
limiter therefore never admits more than the limit; if it stopped before storing some admissions, it counts them
as made at its restart, which may refuse a few requests too many for one window. A limiter whose windows have all
expired deletes its storage. If a limiter cannot be reached, the request is served without counting and a warning
is logged (\`rate limiter unreachable\`): a limiter outage does not become a service outage.

\`npm run bench:ratelimit\` measures the latency the limiter adds, throughput with limiting on against off, and
exactness with 32 clients hammering one address.

## Security headers

Every answer carries \`hono/secure-headers\`' set (\`X-Content-Type-Options: nosniff\`, \`X-Frame-Options: SAMEORIGIN\`,
\`Referrer-Policy: no-referrer\`, HSTS, \`Cross-Origin-Opener-Policy\` and \`-Resource-Policy: same-origin\`, ...) and a
\`Content-Security-Policy\`: \`default-src 'none'\` for the API; \`/docs\` and \`/redoc\` may load their own files, Swagger
UI's one inline script (by its hash), inline styles, \`data:\` images and ReDoc's \`blob:\` search worker. Headers a
route sets itself (storage object reads) are kept. Passwords, keys, session tokens and \`Authorization\`/\`Cookie\`
headers never reach a log line.`;
}

/** One entry per area, in the order the documentation pages show them. */
export const TAGS: { name: string; description: string }[] = [
  {
    name: "Authentication",
    description: `Sessions, API keys, the first admin and self-registration.

- **The first admin.** \`GET /api/cloud/auth/setup/status\` says whether the service is new
  (\`{"needs_setup":true,"registration_enabled":false}\`); \`POST /api/cloud/auth/setup/first-admin\` creates the first
  admin and logs them in. Only the first call succeeds (409 afterwards). Whoever reaches a new service first could
  make themselves its admin, so that call needs the one-time setup token (\`setup_token\`) unless it comes from the
  service's own machine (a loopback socket, not forwarded by a proxy). It is \`SETUP_TOKEN\` when set (the Worker
  secret when deployed, where it is always needed and first-admin is refused with 403 \`setup_token_unset\` until it
  is set); otherwise \`npm start\` makes a random one at each start and prints it while setup is needed. Missing or
  wrong: 403 \`setup_token_required\` / \`invalid_setup_token\`, and nothing is created.
- **Sessions.** \`POST /api/cloud/auth/login\` takes \`username\` (or the email) and \`password\` and sets the session
  cookie: \`HttpOnly\`, \`SameSite=Lax\`, \`Path=/\`. Over HTTPS (the request came over it, or \`SERVICE_PUBLIC_URL\` is
  https, as behind a TLS-terminating proxy; \`X-Forwarded-Proto\` is not consulted) it is \`__Host-st_session\`,
  \`Secure\` with no \`Domain\`, so neither plain HTTP nor a sibling subdomain can plant or overwrite it, and only that
  name is read; over plain HTTP (\`npm start\` on its own) it is \`st_session\`. A session lasts 24 hours from login,
  30 days with \`"remember_me": true\`; it does not slide. \`POST /api/cloud/auth/logout\` ends it.
- **API keys.** \`st_\` followed by 43 random characters. Only the SHA-256 of a key is stored; the key is found by
  its first 11 characters (\`prefix\`, shown in listings). Send it as \`X-API-Key:\` or \`Authorization: Bearer\`. Keys
  may expire (\`expires_in_days\`), can be revoked (\`DELETE /api/cloud/auth/api-keys/{key_id}\`), and record
  \`last_used_at\` (updated at most once a minute). A key is created only with a session cookie: a key cannot mint
  more keys. The whole key is shown once, in the creation answer. A Worker instance remembers a key it has verified
  for 2 seconds, so a burst of requests costs one lookup: revocation takes effect at once on the instance that
  revoked it (the only one under \`npm start\`) and within 2 seconds on every other; expiry is checked on every
  request.
- **Passwords** are at least 8 characters, hashed with PBKDF2-SHA256 at 100,000 iterations (the Workers runtime's
  cap) with a per-user 16-byte salt, stored with their parameters, and compared in constant time.
- **CSRF.** A state-changing request (anything but GET/HEAD/OPTIONS) authenticated by the session cookie must come
  from the service's own origin: a cross-site \`Origin\` or \`Sec-Fetch-Site: cross-site\` is refused with 403
  \`csrf_rejected\`. Requests with an API key are not affected. A WebSocket upgrade (any route) whose \`Origin\`
  is not this service's host is refused with 403 \`foreign_origin\`, whatever credential it carries; programs send
  no \`Origin\` and are not affected.
- **Registration.** \`POST /api/cloud/auth/register\` is off by default (403 \`registration_disabled\`). An admin
  switches it with \`PUT /api/cloud/auth/registration {"enabled": true}\`; new accounts get the \`researcher\` level.
- **Guessing is limited:** 10 failed logins per username per address per 15 minutes, and 5 login attempts per address
  a minute (see "Rate limiting"); failures from one address never lock the user out from another.
  A failed login is logged with a hash of the name, never the name.

\`\`\`sh
curl -s -c cookies.txt -X POST $BASE/api/cloud/auth/login -H 'Content-Type: application/json' \\
  -d '{"username":"admin","password":"correct horse battery"}'
curl -s -b cookies.txt -X POST $BASE/api/cloud/auth/api-keys -H 'Content-Type: application/json' -H "Origin: $BASE" \\
  -d '{"name":"laptop"}'
curl -s $BASE/api/users/me -H "X-API-Key: $KEY"
\`\`\``,
  },
  {
    name: "Users",
    description: `Users and their levels. Levels, highest first, with the queue priority they give: admin (30, Urgent), lead (20,
High), researcher (10, Normal), viewer (0, Low); the highest level a user holds decides (see "Levels and what each
may call"). Admins create users with their levels (and optionally a \`team_id\`, which the queue's fair-share limit
uses):

\`\`\`sh
curl -s -X POST $BASE/api/users -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
  -d '{"email":"bea@example.com","username":"bea","password":"another long one","level_names":["researcher"]}'
\`\`\``,
  },
  {
    name: "Environments",
    description: `An environment is a named training setup: an option map (\`config\`, every key prefixed with \`--\`, values string,
number, boolean or null) and a dataloader (the datasets of \`multidatabackend.json\`). Names are 1 to 64 letters,
digits, \`.\`, \`_\` or \`-\`, start with a letter or digit, and may not be \`examples\` or \`environments\` (the name becomes
a directory), nor another user's \`inline-run-<id>\`. Reading needs the viewer level; creating needs researcher.
Every environment has an owner (\`owner\`: who created it); updating, renaming, activating, regenerating the
dataloader and deleting it are for the owner, leads and admins (others: 403 \`not_owner\`, nothing changes).

\`\`\`sh
# Create one: the option map starts with the model fields given; the dataloader with one image
# dataset read from datasets/portraits and the default text-embed cache, under cache/portraits/.
curl -s -X POST $BASE/api/configs/environments -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
  -d '{"name":"portraits","model_family":"flux","model_flavour":"dev","model_type":"lora"}'

# Set its options. config REPLACES the whole map (no merge): send every option to keep.
curl -s -X PUT $BASE/api/configs/portraits -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
  -d '{"tags":["flux"],"config":{"--model_family":"flux","--model_type":"lora","--learning_rate":0.0001}}'

curl -s -X POST $BASE/api/configs/portraits/activate -H "X-API-Key: $KEY"   # {"success":true,"active":"portraits"}
curl -s $BASE/api/configs/ -H "X-API-Key: $KEY"                             # {"environments":[...]}
curl -s -OJ $BASE/api/configs/portraits/export -H "X-API-Key: $KEY"         # saves portraits.json
curl -s -X DELETE $BASE/api/configs/portraits -H "X-API-Key: $KEY"          # {"success":true,"deleted":"portraits"}
\`\`\`

- \`GET /api/configs/{name}\` gives \`name\`, \`description\`, \`tags\`, \`model_family\`, \`model_flavour\`, \`model_type\`,
  \`lora_type\`, \`config\`, \`dataloader\`, \`active\` (yours), \`owner\` (a username), \`created_at\`, \`updated_at\`.
  \`GET /api/configs/\` (or without the slash) lists them without \`config\` and \`dataloader\`; \`config_type\` may only
  be \`model\`, the default.
- \`PUT /api/configs/{name}\` takes any of \`name\` (renames; 409 if taken), \`description\`, \`tags\` (replaced) and
  \`config\` (replaced). The model fields follow the new map's \`--model_family\`, \`--model_flavour\`, \`--model_type\`
  and \`--lora_type\`.
- An unknown name is 404 on every \`/api/configs/{name}\` route; an invalid one is 422.
- The active environment is per user: each user has at most one (none until their first activation). A rename
  keeps it active. Training start writes the form's configuration to it (see "Training").
- \`DELETE /api/configs/{name}\` removes it (and anyone's choice of it as active). Jobs already submitted are
  unaffected: each runs the configuration snapshotted at submit.
- **Secrets are masked for everyone.** In \`config\` and \`dataloader\`, at any depth, also inside an option that holds
  JSON such as \`--webhook_config\`, these read \`"********"\` in every answer and export, for every level:
  - the value of a key one of whose words (split at \`_\`, \`-\`, \`.\` and camelCase) is \`key\`, \`keys\`, \`pass\`,
    \`creds\`, \`authorization\`, \`bearer\`, \`cookie\`, \`dsn\`, \`signature\` or \`sig\`, contains \`secret\`,
    \`password\`, \`passwd\`, \`passphrase\`, \`credential\`, \`apikey\`, \`privatekey\` or \`accesskey\`, or ends in
    \`token\` or \`auth\`; and a webhook's address (\`webhook_url\`, \`discord_webhook\`). So \`--wandb_key\`,
    \`--private_key\`, \`--credentials\`, \`--hub_token\` and \`apiKey\` are masked; \`--tokenizer_max_length\`,
    \`--webhook_config\` and \`callback_url\` are not. The rule is \`isSecretKey\` in \`shared/secrets-mask.ts\`;
  - in any text value, the user info of every URL (\`postgres://alice:pw@db/x\` reads \`postgres://********@db/x\`)
    and the values of its query parameters named as above (\`?token=********\`).

  With \`?unmasked=true\`, \`GET /api/configs/{name}\` and its export answer the values as stored, to the
  environment's owner, leads and admins only (anyone else: 403 \`not_owner\`). Send back what you were shown (on
  \`PUT\` or a training form) and the stored value at that place is kept: \`"********"\` for a key's value, a URL
  exactly as shown for its credentials (a URL edited around its masked credentials needs them again). A mask where
  nothing is stored is 422 \`mask_without_value\`.
- \`--trainer_command\` (a raw command for the box) may be set only by an admin: anyone else's \`PUT\` is 422
  \`admin_only_option\` with \`errors[].path\` \`body.config.--trainer_command\`, and nothing is saved. The list is
  \`ADMIN_ONLY_OPTIONS\` in \`shared/admin-options.ts\`. \`--trainer <name>\` is open to researchers (the box decides
  which names exist; see "Workers").
- \`POST /api/configs/{name}/dataloader\` resets the dataloader to the starter one for the current name; a rename
  alone leaves the dataloader's paths as they were.
- \`GET /api/configs/examples\` lists the templates shipped with the service (FLUX.1 LoRA, SDXL full fine-tune, SD
  3.5 LyCORIS, and \`demo\`: the built-in demo trainer on the CPU). \`POST /api/configs/environments\` with
  \`"from_example": "<name>"\` starts from one: its options, tags, description and model fields (fields sent in the
  same body win).`,
  },
  {
    name: "Datasets",
    description: `Datasets live in the R2 bucket under \`datasets/\` (locally: \`.data/worker\`), uploaded over HTTP; runners fetch the
files a job's dataloader names into their cache (see "Workers").

\`\`\`sh
curl -s -X POST $BASE/api/datasets/folders -H "X-API-Key: $KEY" -F parent_path= -F folder_name=portraits
curl -s -X POST $BASE/api/datasets/upload -H "X-API-Key: $KEY" -F target_path=portraits -F 'files[]=@001.png' -F 'files[]=@001.txt'
curl -s -X POST $BASE/api/datasets/upload/zip -H "X-API-Key: $KEY" -F target_path=portraits -F file=@portraits.zip
curl -s "$BASE/api/datasets?path=portraits" -H "X-API-Key: $KEY"   # {"path","folders":[...],"files":[{"name","size","sha256","uploaded"}],"next_cursor"}
curl -s -X DELETE "$BASE/api/datasets?path=portraits/001.png" -H "X-API-Key: $KEY"   # {"success","path","deleted_files","deleted_bytes"}
\`\`\`

- Paths are relative to the datasets root, \`/\`-separated. Refused with a 4xx that names the field or the zip entry,
  and **nothing written**: \`..\` or \`.\` segments, a leading \`/\`, backslashes, empty segments (\`//\`), control
  characters, segments over 255 or paths over 1024 characters.
- Files: images (\`.png .jpg .jpeg .webp .bmp .gif .tif .tiff\`) and caption/metadata files (\`.txt .jsonl .csv\`);
  anything else is 415. A file name is a single name.
- Zips are extracted on the server keeping their folders; refused whole, naming the entry, for a path leaving
  \`target_path\` (zip-slip), a symbolic link, or a file type not allowed; macOS metadata (\`__MACOSX/\`, \`.DS_Store\`)
  is skipped and listed in \`skipped\`.
- Limits: **100 MiB per upload request** (413 beyond: split it, counted as the bytes arrive, so a chunked body is
  cut off too), 1 GiB extracted per zip and 100 MiB per zip entry, 20,000 zip entries. Zips are inflated as a
  stream and the bytes actually produced are counted, whatever the entries declare: a zip bomb is 413
  \`zip_too_large\` and nothing is written. Each file is stored with its SHA-256 (shown in listings).
- Creating a folder that exists is 409. Uploading a file that exists replaces it.
- Listing needs the viewer level; folders, uploads and deletions need researcher.
- **Listings are paged**: folders and files together in key order, \`limit\` per page (default 500, at most 1000); pass
  \`next_cursor\` as \`cursor\` for the next page (it keeps its path; another \`path\` with it is 422
  \`invalid_cursor\`), until it is null.
- **A quota per owner**: everything under the top-level folders a user owns counts against them, whoever writes it:
  at most **50 GiB and 200,000 files** by default (each folder counts as one file; an admin changes it with
  \`PUT /api/admin/dataset-quota\`, audited as \`dataset_quota_changed\`). What a request adds (its files less those
  they replace) is reserved before anything is written: past the quota it is **413 \`dataset_quota_exceeded\`**, the
  detail saying the quota, the owner's usage and what the request adds, and **nothing is written**. 413 because the
  request is too large for what is left to its folder's owner, and a client fixes it; 507 stays the service's own
  disk being full. \`DELETE /api/datasets?path=...\` (a file, or a folder with everything under it; its owner, leads
  and admins) gives the room back. Folders of nobody (from before owners) count against nobody. Files stored before
  quotas existed are not counted until deleted.
- **Folder owners.** Each top-level folder (the first segment of a path) records its creator: the user who created
  it, or wrote into it first. Only the creator, leads and admins change files anywhere under it (upload, zip, new
  subfolder); anyone else gets 403 \`folder_not_yours\` and nothing is written. Reading stays open to every level.
  Folders that existed before owners were recorded belong to nobody: only leads and admins change them. Files
  straight under the datasets root are for leads and admins too.

\`\`\`sh
# rita's folder: otto (a researcher) may read it, not change it.
curl -s -X POST $BASE/api/datasets/upload -H "X-API-Key: $OTTO" -F target_path=portraits -F 'files[]=@x.png'
#   -> 403 {"code":"folder_not_yours","detail":"Dataset folder portraits belongs to another user: ..."}
\`\`\``,
  },
  {
    name: "Queue",
    description: `The job queue and its Scheduler. A local job names an environment; its \`--num_processes\` (0 = a CPU job) and
\`--accelerate_visible_devices\` (preferred devices) say what it needs.

\`\`\`sh
curl -s -X POST $BASE/api/queue/submit -H "X-API-Key: $KEY" -H 'Content-Type: application/json' -d '{"config_name":"my-env"}'
#   -> {"status":"running","allocated_gpus":[0],...} or {"status":"queued","queue_position":3,"wait_reason":"gpus_busy",...}
curl -s $BASE/api/queue/position/local-3f9c2a1b04de -H "X-API-Key: $KEY"
curl -s $BASE/api/queue/me -H "X-API-Key: $KEY"
curl -s "$BASE/api/queue?include_completed=true&limit=100" -H "X-API-Key: $KEY"   # then &cursor=<next_cursor> until it is null
# What it runs: the configuration snapshotted at submit (secrets masked).
curl -s "$BASE/api/training/config?job_id=local-3f9c2a1b04de" -H "X-API-Key: $KEY"
#   -> {"job_id":"local-...","config_name":"my-env","config":{"--num_processes":1,...},"dataloader":[...]}
\`\`\`

- **A job runs its snapshot.** At submit the environment's option map and dataloader are copied onto the job; the
  runner launches from that copy (and the job's webhooks come from it), never from the live environment. Editing,
  renaming or deleting the environment afterwards changes nothing for a job already submitted, and a run can be
  reproduced from its snapshot. Any researcher may submit any environment, but one that sets an admin-only option
  (\`--trainer_command\`) is refused unless the submitter is an admin: 422 \`admin_only_option\`, \`errors[].path\`
  \`environment.config.--trainer_command\`, nothing stored.
- **Who sees what.** \`GET /api/queue\` shows your own jobs in full and other users' jobs with their public fields
  only: \`id\`, \`job_id\`, \`user_id\`, \`owner\` (username), \`status\`, \`priority\`, \`effective_priority\`, \`position\`,
  \`wait_reason\`, \`wait_message\`, \`queued_at\`. Leads and admins see every job in full. \`position\`, \`stats\` and \`me\`
  show nothing private of others.
- **Paging.** Long listings (\`GET /api/queue\`, \`GET /api/audit\`, a job's events and webhook deliveries) answer a
  \`next_cursor\` (null at the end) and take it back as \`cursor\`, so a client walks every entry once, without
  duplicates or gaps, while new jobs arrive. A malformed cursor, or one from another listing, is 422
  \`invalid_cursor\`. Each operation says which order its pages have; \`position\` gives the scheduling order.
- **Live.** \`GET /api/queue/changes\` is a server-sent events stream (\`curl -N\`, or EventSource in a browser) that
  says when jobs change status: \`event: ready\` once, then \`event: change\` with
  \`{"jobs":[{"job_id","from","to"}],"at"}\` for each submission (\`from\` null), admission, approval, rejection,
  priority change, cancel, end or retry. Only ids and statuses travel: reload \`GET /api/queue\` (or \`stats\`) to see
  more, with your own access. Nothing is replayed after a reconnect: reload instead. The dashboard's queue and GPU
  views follow it rather than polling. It is one of your live streams (at most 10 per user, job event streams
  included: 429 \`too_many_watchers\` beyond).
- **One allocator.** Every admission (a pending job to running, with its GPUs or its worker) is made by the
  Scheduler Durable Object, one decision at a time, so two submissions can never get the same GPU. It passes every
  5 s and at once on submit, cancel, approval, rejection, priority or limit change, worker registration and a
  worker's return. Allocations are stored on the running entries (\`allocated_gpus\`, \`worker_id\`), never only in
  memory. Submissions that arrive together (within 4 ms of each other, or while an earlier decision runs) are
  decided together, in arrival order, in one plan and one write: each still gets its own answer, and a \`no_wait\`
  submission that is rejected leaves no gap in the positions. Limits, approval rules, workers and environments'
  GPU options read for one decision serve the next ones for up to 2 s; every pass reads them afresh, and changing
  an environment or the approval rules takes effect on the very next submission.
- **Order.** Effective priority (\`priority_override\` if set, else the level's 0/10/20/30, plus the starvation
  boost), then submission time. **Starvation boost:** +10 for every full \`starvation_threshold_minutes\` (default
  60) a job has waited, at most +30, so a viewer's job waiting 3 hours ties an admin's and, being older, goes
  first. \`0\` turns it off.
- **Every job that fits starts in one pass.** A job that does not fit is skipped and smaller ones behind it may use
  the free GPUs - until it has waited the starvation threshold. From then on it holds a **reservation** (EASY
  backfill): it is expected to start when enough of the GPUs it may use are expected free, from the running jobs'
  \`expected_end_at\`; meanwhile a job behind it may take a reserved GPU only if its own expected run time
  (\`expected_minutes\`) ends it before then, and any job may take a GPU the reserved job will not need even then.
  A job of unknown run time takes only those. While a job the reservation waits for has no expected end, or is past
  it, nothing is promised and every GPU it could use is held for it until enough are free at once. Its
  \`wait_message\` (and \`expected_start_at\`) say when it is expected to start; the others' say whose reservation
  keeps them waiting (\`wait_reason: reserved\`), from when, and why they may not go first. The same for remote
  workers, a worker being the unit. A job that can never fit as configured (\`insufficient_gpus\`,
  \`no_matching_worker\`, \`no_local_box\`) holds nothing.
- **Limits** (\`GET\`/\`POST /api/queue/concurrency\`, persisted): \`max_concurrent\` (5), \`user_max_concurrent\` (2)
  and, with \`enable_fair_share\`, \`team_max_concurrent\` (10) apply to cloud jobs, checked in that order (jobs
  without a team have no team limit; a user's team is set with \`team_id\` when an admin creates them);
  \`local_job_max_concurrent\` (1) and \`local_gpu_max_concurrent\` (null = unlimited) to the local box;
  \`starvation_threshold_minutes\` (60) and \`worker_heartbeat_timeout_seconds\` (90) to the scheduler.
- **Targets.** \`local\` runs only on the local box; \`worker\` only on a remote worker whose labels match every
  \`worker_labels\` glob (\`*\` = any characters) and with enough GPUs, the longest-idle IDLE worker first; \`auto\`
  tries workers first, then the local box. \`no_wait: true\` answers \`rejected\` and stores nothing when the job
  cannot start now. \`any_gpu: true\` ignores the preferred devices.
- **Why is it waiting.** Every pending entry in the list, \`position\` and \`me\` answers carries its live \`position\`
  and a \`wait_reason\` with a message: \`global_limit\`, \`user_limit\`, \`team_limit\`, \`local_job_limit\`,
  \`local_gpu_limit\`, \`gpus_busy\`, \`workers_busy\`, \`reserved\`, \`insufficient_gpus\`, \`no_local_box\`,
  \`no_matching_worker\`, \`awaiting_approval\`, \`local_paused\`.
- **Approvals.** \`GET\`/\`PUT /api/queue/approval-rules\`: \`local_gpu_threshold\` (jobs asking for more GPUs need
  approval; default off) and \`cloud_cost_threshold\` ($50). A caught job is \`blocked\` and no path starts it until an
  admin approves (\`POST /api/queue/{job_id}/approve\`); \`POST /api/queue/{job_id}/reject?reason=...\` ends it
  \`cancelled\` with \`error_message: "Rejected: <reason>"\`.
- **Cancel** (\`POST /api/queue/{job_id}/cancel\`) works on pending and blocked jobs: your own, or any as a lead or
  admin. A running job answers 409: cancel it with \`POST /api/training/cancel\` (see "Training"). **Cleanup**
  (\`POST /api/queue/cleanup?days=30\`, 1 to 365) deletes only completed, failed and cancelled entries finished more
  than \`days\` ago.
- **Every way a job ends has the same effects.** Completed, failed (by its trainer, or at \`max_attempts\` after its
  worker went silent or was removed), cancelled while waiting or running, and rejected: each ends the job's live
  event streams with an \`end\` event carrying the final status and sends the job's lifecycle webhook
  (\`job.completed\`, \`job.failed\`, \`job.cancelled\`; see "Webhooks"), frees its GPUs or worker, and lets the
  Scheduler start what now fits. Admins' decisions (approve, reject, priority) are audited.
- **Workers.** Statuses: \`connecting\` (created), \`IDLE\`, \`busy\`, \`draining\` (heartbeat with \`"draining": true\`),
  \`offline\`. A worker silent for \`worker_heartbeat_timeout_seconds\` goes offline; its running jobs go back to the
  queue with \`attempt + 1\`, or fail at \`max_attempts\` (3), and their GPUs are free. Its next heartbeat brings it
  back. \`GET /api/admin/workers\` lists them with their GPUs, labels, last heartbeat and current job, and
  \`running_trainers\`: the trainers (\`job_id\`, \`attempt\`) its runner said were alive at its last heartbeat. After
  the edge starts, a worker's silence is counted from the later of its last heartbeat and the edge's start, so an
  edge that was down takes no worker offline for its own downtime.
- \`GET /api/queue/stats\` (spec 2.4) and \`GET /api/system/status?include_allocation=true\` (2.7) show the local box's
  devices and which job holds each; \`load_avg_5min\` and \`memory_percent\` are the box's own figures from its last
  heartbeat (null until it sends them).`,
  },
  {
    name: "Training",
    description: `Starting training from a form, controlling a run, and watching its events; the trainer protocol, scripts and the
demo trainer the runner runs.

### Starting training from a form: validate and start

\`\`\`sh
curl -s -X POST $BASE/api/training/validate -H "X-API-Key: $KEY" -F __active_tab__=model -F --model_family=flux \\
  -F --model_type=lora -F --pretrained_model_name_or_path=black-forest-labs/FLUX.1-dev -F --output_dir=output \\
  -F --data_backend_config=config/multidatabackend.json -F --max_train_steps=200
#   {"valid":true,"message":"Configuration Valid","errors":[],"environment":"portraits","options":{...}}
curl -s -X POST $BASE/api/training/start -H "X-API-Key: $KEY" -F ... (the same form)
#   {"success":true,"job_id":"local-...","status":"running","environment":"portraits",...}
\`\`\`

- Both take a form (multipart or urlencoded; a JSON object also works) whose fields are the options with their \`--\`
  prefix, plus \`__active_tab__\` (echoed back, otherwise ignored). Form values are text: known numeric and boolean
  options are converted (\`"true"\`, \`"1"\`, \`"on"\`).
- **The form is the configuration**, merged with the defaults only (\`--train_batch_size 1\`,
  \`--gradient_accumulation_steps 1\`, \`--learning_rate 0.0001\`, \`--lr_scheduler constant\`, \`--seed 42\`,
  \`--num_processes 1\`, \`--validation_preview false\`, \`--report_to none\`): the verdict depends on the form alone, not
  on which environment is active. It needs \`--model_family\`, \`--model_type\`, \`--pretrained_model_name_or_path\`,
  \`--output_dir\`, \`--data_backend_config\` and one of \`--max_train_steps\` / \`--num_train_epochs\` (the other is set
  to 0, spec 2.9); each missing one is reported on its own field. A field sent as \`********\` (the mask a secret
  reads as) keeps the value stored in the environment start writes to.
- **validate** always answers 200: \`valid\`, \`message\` (\`Configuration Valid\`, or "N problems found"), \`errors\` as
  \`{field, message}\` per field (unknown fields, missing required options, bad numbers, negative values, batch size
  below 1, learning rate outside (0, 1), both or neither of epochs and steps, \`--validation_resolution\` not \`WxH\`,
  \`--output_dir\`/\`--data_backend_config\` absolute or with \`..\`, \`--resume_from_checkpoint\` other than
  \`latest\`/\`checkpoint-N\`, a malformed \`--webhook_config\`, more than 5 webhook targets or a reporting interval under
  5 s, \`--trainer_command\` from anyone but an admin), \`environment\` (the environment start would write to) and the
  merged \`options\` with secret-looking values masked. Nothing is saved.
- **start** answers 422 with the same problems (paths \`form.--name\`) and saves nothing; otherwise it writes the
  configuration as your active environment's options (with none active, your own environment
  \`inline-run-<your user id>\`, created when needed) and submits the job through the Scheduler exactly like
  \`POST /api/queue/submit\`: \`running\` with its GPUs, or \`queued\` with its position and reason.

### Controlling a run

\`\`\`sh
curl -s -X POST $BASE/api/training/validation/run -H "X-API-Key: $KEY"          # your running job started last
curl -s -X POST $BASE/api/training/checkpoint/run -H "X-API-Key: $KEY" -F job_id=local-3f9c2a1b04de
curl -s -X POST $BASE/api/training/checkpoints    -H "X-API-Key: $KEY"          # {"job_id":...,"checkpoints":[{"name":"checkpoint-40",...}]}
curl -s -X POST $BASE/api/training/stop           -H "X-API-Key: $KEY"
curl -s -X POST $BASE/api/training/cancel         -H "X-API-Key: $KEY" -F job_id=local-3f9c2a1b04de
curl -s "$BASE/api/training/status" -H "X-API-Key: $KEY"
\`\`\`

- The POST endpoints take \`job_id\` as a form field (multipart or urlencoded), in a JSON body, or in the query.
  Without it they act on your running job started last (a lead's or admin's: the running job started last); with
  no running job, validation/run, checkpoint/run, stop and checkpoints answer **400** \`no_active_job\` (spec 4.2),
  and a named job that is not running answers 409. Researchers act on their own jobs, leads and admins on any;
  **checkpoints** and **status** read the same way (another user's job: 403 \`not_your_job\`).
- **validation/run**, **checkpoint/run**, **stop** are commands to the trainer: stored, delivered to the job's
  runner at once through its channel, and carried out by the trainer (see the trainer protocol below). A
  checkpoint follows the usual rolling retention and shows in the events (\`checkpoint.saved\`).
- **stop keeps the work**: the runner asks the trainer for a checkpoint through its signal file and waits for it
  (\`training.stop_requested\`, then \`checkpoint.saved\`; at most the runner's \`--stop-grace-seconds\`, default 10), then
  interrupts it (SIGINT to the training processes: \`training.stopping\`; SimpleTuner reports \`interrupted\` and exits
  0), then SIGTERM after half the grace period and SIGKILL for the whole process tree after it
  (\`training.stop_escalated\`). The job ends \`completed\` with that checkpoint listed. A trainer that has not begun
  training yet (no step reported) has nothing to save: it is terminated at once (SIGTERM, then SIGKILL), and the job
  ends \`completed\`. If no checkpoint comes in time (\`training.stop_checkpoint_missed\`), it is stopped without one.
- **cancel** works in any active state. A waiting job just ends. A running job ends \`cancelled\` at once and its GPUs
  are free; its runner kills the trainer's whole process tree at once (SIGKILL: \`accelerate\`, \`train.py\` and
  anything they started), without a checkpoint. As spec 3
  says, after a **running local** job is cancelled, pending local jobs are not started automatically: they wait
  with \`wait_reason: local_paused\` until \`POST /api/queue/process\` (or a restart) starts them. New local
  submissions wait the same way.
- **status**: \`state\` (\`idle\`, \`running\`, \`queued\`, or the job's final status), \`job_id\`, \`startup_stage\`
  (\`launching\`: the runner has it; \`starting\`: the trainer is up; \`training\`: steps are arriving), the latest
  \`progress\` (step, total_steps, percent, loss, epoch), attempt, GPUs, times and any error. Without \`job_id\`: the
  caller's active job (see the operation), else \`idle\`, among the jobs you may read (a researcher's or viewer's
  own).
- **checkpoints**: the \`checkpoint-<step>\` folders in the job's output directory on the runner's box, oldest first,
  with path and modification time. The runner looks whenever the trainer reports a checkpoint, on each of its asks
  for work and when the job ends, and sends a \`checkpoints.listed\` event when the folder changed (before its first
  look: the checkpoints the trainer reported and retention has not removed).

### Watching a job: its events

\`\`\`sh
curl -s "$BASE/api/training/events?job_id=local-3f9c2a1b04de&since_index=0" -H "X-API-Key: $KEY"
# {"job_id":"local-3f9c2a1b04de","status":"running","next_index":12,"events":[
#   {"index":0,"timestamp":"...","type":"training.started","title":"Training started","data":{...}},
#   {"index":1,"timestamp":"...","type":"training.progress","title":"Step 1/50","data":{"step":1,"loss":1.94,...}}, ...]}
curl -N "$BASE/api/training/events/stream?job_id=local-3f9c2a1b04de" -H "X-API-Key: $KEY"
\`\`\`

- Indexes are dense per job from 0 and never change; poll again with \`since_index\` set to the answer's
  \`next_index\` (or \`cursor\` set to its \`next_cursor\`; \`limit\` 1 to 1000, default 500). A page also stops at 1 MiB
  of events (always at least one event): it may hold fewer than \`limit\` with more to come, so go on until a page
  comes back empty. A retried job keeps one log: the new attempt's events follow the old ones.
- Without \`job_id\` it shows the running job started last, else the job started last, among the jobs you may read.
  **Before your first job** polling answers 200 \`{"job_id": null, "status": null, "events": [], "next_index": 0}\`,
  and the stream waits (keep-alives meanwhile) and starts delivering when your next job starts, or ends after a
  few minutes with a comment (SSE) or a close reason (WebSocket) saying so. An unknown \`job_id\` is 404.
- A job's events (and stream), \`status\`, \`checkpoints\`, \`webhooks\` and \`config\` are for its owner, leads and
  admins; anyone else gets 403 \`not_your_job\` (checked before a stream opens), and sees the job only in
  \`GET /api/queue\` with its public fields.
- Live, the same events on one path, \`GET /api/training/events/stream?job_id=...&since_index=0\`:
  **server-sent events** (the default): each event is \`id: <index>\` and \`data: <the event as JSON>\` (no \`event:\`
  name, so \`EventSource.onmessage\` gets them all). A client that reconnects with \`Last-Event-ID\` (EventSource does
  this itself) continues right after that event. When the job ends, whichever way it ends (completed, failed,
  cancelled while waiting or running, rejected, failed at \`max_attempts\`), an \`event: end\` with
  \`{"status": "<final status>"}\` closes the stream; opening the stream of an ended job replays its log, then ends.
  A \`: keep-alive\` comment every 15 s. **WebSocket** (\`Upgrade: websocket\`): each event is a JSON text message;
  the last one is \`{"type": "end", "status": ...}\`, then the socket closes. From a browser, only the service's own
  pages may open it (another \`Origin\` is 403 \`foreign_origin\`).
- An event's \`type\` and text are the trainer's, as it sent them: escape sequences included. Show them as text:
  \`jobs logs\` and the dashboard remove colour codes and write every other control character as a \`\\u001b\`-style
  escape.
- Events are stored in libSQL first and then pushed by the job's events hub (a Durable Object per job), so a
  watcher that connects late or reconnects misses nothing.
- **A log is bounded.** A job stores at most **50,000 events and 64 MiB** of them (their JSON), all its attempts
  together, and a user's jobs **1 GiB** together; past either, one \`events.truncated\` event (\`data.reason\`:
  \`job_events\`, \`job_bytes\` or \`user_bytes\`) marks the place, and from then on only lifecycle events are stored
  (\`training.*\` but \`training.progress\`, checkpoints, \`model.saved\`, \`upload.completed\`, scripts' ends,
  datasets, \`events.*\`), at most 1,000 more and 1 MiB more; log lines, progress, validation images and anything
  else are counted and dropped (the runner is still answered 200, with \`dropped\`, so it never sends them again).
  \`GET /api/training/status\` shows \`events_bytes\` and \`events_dropped\`; when the job ends, an
  \`events.summary\` event says how many were dropped. A truncated log stays truncated (progress still moves the
  expected end; the status shows the last progress stored). An ended job's events are **deleted 30 days after it
  ended** (and a job removed by \`POST /api/queue/cleanup\` loses its events too), on the Scheduler's sweep.
  Admins change all four with \`PUT /api/admin/event-limits\` (\`max_events_per_job\`, \`max_bytes_per_job\`,
  \`max_bytes_per_user\`, \`retention_days\`; audited as \`event_limits_changed\`); new caps apply from each job's
  next batch.
- Live watchers are bounded: at most **20 per job** and **10 per user** over all jobs (SSE and WebSocket alike, a
  stream waiting for its job included); one more is 429 \`too_many_watchers\` with \`Retry-After\`. A stream's place is
  free once its client is gone (noticed within two keep-alives, 30 s). A server-sent events reader that falls 4 MiB
  behind, or takes nothing for 30 s, is disconnected rather than buffered for, and resumes with \`Last-Event-ID\`
  (EventSource reconnects by itself). A WebSocket shows the hub no backlog (workerd has no \`bufferedAmount\`:
  cloudflare/workerd#988), so WebSocket watchers are bounded by count only.

### Which trainer runs

Which trainer a job runs comes from its environment's options, among what the box allows (its runner config file;
see "Workers"):

| Option | Meaning |
|---|---|
| neither option | SimpleTuner, as its own server launches it: \`<venv>/bin/accelerate launch --mixed_precision=<p> --num_processes=N \
--num_machines=1 --dynamo_backend=no [--multi_gpu] <site-packages>/simpletuner/train.py --option=value ...\` with \`CONFIG_BACKEND=cmd\` and \
\`SIMPLETUNER_JOB_ID\`, from the installation the box's runner config names (\`simpletuner\`; see "Workers"). \`<p>\` is \
\`--mixed_precision\`, default \`bf16\` (\`no\` for a 0-GPU job, which runs one process with \`--cpu\`). Only a box whose runner \
found SimpleTuner gets such a job; elsewhere it waits with \`wait_reason: trainer_unavailable\` and the reason |
| \`"--trainer": "simpletuner"\` | the same, by name |
| \`"--trainer": "demo"\` | the built-in demo trainer (\`runner/demo-trainer/\`) |
| \`"--trainer": "<name>"\` | a trainer the box's config file declares (\`trainers\`); only a box that declares it gets the job \
(else \`trainer_unavailable\`); a runner that does not say what it runs (an older one) gets any job, and one it does not know fails with \
\`unknown trainer "<name>": this box has simpletuner, demo, ...\` |
| \`"--trainer_command": "[\\"python\\", \\"train.py\\"]"\` | a raw command: a JSON array of strings, the program then its arguments; run directly, \
never through a shell. Only admins may set it, and a box runs it only if its config says \`"allow_raw_commands": true\`; elsewhere the job fails \
with \`--trainer_command is not run on this box: its runner config does not set allow_raw_commands; ...\` |

Every other \`--\` option is passed to the trainer: to SimpleTuner as SimpleTuner's server writes them (\`--name=value\`;
\`true\` as the bare flag, \`false\` as \`--name=false\`, lists and objects as JSON; accelerate's own settings such as
\`--accelerate_config\` are not passed), to other trainers as \`--name value\` (\`true\` for a boolean, left out when
\`false\`); empty and null options are left out. \`--output_dir\` is always inside the job's directory (default
\`output\`; a path leaving it fails the job with a message saying so). \`--num_processes\` and
\`--accelerate_visible_devices\` are the runner's, and the three scripts (see "Scripts") are the runner's to run: none
of them is passed on. \`--webhook_config\` is replaced by the runner's own callback (the job's receivers are the
edge's to call). A trainer program that is not installed on the box (not on \`PATH\`) fails the job at once with a
message saying so.

### The trainer protocol (for your own trainer)

It is SimpleTuner's, so SimpleTuner's \`train.py\` runs unchanged; the demo trainer speaks it too.

- **Environment it receives** (and nothing else: not the runner's): \`PATH\`, \`HOME\` (the job directory), \`TERM\`,
  \`CUDA_VISIBLE_DEVICES\`, \`SIMPLETUNER_ACCELERATE_SIGNAL_FILE\`, \`TRAINER_JOB_ID\`, \`TRAINER_OUTPUT_DIR\` (the
  resolved \`--output_dir\`), \`TRAINER_CALLBACK_URL\`, the box's \`pass_env\`, for SimpleTuner \`CONFIG_BACKEND=cmd\`,
  \`SIMPLETUNER_CONFIG_BACKEND=cmd\` (its options come from the command line only, whatever the box passes on) and
  \`SIMPLETUNER_JOB_ID\` (the job's id), and the job's storage endpoint
  credentials: \`TRAINER_STORAGE_ENDPOINT_URL\`, \`TRAINER_STORAGE_BUCKET\`, \`TRAINER_STORAGE_REGION\`,
  \`TRAINER_STORAGE_ACCESS_KEY_ID\`, \`TRAINER_STORAGE_SECRET_ACCESS_KEY\` (see "Storage"). They are not named \`AWS_*\`,
  so a trainer's own AWS credentials for other buckets stay as they are. To upload results with the AWS CLI:
  \`AWS_ACCESS_KEY_ID=$TRAINER_STORAGE_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$TRAINER_STORAGE_SECRET_ACCESS_KEY aws --endpoint-url \
"$TRAINER_STORAGE_ENDPOINT_URL" s3 cp model.safetensors "s3://$TRAINER_STORAGE_BUCKET/final/"\`.
  When the edge cannot give them, the job starts without them and the runner logs why.
- **Commands in: the signal file.** \`SIMPLETUNER_ACCELERATE_SIGNAL_FILE\` names a JSON object of counters in the job
  directory, \`{"manual_validation": N, "manual_checkpoint": M}\`. For each validation or checkpoint request the
  runner increments one counter and rewrites the whole file atomically (a temporary file renamed over it); the
  counters only grow and survive a runner restart. A trainer stats the file at each step, re-reads it only when its
  modification time changed, and owes one action per increase (two increments, two validations). A missing or
  unreadable file is a warning, not an error.
- **Its working directory** is the job directory. The runner writes its own files under \`service/\` there (the
  options as given, \`options.json\`, and the dataloader, \`multidatabackend.json\`, passed as \`--data_backend_config\`)
  and removes \`config/\` before each attempt: SimpleTuner loads \`config/config.env\` and \`config/config.json\` from its
  working directory by itself, which would win over the job's options.
- **Datasets:** each attempt trains on its own view of each dataset, \`<job dir>/datasets/<n>-<name>/\`: the dataset's
  folders, each file a link into the runner's cache. A trainer may add files there (SimpleTuner writes its
  aspect-bucket metadata into each \`instance_data_dir\` at every start); the files behind the links are read-only in
  the sandbox, so nothing it writes reaches the cache or another job. The view is made anew for every attempt.
- **Stop:** a checkpoint first, through the signal file (at most the grace period, \`--stop-grace-seconds\`), then
  SIGINT to the training processes - for SimpleTuner, \`train.py\` and not its \`accelerate\` launcher, which forwards
  no signal and would die at once of its own \`KeyboardInterrupt\`, taking \`train.py\` with it mid-report -, then
  SIGTERM to the whole tree after half the grace period, then SIGKILL for the whole tree after it. Before the
  trainer's first step there is nothing to save: SIGTERM at once. Cancel kills the tree at once. Runner shutdown:
  SIGTERM to the tree, then SIGKILL after the grace period. Each step is a job event (\`training.stop_requested\`,
  \`training.stopping\`, \`training.stop_escalated\`). After a requested stop the job ends \`completed\` when the trainer
  exits 0, 130, 137 or 143 (or dies of SIGINT, SIGTERM or SIGKILL), \`failed\` when it exits with another error.
- **Events out, as webhooks** (what SimpleTuner does): the trainer's \`--webhook_config\` is replaced by one raw
  receiver, the runner's own callback on loopback (\`TRAINER_CALLBACK_URL\`). Each JSON body POSTed there is an
  event: its \`type\`, else SimpleTuner's \`message_type\`, else \`{"type": "webhook", "data": <body>}\`. The job's own
  receivers are never handed to the trainer: the edge sends them the lifecycle, signed and retried (see
  "Webhooks").
- **SimpleTuner's own events** (recorded from real runs of SimpleTuner 4.8.0) are stored in the service's words, so
  progress, expected ends, the loss plot, previews and lifecycle webhooks work as for any trainer:

  | SimpleTuner sends | stored as |
  |---|---|
  | the first \`training.status\` with \`progress\` | \`training.started\` (\`total_steps\`, \`resumed_from_step\`, \`epochs\`) |
  | \`training.status\` with \`progress\`, each optimizer step | \`training.progress\` (\`step\`, \`total_steps\`, \`epoch\`, \`loss\`, \
\`learning_rate\`, \`percent\`, \`eta_seconds\`, \`seconds_per_step\`), once per step |
  | \`training.checkpoint\` | \`checkpoint.saved\` (\`step\` from its \`checkpoint-<step>\` folder, \`path\`, \`is_final\`) |
  | \`lifecycle.stage\` \`validation\` / \`final_validation\` | \`validation.started\`, \`validation.completed\` (\`step\`; \`final: true\`) |
  | \`training.validation\` (bare base64 images) | one \`validation.image\` per image, \`images: [{src: data URI, mime_type}]\` (spec 6.3), \
\`data.prompt\` its validation's name |
  | \`validation.image\` (previews) | the same, its images as data URIs |
  | \`lifecycle.stage\` \`model_save\` completed, \`training_complete\` | \`model.saved\`, \`training.completed\` |
  | other \`lifecycle.stage\` (start-up phases) | \`training.stage\` (\`key\`, \`label\`, \`status\`, progress every 10 %) |
  | \`error\` | \`training.error\` (\`title\`, \`message\`, \`data.traceback\`); the job's reason when it fails |
  | \`training.status\` \`interrupted\` / \`failed\` | \`training.status\` with \`data.status\` |
  | \`training.status\` \`model_available\` | \`upload.completed\` |
  | \`notification\` | \`notification\` (without the configuration SimpleTuner attaches) |
  | \`log.message\` | nothing: SimpleTuner prints each log record too, and the printed line is the \`log\` event (with its level) |

  A SimpleTuner run that exits 0 after an interrupt nobody asked for, or after reporting \`failed\`, is \`failed\`.
- **Events out, on stdout:** print one JSON object per line with a \`type\` (\`training.progress\`,
  \`checkpoint.saved\`, \`validation.image\`, ...); every other non-empty line becomes a \`log\` event (\`message\`). The
  runner writes everything to \`output.log\` and ships the events to the edge in order (batched every 100 ms, resent
  until stored, all delivered before the job is reported ended); an event may be up to 512 KiB of JSON: the runner halves
  a larger event's PNG pictures until it fits (the full ones stay in the output directory), else leaves them out
  (\`data.media_left_out\`), else keeps only its type, title and the start of its message (\`data.truncated\`).
- **Output lines** are what a terminal shows: a progress bar redrawn with carriage returns (tqdm) is one line, its
  last state; a line longer than 64 KiB is cut.
- **Exit code:** 0 is success; anything else is a failure. The end report carries the error the trainer reported
  (SimpleTuner's \`error\` event: its title and message, with the end of its traceback), else its last 20 lines, each
  cut to 1,000 characters keeping its start and end. A report the edge refuses is sent again without its lines, then
  as a failure naming the refusal: a job never stays running because its report did not fit, and a job that ended
  on a box is never started again there in the same attempt.

### Scripts

The runner runs the scripts an environment names, beside the trainer (never blocking it), in the job's directory
and sandbox with the trainer's environment variables - never the trainer itself: SimpleTuner would run them on its
own, so they are taken out of what it receives (with \`--validation_method external-script\` it gets \`true\`, which
does nothing, as its script) - and only a program the box's config declares in \`scripts\`
(matched after \`..\` is resolved; a bare name through \`PATH\`). Another is not run: the job gets a \`script.refused\`
event naming it (\`data\`: \`script\`, \`program\`).

| Option | When |
|---|---|
| \`--post_checkpoint_script\` | after each \`checkpoint.saved\` event |
| \`--validation_external_script\` | at each \`validation.started\`, with \`--validation_method external-script\` \
(\`--validation_external_background\` is accepted; the runner never blocks the trainer either way) |
| \`--post_upload_script\` | once per \`upload.completed\` event a trainer reports after publishing a checkpoint (\`data\`: \`step\`, \
\`local_path\`, \`remote_path\`, \`provider\`). For SimpleTuner, when SimpleTuner itself would run it: after each publication to its hub \
with \`--push_to_hub\` (\`{remote_checkpoint_path}\` the hub's address), else after each checkpoint and once the final model is saved |

The command line is split into words like a shell would (quotes and backslashes), but no shell runs it: nothing in
it is expanded or interpreted (\`$VAR\`, \`|\`, \`;\`, \`$(...)\` are plain text). Then in every word \`{name}\` is replaced:
\`{local_checkpoint_path}\`, \`{global_step}\`, \`{tracker_run_name}\`, \`{tracker_project_name}\`, \`{model_family}\`,
\`{huggingface_path}\` (\`--hub_model_id\`, else \`--pretrained_model_name_or_path\`), \`{remote_checkpoint_path}\` (empty
for validation and post-checkpoint scripts), every \`validation_*\` option (\`{validation_num_inference_steps}\`,
\`{validation_prompt}\`, ...), and for the post-upload script \`{model_type}\` and \`{lora_type}\`. A value stays one
argument whatever it contains; an unknown \`{name}\` is left as it is. Each output line becomes a \`script.output\`
event, the exit a \`script.finished\` event (\`exit_code\`), a script that cannot start a \`script.failed\` event. The
service does not read anything back from scripts.

### The demo trainer

A real, tiny CPU training loop: linear regression on synthetic data with SGD, so the loss truly falls. It needs no
GPU, and runs in the sandbox like any trainer (it is built in, so it also runs on a box without bubblewrap). Run it
alone:

\`\`\`sh
node --import tsx runner/demo-trainer/main.ts --output_dir /tmp/demo --max_train_steps 20 \\
  --checkpointing_steps 5 --checkpoints_total_limit 2 --validation_preview true --validation_preview_steps 4
\`\`\`

It reads \`--max_train_steps\` or \`--num_train_epochs\` (the other 0), \`--train_batch_size\` (16), \`--learning_rate\`
(0.05), \`--seed\` (42), \`--checkpointing_steps\` (0: only at the end), \`--checkpoints_total_limit\` (0: keep all),
\`--resume_from_checkpoint latest\` (or a checkpoint name), \`--validation_steps\` (0: only at the end),
\`--validation_num_inference_steps\` (20), \`--validation_preview\` and \`--validation_preview_steps\` (previews at the
first step, every interval, and the last: for 20 and 4, steps 1, 5, 9, 13, 17, 20), \`--validation_resolution\`
(\`WxH\`, images above 256 px scaled down), \`--validation_prompt\`, and \`--demo_step_ms\` (pause per step, 200).
Checkpoints are \`<output_dir>/checkpoint-<step>/\` with the weights, written atomically. Validation previews are
real PNG images in \`validation.image\` events (spec 6.3 fields, \`images[].src\` a data URI). It reads the signal
file as SimpleTuner does and acts after the step in progress; on SIGINT it finishes the step and stops gracefully.`,
  },
  {
    name: "Webhooks",
    description: `The webhooks a job sends. Each entry of a job's \`--webhook_config\` (a JSON array of \`{"webhook_type": "raw",
"callback_url": "https://...", "log_level": "info", "ssl_no_verify": false}\`; an optional
\`"signing_secret": "whsec_..."\` of its own) is sent the job's lifecycle as it happens:

| \`type\` | when | \`data\` |
|---|---|---|
| \`job.started\` | the trainer started | \`total_steps\`, \`resumed_from_step\` |
| \`job.progress\` | at most once per \`--webhook_reporting_interval\` **seconds** (default 30, at least 5) | \`step\`, \`total_steps\`, \
\`percent\`, \`loss\`, \`epoch\` |
| \`job.checkpoint\` | a checkpoint was written | \`step\`, \`path\` |
| \`job.validation\` | a validation finished | \`step\` |
| \`job.completed\`, \`job.failed\`, \`job.cancelled\` | the job ended, whichever way: by its trainer, cancelled while waiting or running, \
rejected, or failed at \`max_attempts\` after its worker went silent or was removed | \`status\`, \`error_message\` (why: the \
trainer's error and last lines, \`Cancelled before it started\`, \`Rejected: <reason>\`, \`worker <name> went offline during attempt 3; \
no retries left\`, ...), \`last_progress\` |
| \`job.retrying\` | its worker went silent or was removed, or its runner restarted, and it went back to the queue | \`status\` \
(\`pending\`), \`attempt\` (the next one), \`max_attempts\`, \`error_message\`, \`last_progress\` |

- Body: \`{"type", "job_id", "timestamp", "data"}\`. Signed the [Standard Webhooks](https://www.standardwebhooks.com/)
  way: headers \`webhook-id\` (unique per message), \`webhook-timestamp\` and \`webhook-signature\` (\`v1,<base64
  HMAC-SHA256 of "id.timestamp.body">\`) with the service's secret (admins: \`GET /api/admin/webhooks\`), or the
  entry's own. Any Standard Webhooks library verifies them.
- A 2xx is delivered. A network error, a timeout (10 s), 408, 429 or 5xx is retried after 5 s, 30 s, 2 min, 10 min
  and 30 min, then given up; another 4xx is given up at once. Deliveries are kept in the job's events hub (a
  Durable Object), so they survive restarts; \`GET /api/training/webhooks?job_id=...\` lists each with its status
  (\`pending\`, \`delivered\`, \`failed\`, \`refused\`), attempts and last error (the job's owner, leads and admins only).
- The receivers are the job's own, from its configuration snapshot: editing the environment's \`--webhook_config\`
  after submit does not redirect a submitted job's webhooks. Signing secrets and other secret-looking keys inside
  \`--webhook_config\` read back as \`********\`.
- **Bounds:** at most **5 targets** per job and a reporting interval of at least **5 s**; validate reports more, and
  start refuses it with 422 naming the option (\`--webhook_config\`, \`--webhook_reporting_interval\`). A configuration
  stored before these limits is bounded again when delivered (the first 5 targets, 5 s).
- **SSRF guard:** receivers on loopback, private, link-local or reserved addresses and local names (\`localhost\`,
  \`*.local\`, \`*.internal\`, \`*.home.arpa\`, single-label hosts) are refused (status \`refused\`, and validate/start
  report it) unless an admin allows private targets: \`PUT /api/admin/webhooks {"allow_private_targets": true}\`. The
  checks see through tricks: a trailing dot (\`localhost.\`), IPv4 written as \`0x7f.1\` or \`2130706433\`, and IPv6 forms
  that reach IPv4 or are not global unicast: IPv4-mapped \`::ffff:a.b.c.d\`, IPv4-compatible \`::a.b.c.d\`, NAT64
  \`64:ff9b::/96\` and \`64:ff9b:1::/48\`, 6to4 \`2002::/16\`, Teredo, documentation, discard and the other special ranges
  (anything [ipaddr.js](https://github.com/whitequark/ipaddr.js) does not call \`unicast\`). **Names:** under
  \`npm start\` deliveries go through the Node host, which resolves the name once, refuses it if any address it
  resolves to is private, and connects to the address it checked (no second lookup to rebind). A deployed Worker
  cannot resolve names; its fetches leave through Cloudflare's network, which does not reach private networks.
  Redirects are not followed.

Webhooks a cloud provider sends to this service are under "Providers".`,
  },
  {
    name: "Workers",
    description: `GPU boxes and their runner. The runner is the agent on each GPU box (\`npm run runner -- start\`; the README shows
how to run one). It registers the box's GPUs (from \`nvidia-smi\`; a box without one registers 0 GPUs and still runs
CPU jobs), heartbeats, runs exactly the jobs the Scheduler assigns to it, and reports how each ended. When a job
ends its GPUs are free and the queue is processed at once. The \`/api/workers/*\` operations are the runner's
protocol, called with a worker token; the \`/api/admin/workers\` ones are an admin's.

\`\`\`sh
# As an admin: create the worker and keep its token (shown once).
curl -s -X POST $BASE/api/admin/workers -H "X-API-Key: $KEY" -H 'Content-Type: application/json' -d '{"name":"gpu-box-1"}'
#   -> {"token":"stw_...", ...}
# What a runner does on start (by hand, e.g. with SERVICE_LOCAL_RUNNER=0):
curl -s -X POST $BASE/api/workers/register -H "Authorization: Bearer stw_..." -H 'Content-Type: application/json' \\
  -d '{"role":"local","gpus":[{"index":0,"name":"NVIDIA A100","memory_mb":81920}]}'
# Retiring a box or a leaked token (both audited, worker_token_rotated and worker_removed):
curl -s -X POST $BASE/api/admin/workers/3/token -H "X-API-Key: $KEY"   # a new token, shown once; the old one stops at once
curl -s -X DELETE $BASE/api/admin/workers/3 -H "X-API-Key: $KEY"       # {"id":3,"name":"gpu-box-1","requeued":["..."],"failed":[]}
\`\`\`

**The runner's options:** \`--url\` (must be \`https://\`, or \`http://\` on loopback only: \`localhost\`, \`127.x\`, \`::1\`;
the runner refuses a plain-http edge elsewhere at start, since its token would cross the network in clear),
\`--local\` (the service's own GPU box, at most one; otherwise a remote worker matched by labels), \`--label
key=value\` (repeatable), \`--config\` (the box's config file, or \`RUNNER_CONFIG\`), \`--work-dir\` (job directories and
the dataset cache; default the config's \`work_dir\`, else \`./.runner\`), \`--poll-ms\` (how often it asks for work
unprompted; each ask is also its heartbeat; default 5000 - the edge wakes it at once through its channel, a
WebSocket on \`/api/workers/channel\`, whenever a job is assigned to it or a command for its trainer is waiting),
\`--stop-grace-seconds\` (before the trainer's process tree is killed, default 10). \`--token\` works too, but
\`RUNNER_TOKEN\` keeps the token out of \`ps\`. \`npm run runner\` first builds the runner to plain JavaScript under
\`.build/runner/\` (under a second; it then runs without a TypeScript loader, about 70 MB of memory idle). Failed
worker-token authentications are limited to 20 a minute per address (see "Rate limiting").

**What the runner does with a job:** it makes \`<work-dir>/jobs/<job_id>/\`; brings every dataset the environment's
dataloader names under \`datasets/...\` from R2 into its cache (\`<work-dir>/cache/datasets/\`, shared by jobs; a cached
file is used only if its SHA-256 matches the upload's, so a changed or damaged one is fetched again; a
\`dataset.ready\` event says how many files were downloaded and reused, \`dataset.missing\` names a dataset not uploaded
yet; the edge hands a runner a dataset only for a job running on it whose dataloader names it:
\`GET /api/workers/datasets/manifest?job_id=<job>&path=<dataset>\` and \`.../file?job_id=&path=\` answer 404 for another
worker's job and 403 \`dataset_not_in_job\` for another dataset) and gives the attempt its own view of each
(\`<job dir>/datasets/\`, links into the cache; see "Training"); writes \`service/multidatabackend.json\` (the dataloader
pointing at the views, passed as \`--data_backend_config\`) and \`service/options.json\` (the options); fetches the job's
storage credentials; starts the trainer there under a PTY, inside the sandbox, with \`CUDA_VISIBLE_DEVICES\` set to
the job's devices (empty for a CPU job), writes everything it prints to \`output.log\`, and reports \`completed\` (exit
0) or \`failed\` (the trainer's error and traceback, else the exit code and the last 20 lines, as the job's
\`error_message\`, stored as plain text: colour codes, other escape sequences and control characters removed).
A runner killed mid-job never leaves the job running: restarted, it hands the jobs it was running
back to the queue (\`attempt + 1\`, or failed at \`max_attempts\`), and they start again - the demo trainer resumes from
its last checkpoint in the same job directory; never restarted, its heartbeat times out and the Scheduler retries
them the same way. Stopping \`npm start\` stops the local runner's trainers; the next start hands their jobs back to
the queue the same way.

**When the edge cannot be reached (fencing).** The runner learns the heartbeat timeout from each heartbeat's answer
and counts its silence from when it sent the last heartbeat that was answered. At the timeout less a margin
(\`min(timeout/2, max(4 s, timeout/4))\`: 67.5 s of the default 90 s) it stops each of its trainers itself - a
checkpoint asked for first where there is time, then the signals, the process tree killed half a second before the
timeout - logs \`job <id>: the edge has not been reached for N s ...\` and records a \`training.fenced\` event. Only
at the timeout does the edge take the worker offline and give its jobs to the queue again, so a job never trains on
two boxes at once. Back in touch, the runner reports the attempt \`interrupted\` (refused if the job has moved on,
which it logs) and delivers its events. Each heartbeat lists the trainers still alive (\`running\`, with their
attempts); the runner starts nothing on a GPU until every trainer it had there has exited, and a trainer of an older
attempt is stopped, never taken for the new one.

**No event is dropped on the way.** A runner keeps the events the edge has not taken on disk
(\`<work-dir>/outbox/<job>.attempt-<n>.jsonl\`, at most 50,000 events or 64 MiB per attempt, past which new ones are
counted and an \`events.dropped\` event says how many), across edge outages and its own restarts, and its final
reports in \`<work-dir>/reports.json\`; it sends a job's events before its final report. The edge stores the events of
an attempt that has ended, from the worker that ran it, marked \`"late": true\`; a run of sequence numbers that never
arrives is recorded as an \`events.gap\` event (its \`data\`: \`attempt\`, \`from_seq\`, \`to_seq\`), never skipped
silently (until the job's log is truncated, when most numbers are missing by design). Past a job's event cap or its
owner's quota the edge still answers 200, storing lifecycle events and counting the rest in \`dropped\` (see
"Training": a log is bounded). Which trainer runs and how it talks to the runner: see "Training".

**The runner config file.** What a box runs is its operator's decision, declared in one JSON file (\`RUNNER_CONFIG\`
or \`--config\`; \`npm start\` hands its \`RUNNER_CONFIG\` to its local runner). Every key is optional:

\`\`\`json
{
  "simpletuner": "/opt/simpletuner/.venv",
  "trainers": {
    "kohya": ["/opt/kohya/.venv/bin/accelerate", "launch", "--num_processes", "{num_processes}", "/opt/kohya/train_network.py"],
    "probe": ["/opt/tools/probe", "--out", "{output_dir}"]
  },
  "scripts": ["/opt/hooks/*.sh", "/usr/local/bin/upload-checkpoint"],
  "allow_raw_commands": false,
  "sandbox": "auto",
  "bwrap": "bwrap",
  "run_as": "trainer",
  "network": "isolated",
  "allow_hosts": ["huggingface.co", "*.huggingface.co", "*.hf.co"],
  "work_dir": "/var/lib/training-runner",
  "hide": ["/home", "/srv/other-team/secret.env"],
  "pass_env": ["HF_HOME", "LD_LIBRARY_PATH"]
}
\`\`\`

| Key | Default | Meaning |
|---|---|---|
| \`simpletuner\` | unset | SimpleTuner's installation: its virtual environment's folder (with \`bin/python\` and \`bin/accelerate\`), or \
that Python. At start the runner imports \`simpletuner.train\` with it and reports the version, or why not; without it the box gets \
no SimpleTuner job (\`trainers\` in \`GET /api/system/workers\`) |
| \`trainers\` | \`{}\` | name -> argv template; \`{num_processes}\`, \`{job_dir}\`, \`{output_dir}\` are filled in, the job's options follow. \
\`simpletuner\` and \`demo\` are built in and cannot be redefined |
| \`scripts\` | \`[]\` | the programs scripts may run: absolute paths, \`*\` matching any run of characters. Declare scripts, not interpreters \
(\`/usr/bin/python3\` would allow any code) |
| \`allow_raw_commands\` | \`false\` | run an admin's \`--trainer_command\` on this box |
| \`sandbox\` | \`"auto"\` | \`auto\`: bubblewrap when installed, else only the built-in trainers and declared scripts run (unsandboxed, said at \
start); \`required\`: refuse to start without bubblewrap; \`off\`: no sandbox (a warning at start and a \`sandbox.off\` event on every job) |
| \`bwrap\` | \`"bwrap"\` | the bubblewrap program, on \`PATH\` or a path |
| \`run_as\` | \`nobody\` under a root runner | run trainers and scripts as this user (a name, or \`{"uid": 1000, "gid": 1000}\`); needs \
the runner to run as root and bubblewrap. The job directory is given to that user. Unset, a root runner runs them as \`nobody\`, any other \
runner as itself |
| \`network\` | \`"isolated"\` | \`isolated\`: every sandboxed trainer and script gets a network namespace of its own, with loopback alone; \
inside, its runner's callback, the edge (when on the box's loopback) and a proxy (\`HTTP(S)_PROXY\`) to \`allow_hosts\` are served on \
loopback ports and reach out through the job's sockets. \`host\`: the box's network, shared |
| \`allow_hosts\` | \`[]\` | hosts an isolated trainer may reach through its proxy: names, or \`*.example.com\` for any name below. \
A name that resolves to a loopback or link-local address (169.254.169.254, a cloud's metadata service) is refused anyway. Each refused \
host is a \`network.refused\` event on the job (\`data.target\`, \`data.reason\`) |
| \`work_dir\` | \`./.runner\` | job directories (\`jobs/<job_id>/\`) and the dataset cache (\`cache/\`); \`--work-dir\` wins |
| \`hide\` | \`[]\` | more folders or files sandboxed programs must not see (\`npm start\` adds its data directory; the runner always adds \
the host's secrets: \`SERVICE_SECRETS_DIR\`, every \`*_FILE\`, \`SERVICE_SSL_CERT\`, \`SERVICE_SSL_KEY\`, the runner config itself, and the \
home directory of the user it runs as) |
| \`pass_env\` | \`[]\` | runner environment variables handed on to trainers and scripts as they are (never \`RUNNER_TOKEN\`) |

A mistake in the file (not JSON, an unknown key, a wrong type) stops the runner, and \`npm start\`, with one line
naming the field: \`runner: runner config /etc/training-runner.json: trainer is not a known setting\`.

**The sandbox.** Every trainer and script runs under bubblewrap (Debian package \`bubblewrap\`): the root filesystem
read-only; a private \`/tmp\`; its job directory read-write; its datasets in the cache read-only; the work directory
(other jobs, the cache) and every \`hide\` path (under \`npm start\`: the data directory with \`service.db\`) masked by an
empty read-only tmpfs, so a write there fails with \`EROFS\` and a read with \`ENOENT\`; only its own \`/dev/nvidia<N>\`
plus \`nvidiactl\`, \`nvidia-uvm\`, \`nvidia-uvm-tools\`, \`nvidia-modeset\` (those that exist); its own session (no
controlling terminal), PID and IPC namespaces; no capabilities; killed with the runner. A hidden file cannot be
opened (\`EACCES\`). The runner's own installation (its checkout and Node) stays visible, read-only, wherever it
lives, a checkout under \`/tmp\` included; a declared trainer, script or SimpleTuner installation the sandbox would
hide stops the runner at start with a line naming the path. With \`network: "isolated"\` (the default) the trainer
has a network namespace of its own: \`TRAINER_CALLBACK_URL\` (\`http://127.0.0.1:47001/<secret>/\`), the edge's
storage endpoint at its own address when the edge is on the box's loopback, and \`HTTP_PROXY\`/\`HTTPS_PROXY\`
(\`http://127.0.0.1:47002\`, \`NO_PROXY\` for loopback) to \`allow_hosts\` are all it reaches; the host's loopback
services, the LAN and metadata addresses are unreachable (\`ENETUNREACH\`, \`ECONNREFUSED\`). The callback URL holds a
secret of the job's own: any other path is 404, so no other process posts into the job. A checkpoint or upload
event naming a path outside the job's directory (links resolved) gives no script that path: \`script.refused\`.
Its environment is only the allowlist of the trainer protocol (see "Training"), the proxy variables and
\`pass_env\`: never \`RUNNER_TOKEN\` or anything else of the runner's. Job directories live outside the service's
data directory (\`./.runner\`).`,
  },
  {
    name: "Storage",
    description: `Jobs upload checkpoints and final models to \`<public URL>/api/cloud/storage\` with the stock S3
tools (\`aws s3 cp\`, \`aws s3 sync\`, boto3, the AWS SDKs), signing with per-job credentials that
reach only that job's directory and only while the job is active. Their owners then list and
download the results with the same tools (while the job runs) or with their session or API key.

The endpoint itself (\`/api/cloud/storage\` and everything under it) speaks S3's REST API and XML, not this API's
JSON, so it is described here rather than as operations below. Its access is checked by the endpoint: a job's
SigV4 signature (security scheme \`sigv4\`), or a user's session or API key for reads.

\`\`\`sh
# The job's owner (or a lead or admin) issues credentials for an active (pending, blocked or
# running) job that can run; the secret is shown once. Issuing again replaces the earlier pair.
curl -X POST -H "X-API-Key: $KEY" http://localhost:8001/api/queue/local-3f9c2a1b04de/storage-credentials
#   -> {"job_id":"local-3f9c2a1b04de","access_key_id":"STU...","secret_access_key":"...",
#       "endpoint_url":"http://localhost:8001/api/cloud/storage","bucket":"local-3f9c2a1b04de","region":"auto"}

# In the job (or anywhere with the credentials):
export AWS_ACCESS_KEY_ID=STU... AWS_SECRET_ACCESS_KEY=... AWS_DEFAULT_REGION=auto
aws configure set default.s3.addressing_style path
aws configure set default.s3.multipart_chunksize 64MB       # see "Rate limit" below
aws --endpoint-url http://localhost:8001/api/cloud/storage s3 cp model.safetensors s3://local-3f9c2a1b04de/final/
aws --endpoint-url http://localhost:8001/api/cloud/storage s3 sync checkpoints/ s3://local-3f9c2a1b04de/checkpoints/
\`\`\`

\`\`\`python
import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=creds["endpoint_url"], region_name="auto",
                  aws_access_key_id=creds["access_key_id"], aws_secret_access_key=creds["secret_access_key"],
                  config=Config(s3={"addressing_style": "path"}))
s3.upload_file("model.safetensors", creds["bucket"], "final/model.safetensors",
               Config=TransferConfig(multipart_chunksize=64 * 1024 * 1024))
\`\`\`

**Jobs on the runner** get their credentials without anyone asking: the runner fetches them when
it starts a job (\`POST /api/workers/jobs/{job_id}/storage-credentials\`, worker token, the job's
current pair or a fresh one, never revoking one in use) and hands them to the trainer as
\`TRAINER_STORAGE_*\` variables (see "Training", the trainer protocol). A cloud job gets them when it
is sent to its provider, as \`AWS_ACCESS_KEY_ID\`/\`AWS_SECRET_ACCESS_KEY\` (see "Cloud").

**Credentials.** The access key id is the job's upload token (\`STU...\`, spec 5.7), with a secret
for SigV4. They are valid for the job's bucket only, and only while the job is pending, blocked
or running: when it completes, fails or is cancelled they stop working at once
(\`ExpiredToken\`). Issuing again revokes the earlier pair. Jobs on this service's own GPUs
(local and remote workers) may always have them. A provider's jobs may only while that
provider's \`s3_endpoint_enabled\` is on (\`PUT /api/cloud/providers/{provider}\`, see
"Providers"); otherwise issuing answers 409 \`storage_endpoint_disabled\`, and turning it off
refuses that provider's jobs' requests at once (\`AccessDenied\`). A job that can never run as
configured (it asks for more GPUs than the box has, or no worker has its labels and GPUs) gets
none: 409 \`job_cannot_run\`, naming the reason.

**Manually configured credentials** (spec 1). When a provider has \`s3_access_key_id\` and
\`s3_secret_access_key\` set, its jobs get no fresh credentials: issuing answers the provider's key
id with \`"secret_access_key": null, "source": "provider"\` (the job gets the secret from the
server, never the caller), and still fixes the job's directory. That pair reaches the buckets of
the provider's active jobs whose credentials were issued, nothing else: not a job of another
provider or of this service's own GPUs, not a job that has ended. Clearing the pair (\`null\`)
makes its key unknown at once. Fresh credentials answer \`"source": "job"\`.

**Where things go.**
- \`endpoint_url\` is the provider's \`s3_public_url\`, else \`SERVICE_PUBLIC_URL\`, else the address
  the request for credentials came to. Only its origin counts: SigV4 signs the path, so the
  endpoint must be served at \`/api/cloud/storage\` of that host.
- A job's bucket is its job id. Its objects are stored in R2 under
  \`<output path>/<job id>/<key>\`, the output path being the provider's \`s3_output_path\`
  (default \`outputs\`, and \`outputs\` for jobs without a provider) in force when the job's first
  credentials were issued: changing the setting later never moves a running job's files.
- Addressing is path-style only (\`endpoint/<bucket>/<key>\`): boto3
  \`Config(s3={"addressing_style": "path"})\`, SDK v3 \`forcePathStyle: true\`.

**Signatures.** SigV4 in the \`Authorization\` header or presigned in the query (at most 7 days).
The payload may be \`UNSIGNED-PAYLOAD\`, a hex SHA-256 (checked while the body streams in), or
\`aws-chunked\`: \`STREAMING-UNSIGNED-PAYLOAD-TRAILER\` (what boto3 >= 1.36 and the AWS CLI send)
and the signed \`STREAMING-AWS4-HMAC-SHA256-PAYLOAD\` forms. It is decoded with its trailing
checksum checked (CRC32, CRC32C, CRC64NVME, SHA-1, SHA-256). An \`x-amz-checksum-*\` header on a
plain body is checked the same way.

**Operations.**

| Operation | Notes |
| --- | --- |
| PutObject | ETag = the body's MD5. A single PUT over 100 MiB (the platform's body limit) is refused with \`EntityTooLarge\`: upload larger files \
as multipart, which \`aws s3 cp\` and boto3 \`upload_file\` do above their threshold |
| GetObject, HeadObject | \`Range\` supported; served from R2 in 16 MiB steps, so memory stays flat whatever the size |
| DeleteObject | |
| ListObjectsV2 | prefix, delimiter, max-keys, continuation token, start-after |
| ListBuckets, HeadBucket | a job sees its own bucket; a user the buckets of the jobs they may read |
| CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload | part ETags are the parts' MD5s, the object's ETag \`"<MD5 of \
the part MD5s>-<parts>"\`, as S3 computes them. Completing with an ETag that was not given for that part is \`InvalidPart\` |
| ListParts, ListMultipartUploads | paged (\`max-parts\`/\`part-number-marker\`, \`max-uploads\`/\`key-marker\`/\`upload-id-marker\`, \`prefix\`): \
how clients resume an interrupted upload. Uploads are listed by key, without delimiter grouping |

GetBucketLocation answers \`auto\`. Not supported: CopyObject, and the subresources S3 keeps
beside objects and buckets (\`?acl\`, \`?tagging\`, \`?policy\`, \`?versioning\`, ...), which answer
\`NotImplemented\` (501). Creating or deleting a bucket is refused (\`MethodNotAllowed\`): a job's
bucket exists with the job.

**Quota.** Each job may keep at most **50 GiB** and **100,000 objects** (admins:
\`GET\`/\`PUT /api/admin/storage-quota\`, either field). Parts of multipart uploads count as each is
stored, and a replaced object counts once. An upload that would pass the quota is refused with
\`QuotaExceeded\` (403, the code Ceph RGW, an S3-compatible store, uses; S3 itself has no quotas)
and stores nothing; deleting objects frees the room. Objects stored before the quota existed are
not counted.

\`\`\`sh
curl -X PUT -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
  -d '{"max_bytes":107374182400,"max_objects":200000}' http://localhost:8001/api/admin/storage-quota
\`\`\`

**Open uploads of ended jobs** are aborted when the job ends and, at the latest, on the
Scheduler's next sweep (5 s): R2 drops their parts, \`ListMultipartUploads\` no longer shows them,
and their bytes leave the quota.

**Refusals** are S3 XML with S3's status, and a refused upload stores nothing:
\`SignatureDoesNotMatch\`, \`InvalidAccessKeyId\` (unknown key), \`AccessDenied\` (another job's
bucket, an expired presigned URL, a provider whose endpoint is off), \`ExpiredToken\` (the job has
ended), \`InvalidArgument\` (keys starting with \`/\` or with \`.\`/\`..\` parts, a bad \`max-parts\`),
\`KeyTooLongError\` (over 1024 bytes), \`BadDigest\` (a checksum), \`XAmzContentSHA256Mismatch\`,
\`QuotaExceeded\` (the job's quota),
\`NoSuchKey\`, \`NoSuchUpload\`, \`NoSuchBucket\`.

**Reading results with a session or API key.** Users read, read-only, the results of the jobs
they may act on: researchers their own, leads and admins every job's. This works after the job
has ended too, in the same S3 shape:
\`curl -H "X-API-Key: $KEY" http://localhost:8001/api/cloud/storage\` lists the buckets,
\`.../api/cloud/storage/<job id>?list-type=2\` their objects, and \`.../<job id>/<key>\` downloads one
(a browser session works the same).

**Objects never run as this site.** A job can store anything, HTML, SVG or JavaScript included.
Every object read (GET and HEAD, ranged too) answers \`X-Content-Type-Options: nosniff\` and
\`Content-Security-Policy: sandbox; default-src 'none'\`, and a read with a session or API key
also \`Content-Disposition: attachment; filename="..."\`: the browser downloads it and never
renders it with your session. Reads signed by S3 tools keep the object's own
\`Content-Disposition\` (set at upload), if any.

**Rate limit.** The \`storage\` rule (50 requests per 60 s per address, spec 8) counts every
request, each part included. A refusal is S3's \`SlowDown\` (429, with \`Retry-After\`), which
boto3, the AWS CLI and the SDKs back off from and retry. A 1 GiB upload in the tools' default
8 MiB parts is about 130 requests, which does not fit. In 64 MiB parts
(\`multipart_chunksize\`, as above) it is 18 requests, and about 3 GiB fit in one window. Behind a
trusted proxy (\`TRUSTED_PROXIES\`), each uploading machine has its own window.

**Throughput, locally.** On a 2-core box \`npm run bench:storage\` measured a 1 GiB multipart
upload at about 26 MB/s and its download at about 45 MB/s, with the Node host's memory flat.
The bound is the local R2 simulator, which runs in the same single workerd thread as the
Worker: a bare Worker piping the same parts straight into R2, with no signature and no checks,
reached 30 MB/s in the same run. Request bodies are read in 1 MiB chunks and checked with
native hashes (SHA-256, MD5, zlib's CRC32), so the endpoint's own work is a small share. On
Cloudflare, R2 is not in the Worker's thread.

**Locally**, workerd never answers \`Expect: 100-continue\`, which S3 clients send before upload
bodies. botocore (the AWS CLI, boto3) sends it before every upload body over HTTPS and before
those over 1 MB over HTTP. Over HTTP and TLS 1.2 the client waits about 1 s, then sends anyway.
Behind a TLS 1.3 front that passes the header through unanswered, botocore can wait for its read
timeout and fail. On Cloudflare the edge answers it, and so does nginx as a local front. Or
drop the header in the client:
- AWS SDK v3: \`expectContinueHeader: false\`.
- boto3 (the header is not signed, so it may go):

  \`\`\`python
  def no_expect(request, **kwargs):
      if "Expect" in request.headers:
          del request.headers["Expect"]
  s3.meta.events.register("before-send.s3.*", no_expect)
  \`\`\`

Over HTTPS, current botocore (1.36 and later) streams uploads as \`aws-chunked\` with a CRC32
trailer. Over plain HTTP it signs the body's SHA-256 and sends the CRC32 as a header. Both are
checked; \`test/storage-clients.test.ts\` drives the AWS CLI (\`cp\`, \`ls\`, \`sync\`) and boto3
through both, where they are installed.`,
  },
  {
    name: "System",
    description: `The local GPU box as the service sees it (spec 2.7): its devices, which job holds each
(\`?include_allocation=true\`), and the box's own \`load_avg_5min\` and \`memory_percent\` from its last heartbeat (null
until it sends them). Remote workers are under "Workers".`,
  },
  {
    name: "Providers",
    description: `
\`GET /api/cloud/providers\` (public) lists the providers this service knows (\`replicate\`,
\`workers\`, \`managed\` coming soon), their capabilities, their webhook path and whether their
credentials validate (checked at most every 5 minutes). Admins read and change each provider's settings (spec 2.8):

\`\`\`sh
curl -H "X-API-Key: $KEY" http://localhost:8001/api/cloud/providers/replicate
curl -X PUT -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
  -d '{"webhook_allowed_ips":["203.0.113.0/24","2001:db8::/32","192.0.2.10"],"http_timeout":20}' \\
  http://localhost:8001/api/cloud/providers/replicate
\`\`\`

| Field | Default | Meaning |
| --- | --- | --- |
| \`webhook_allowed_ips\` | \`[]\` (any address) | CIDR ranges and single addresses, IPv4 and IPv6, that may post webhooks |
| \`ssl_verify\` | \`true\` | verify certificates on outbound calls; turning it off needs \`"confirm_insecure": true\` in the same request |
| \`ssl_ca_bundle\` | null | absolute path of a PEM file of CA certificates for outbound calls, on the host; not under \`/dev\`, \`/proc\` or \`/sys\`, no \`.\` or \`..\` parts (else 422) |
| \`proxy_url\` | null | HTTP(S) proxy for outbound calls; a password in it is shown as \`***\` |
| \`http_timeout\` | 30 | seconds per outbound call (1 to 600) |
| \`s3_endpoint_enabled\` | \`false\` | this provider's jobs may upload to the storage endpoint |
| \`s3_public_url\` | null (\`SERVICE_PUBLIC_URL\`) | the URL jobs upload to |
| \`s3_output_path\` | \`outputs\` | the folder of the storage bucket uploads go to (relative, no \`..\`); a job's folder is fixed when its first \
credentials are issued |
| \`s3_access_key_id\`, \`s3_secret_access_key\` | null | storage credentials configured manually: this provider's jobs use this pair instead of \
fresh credentials per job (set and cleared together; the key id 16 to 128 upper-case letters and digits, not starting with \`STU\`). The secret is \
write-only; reads show \`s3_secret_access_key_set\` |
| \`webhook_secret\` | unset | write-only: the provider's Standard Webhooks signing secret (\`whsec_...\`); reads show \`webhook_secret_set\`. \
**Webhooks are refused until it is set** |
| \`webhook_allow_unsigned\` | \`false\` | accept unsigned webhooks while no secret is set (an admin's explicit choice: anyone who can reach the \
endpoint can then post status updates) |

A \`PUT\` sends any subset: omitted fields keep their values, \`null\` restores the default. Every
field is checked before anything is saved; one bad entry (say \`10.0.0.0/33\`) is a 422 whose
\`errors\` name it (\`webhook_allowed_ips.1\`). Changes are audited.

**Webhook intake.** \`POST /api/webhooks/{provider}\` is public, and authenticated by the sender:

1. If \`webhook_allowed_ips\` is not empty and the sender's address is outside it: 403, and a
   \`webhook_rejected\` audit entry.
2. Without a \`webhook_secret\`: 401 \`webhook_secret_not_set\`, audited, unless an admin set
   \`webhook_allow_unsigned\`.
3. With a \`webhook_secret\`, the request must carry a valid Standard Webhooks signature
   (\`webhook-id\`, \`webhook-timestamp\` within 5 minutes, \`webhook-signature\`) over the exact body:
   otherwise 401, audited the same way.
4. The body must be a JSON object of at most 16 MiB (400, 413): Replicate's is the whole training,
   its cumulative logs included.
5. A signed webhook is stored once per \`webhook-id\` (a provider's retry or a replay answers 202
   \`"duplicate": true\` with the same id, and changes nothing); unsigned ones are never
   deduplicated, so an unsigned post cannot claim the id of a genuine one still to come.
   Acknowledged with 202 \`{"received":true,"id":7,"duplicate":false}\`.

\`\`\`sh
curl -X PUT -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \\
  -d '{"webhook_secret":"whsec_<the secret the provider shows you>"}' http://localhost:8001/api/cloud/providers/replicate
\`\`\`

Received webhooks are kept **30 days**; the Scheduler's sweep forgets older ones. Only a summary
of each is stored: the training's \`id\`, \`model\`, \`version\`, \`status\`, times, \`metrics\` and
\`error\` (1,000 characters), and of everything else (\`input\`, which may hold a job's keys,
\`urls\`, \`logs\`, \`output\`) only its size. Admins see what arrived with
\`GET /api/cloud/providers/{provider}/webhooks?limit=50\`: \`signature\` (\`verified\`, \`unsigned\`),
\`provider_job_id\`, \`status\`, \`event\`, \`body_bytes\`, \`processed\`. A webhook about a
cloud job's run moves that job at once (see "Cloud"); a duplicate changes nothing.

**The hosted provider's own settings**: \`api_base_url\` (default \`https://api.replicate.com\`; a
proxy or a test double), \`training_model\` (\`owner/name:version\` of the trainer, required to
submit), \`training_destination\` (\`owner/name\`, the Replicate model trained versions go to:
required, and owned by the token's account, else 409 \`provider_not_configured\` /
\`destination_not_owned\`, and existing, else 409 \`destination_missing\`; never the trainer model), \`hardware\` (default \`gpu-a100-large\`: its
rate prices jobs) and \`api_token_secret\` (default \`REPLICATE_API_TOKEN\`: the *name* of the
secret holding the token, never the token; it must be a token of this provider, \`REPLICATE_\`...\`TOKEN\`,
never another secret such as \`HF_TOKEN\`). \`api_base_url\` must be https, and neither it nor
\`proxy_url\` may name a loopback, private, link-local or metadata address (422) unless an admin
sets \`allow_private_targets\`; settings saved before these rules are refused at use (409
\`provider_settings_refused\`). Under \`npm start\` the Node host also resolves each name as it
connects and refuses one that resolves to such an address (a Worker cannot resolve names). Why a credential check failed is in the admin's
\`GET /api/cloud/providers/{provider}\` (\`credentials\`); public answers say only whether it passed.

**Outbound calls** to a provider go through one layer: the provider's \`http_timeout\`
(\`SERVICE_HTTP_TIMEOUT\` changes the default of 30 s), and a circuit breaker per provider that
opens after 5 failed calls in a row (no answer, a timeout, a 5xx), lets calls through again after
60 s (half-open), and closes after 2 successes; while open, calls fail at once instead of
hanging. A 429 is retried on every call, honouring \`Retry-After\` (seconds or a date), and a
503/504 on calls that can be repeated, as Replicate's official clients do: at most 5 tries within
30 s, else the job tries again later; a training create whose answer was lost is never resent
(the job fails, naming it). Its state is in the metrics (\`service_circuit_breaker_state\`: 0 closed, 1 half-open,
2 open). Under \`npm start\` the calls leave from the Node host, which applies \`ssl_verify\`,
\`ssl_ca_bundle\`, \`proxy_url\` and the host's \`HTTPS_PROXY\`/\`HTTP_PROXY\`/\`NO_PROXY\`,
\`SERVICE_CA_BUNDLE\` and \`SERVICE_SSL_VERIFY\`; a deployed Worker honours only \`http_timeout\` and the
breaker (Cloudflare verifies certificates itself and has no outbound proxy).`,
  },
  {
    name: "Cloud",
    description: `Cloud training (spec 1 "Cloud data flow"): an environment whose datasets are local is
packaged, uploaded to the hosted provider, trained there, tracked, billed and its model delivered.

1. **Submit** \`POST /api/cloud/jobs/submit\` with \`{"config_name":"faces","dry_run":true}\`. The
   answer's \`summary\` lists the datasets, files and bytes that would be uploaded and every file
   left out (\`.env\`, \`.git\`, \`.ssh\`, \`.aws\`, key and credential files); \`estimate\` is the
   hardware's rate x the expected run time (the submission's \`max_runtime_minutes\`, else the
   environment's \`--max_runtime_minutes\`, else the setting \`default_max_runtime_minutes\`), with
   what is left of the spending limit. Nothing is stored or uploaded.
2. **Confirm** (consent setting Always Ask, the default): resend with \`"confirm_summary":
   "<summary_id>"\`. The id names exactly that summary: if a file changed meanwhile the submission
   is refused (\`summary_changed\`), and at upload time the archive is re-planned and refused
   unless it is still exactly what was confirmed. Always Allow needs no confirmation; Never
   Upload refuses cloud training (403 \`cloud_uploads_disabled\`).
3. **Wait**: the job is \`pending\` in the cloud pool under \`max_concurrent\`, \`user_max_concurrent\`,
   the team limit and the spending limit (wait reason \`spending_limit\`), or \`blocked\` when its
   estimate reaches the approval threshold. **No money is spent before it is admitted.**
4. **Run**: admitted, it is \`running\`: the archive is streamed from storage to the provider's file
   hosting (\`upload_progress\` 0 to 1), then the training is created with the provider's webhook
   pointed at \`<public URL>/api/webhooks/<provider>\`. Billing starts when the provider starts the
   run. Webhooks move the job at once; every job is also polled each \`poll_interval_seconds\`, so
   it is followed when webhooks are off or late. The provider's log lines become the job's
   \`log\` events (\`GET /api/training/events?job_id=...\`, the SSE stream).
5. **Cost**: \`GET /api/cloud/jobs/{job_id}\` shows \`cost_usd\` = billed seconds x the rate, growing
   each second while it runs, final (\`cost_final\`) when it ends. Cancelling a running job
   (\`POST /api/cloud/jobs/{job_id}/cancel\`) cancels it at the provider and bills the time it ran.
6. **End**: succeeded, failed or canceled at the provider becomes completed, failed or cancelled
   here (with the lifecycle webhooks); \`aborted\` (stopped before it ran) becomes failed, billed
   nothing; a status the service does not know fails the job after 5 reports, naming it, and is
   cancelled there. The uploaded archive is deleted at the provider, also after a failure.
7. **Budget**: at each poll and webhook the billed cost is compared with the approved estimate
   and with what is left of the spending limit; reaching either cancels the training, stores a
   \`cloud.budget_exceeded\` event (\`reason\` \`estimate\` or \`spending_limit\`, \`cost_usd\`,
   \`budget_usd\`) and ends the job cancelled with that reason.
   A failed or cancelled run cannot be resumed: submit again (\`/resume\` answers 409).

**Results** go to \`{"type":"storage"}\` (default): the built-in storage endpoint, the job's own
bucket, with keys issued for this job alone that expire when it ends. \`hub\` and \`s3\` are refused
for cloud jobs (422 \`destination_unavailable\`): the service cannot give a third party's machine
credentials scoped to one destination and expiring with the job, and never sends its long-lived
hub token or publishing keys.

**The trainer's input contract** (the training's \`input\`, flat Cog inputs): \`config\` and
\`dataloader\` (\`str\`, JSON), \`dataset_archive\` (\`Path\`, absent without local datasets),
\`service_job_id\`, \`result_destination\` (\`"storage"\`), \`result_s3_endpoint\`, \`result_s3_bucket\`,
\`result_s3_prefix\`, \`result_s3_region\` (\`str\`) and \`result_s3_access_key_id\`,
\`result_s3_secret_access_key\`, which the trainer must declare as Cog \`Secret\` (Replicate redacts
only those; every other input is shown to the whole organisation).

**Submission rules**: \`max_runtime_minutes\` below the environment's is refused (422
\`runtime_below_environment\`) except for an admin; \`--post_checkpoint_script\`,
\`--post_upload_script\` and \`--validation_external_script\` are refused (422 \`script_not_allowed\`)
unless the program is in the cloud setting \`allowed_scripts\` and the line holds no shell syntax; another user's dataset folder is
packaged only once its owner allowed it (\`PUT /api/datasets/folders/{name}/cloud-sharing\`), else
403 \`dataset_not_yours\`.

**Settings** (\`GET\`/\`PUT /api/cloud/settings\`, admin to change): \`consent_mode\` (\`ask\`, \`allow\`,
\`never\`), \`spending_limit_usd\` and \`spending_period\` (\`day\`, \`week\` from Monday, \`month\`; UTC),
\`public_url\` (else \`SERVICE_PUBLIC_URL\`; without either, or with an \`http://\` one, no webhooks: jobs are polled),
\`poll_interval_seconds\` (30), \`default_max_runtime_minutes\` (60), \`publishing.hub\` and
\`publishing.s3\`. **Rates** (\`GET\`/\`PUT /api/cloud/rates\`): USD per second per hardware; a job keeps
the rate it was submitted with. The spending limit counts the costs of cloud jobs that ended this
period plus each running job's estimate (or its cost so far when larger): a submission, and an
admission, that would pass it is refused (409 \`spending_limit_exceeded\`) or waits.

**Providers**: \`replicate\` (hosted: cost tracking, live logs, webhooks), \`workers\` (the same
submission queued for your own remote workers: nothing uploaded or billed) and \`managed\` (coming
soon: 422 \`provider_coming_soon\`). The archive is at most 100 MB, 100,000,000 bytes as Replicate
counts (413 \`archive_too_large\` before any upload).`,
  },
  {
    name: "Audit",
    description: `
Security-relevant actions are appended to an audit trail in the database, each entry chained to
the one before by SHA-256, so an edited, removed or reordered entry is detected.

| \`event_type\` | When | \`target\`, \`details\` |
| --- | --- | --- |
| \`login_succeeded\`, \`login_failed\` | every login attempt (a failed one records the username tried, never the password) | \`details.reason\` on \
failure |
| \`logout\` | \`POST /api/cloud/auth/logout\` | |
| \`first_admin_created\`, \`user_created\` | setup, an admin creating a user, self-registration | \`user:<id>\`; username, levels, \`via\` |
| \`api_key_created\`, \`api_key_revoked\` | key creation and revocation (never the key) | \`api_key:<id>\`; name, prefix |
| \`job_approved\`, \`job_rejected\` | an admin's decision on a blocked job | job id; the rejection \`reason\` |
| \`priority_overridden\` | \`POST /api/queue/{job_id}/priority\` | job id; the new priority |
| \`limits_changed\`, \`approval_rules_changed\` | \`POST /api/queue/concurrency\`, \`PUT /api/queue/approval-rules\` | \`changed\`: \`{field: \
{from, to}}\` |
| \`provider_settings_changed\` | \`PUT /api/cloud/providers/{provider}\` | provider; \`changed\` (the webhook secret only as set or not) |
| \`cloud_settings_changed\`, \`cloud_rates_changed\` | \`PUT /api/cloud/settings\`, \`PUT /api/cloud/rates\` | \`changed\` (secrets by name only) |
| \`cloud_job_submitted\` | an accepted cloud submission | job id; provider, estimate, \`summary_id\`, files |
| \`metrics_config_changed\` | metrics configuration and templates | the new configuration |
| \`storage_quota_changed\` | \`PUT /api/admin/storage-quota\` | \`storage_quota\`; \`before\`, \`after\` |
| \`event_limits_changed\`, \`dataset_quota_changed\` | \`PUT /api/admin/event-limits\`, \`PUT /api/admin/dataset-quota\` | the setting; \`before\`, \`after\` |
| \`dataset_cloud_sharing_changed\` | \`PUT /api/datasets/folders/{name}/cloud-sharing\` | \`datasets/<name>\`; \`allow_cloud\` |
| \`webhook_rejected\` | a provider webhook refused (address outside the allowlist, no signing secret set, bad signature) | provider; \`reason\`, \
path |
| \`rate_limited\` | a request refused with 429 | the path; method, rule, limit, window |

Every entry also has \`id\` (1, 2, 3... without gaps), \`occurred_at\`, \`actor_user_id\` and \`actor\`
(the user, null for anonymous callers), \`client_ip\` (see "Rate limiting" for how the address is
found), \`user_agent\`, \`prev_hash\` and \`hash\`. Entries are written just after the response, so a
slow database never slows the request.

\`\`\`sh
# Admins: newest first, filtered by type and time (ISO 8601), at most \`limit\` (1-1000, default 100).
curl -H "X-API-Key: $KEY" "http://localhost:8001/api/audit?event_type=login_failed&since=2026-11-23T00:00:00Z&limit=50"
#   -> {"entries":[{"id":42,"event_type":"login_failed","actor":"mallory","client_ip":"203.0.113.9",...}],"next_before_id":41}
# Older pages: add cursor=<next_cursor> (or before_id=<next_before_id>) until it is null.
# Check the whole chain from the first entry:
curl -H "X-API-Key: $KEY" http://localhost:8001/api/audit/verify
#   -> {"valid":true,"entries_checked":42,"first_invalid":null,"last_hash":"9f2c..."}
#   or {"valid":false,"first_invalid":{"id":17,"reason":"the entry's contents do not match its hash (edited)"},...}
\`\`\`

The chain proves that nothing before the newest entry was changed. Removing the newest entries
leaves a shorter valid chain: keep a copy of \`last_hash\` elsewhere (a log collector, a ticket) to
detect that too.`,
  },
  {
    name: "Metrics",
    description: `
\`GET /api/cloud/metrics/prometheus\` serves the service's metrics in the Prometheus text format
0.0.4 (\`Content-Type: text/plain; version=0.0.4; charset=utf-8\`, \`# HELP\` and \`# TYPE\` for every
family). Export is **off by default**: until an admin enables it, the scrape answers **404** with
\`{"code": "metrics_disabled", ...}\` (not an empty exposition), so Prometheus shows the target down
rather than silently collecting nothing. Everything here is admin-only; the scrape also accepts
a dedicated token (below).

\`\`\`sh
# Enable export (fields left out keep their value; categories replace the list).
curl -X PUT -H "X-API-Key: $KEY" -H "Content-Type: application/json" \\
  -d '{"prometheus_enabled": true, "prometheus_categories": ["jobs", "http", "health"]}' \\
  http://localhost:8001/api/cloud/metrics/config
# Or pick a template (it sets the categories; enabled stays as it is).
curl -X POST -H "X-API-Key: $KEY" http://localhost:8001/api/cloud/metrics/config/templates/security
# See what given categories would show, enabled or not, changing nothing (no categories: the configured ones).
curl -H "X-API-Key: $KEY" "http://localhost:8001/api/cloud/metrics/config/preview?categories=jobs&categories=audit"
curl -H "X-API-Key: $KEY" http://localhost:8001/api/cloud/metrics/config   # the configuration
curl -H "X-API-Key: $KEY" http://localhost:8001/api/cloud/metrics/prometheus
\`\`\`

The default configuration is \`{"prometheus_enabled": false, "prometheus_categories": ["jobs",
"http", "health"]}\` (the standard template). An unknown category or template is a 422 naming it,
and nothing changes. Categories are stored without duplicates and rendered in the order of the
table below. Every change is recorded in the audit trail as \`metrics_config_changed\` (the new
configuration, the template applied if any, and \`changed\` with each field's \`from\` and \`to\`).

| Template | Categories |
| --- | --- |
| \`minimal\` | jobs |
| \`standard\` | jobs, http, health |
| \`security\` | jobs, http, rate_limits, audit, approvals |
| \`full\` | all eight |

| Category | Metric | Type | What it is |
| --- | --- | --- | --- |
| jobs | \`service_jobs_total\` | gauge | queue entries of any status still in the queue (cleanup removes old finished ones, so it can fall) |
| jobs | \`service_jobs_by_status{status}\` | gauge | entries per status; all six statuses always present |
| jobs | \`service_jobs_active\` | gauge | entries \`pending\`, \`running\` or \`blocked\` (spec 3's active statuses) |
| jobs | \`service_cost_usd_total\` | gauge | sum of \`estimated_cost\` (USD) of the entries that have started (running or finished); estimated, \
since providers report no actual cost yet |
| jobs | \`service_job_duration_seconds_avg\` | gauge | mean of \`completed_at - started_at\` over \`completed\` entries (0 when there are none) |
| http | \`service_http_requests_total{endpoint}\` | counter | requests answered, by \`<METHOD>_<route pattern>\` |
| http | \`service_http_errors_total{endpoint_status}\` | counter | responses with status 400 or above, by \`<METHOD>_<route pattern>_<status>\` |
| http | \`service_http_request_latency_ms_avg{endpoint}\` | gauge | mean milliseconds until the response (headers) was ready, over all requests \
counted: latency sum / request count |
| rate_limits | \`service_rate_limit_violations_total\` | counter | requests the rate limiter refused with 429 |
| rate_limits | \`service_rate_limit_tracked_clients\` | gauge | distinct client addresses with a request the rate limiter counted within the last \
rate-limit period (\`RATE_LIMIT_PERIOD\`, 60 s by default); uncounted requests (excluded paths, loopback in development) do not make a client \
tracked |
| approvals | \`service_approval_requests_pending\` | gauge | approval requests awaiting an admin's decision |
| approvals | \`service_approval_requests_by_status{status}\` | gauge | approval requests by status (\`pending\`, \`approved\`, \`rejected\`, \
\`withdrawn\` always present) |
| audit | \`service_audit_log_entries_total\` | counter | entries in the audit trail (append-only) |
| audit | \`service_audit_log_entries_24h\` | gauge | entries recorded in the last 24 hours |
| health | \`service_uptime_seconds\` | gauge | seconds since the service started (deployed: since the Worker isolate started) |
| health | \`service_health_database_latency_ms\` | gauge | round trip of a \`SELECT 1\` to the database, timed at each scrape |
| circuit_breakers | \`service_circuit_breaker_state{provider}\` | gauge | per cloud provider; announced (HELP/TYPE) with no samples until cloud \
training lands |
| circuit_breakers | \`service_circuit_breaker_failures_total{provider}\` | counter | per cloud provider; no samples until cloud training lands |
| provider | \`service_cost_limit_percent_used{provider}\` | gauge | per cloud provider; no samples until cloud training lands |
| provider | \`service_credit_balance_usd{provider}\` | gauge | per cloud provider; no samples until cloud training lands |

Labels use the route pattern, never raw ids (\`POST_/api/queue/{job_id}/cancel\`, errors
\`POST_/api/queue/{job_id}/cancel_404\`), so the number of series stays bounded: a request that
matches no route counts as \`<METHOD>_unmatched\`, and a method outside the standard seven as
\`OTHER\`. Each Worker isolate sums its requests in memory and hands them to one \`MetricsCollector\`
Durable Object after the response (\`waitUntil\`): at most once a second, or at once when 500
requests are waiting, and always within about a second of the last request, so a scrape can be
up to a second behind and no request waits on metrics. The collector keeps its counters in its
own storage: restarts and deploys do not reset them. The jobs, approvals and audit figures are
read from the database at each scrape (one batch of queries).

\`promtool check metrics\` parses the scrape and reports two kinds of lint finding, both caused by
the spec's names: \`metric names should not contain abbreviated units\` (the two \`_ms\` metrics) and
\`non-counter metrics should not have "_total" suffix\` (\`service_jobs_total\` and
\`service_cost_usd_total\`, which are gauges because cleanup makes them fall).

**Scrape token.** Rather than giving Prometheus an admin's API key, set \`METRICS_SCRAPE_TOKEN\` to
a long random value (\`openssl rand -hex 32\`): locally as an environment variable of \`npm start\`,
deployed as a Worker secret (\`wrangler secret put METRICS_SCRAPE_TOKEN\`). A request carrying
\`Authorization: Bearer <that token>\` may call the scrape and nothing else (it is compared in
constant time); any other bearer is checked as an API key. Unset, only admins can scrape.

\`\`\`yaml
# prometheus.yml
scrape_configs:
  - job_name: training-service
    metrics_path: /api/cloud/metrics/prometheus
    scheme: https
    authorization:
      type: Bearer
      credentials_file: /etc/prometheus/training-service-token   # the METRICS_SCRAPE_TOKEN value
    static_configs:
      - targets: ["train.example.com"]
\`\`\``,
  },
  {
    name: "Health",
    description: `Probes for load balancers and people; public, and never rate limited.

- \`GET /api/cloud/health\`: \`status\` (\`healthy\`, \`degraded\`, \`unhealthy\`), \`version\`, \`uptime_seconds\`, \`timestamp\`
  (ISO 8601 UTC) and \`components\`: \`database\` (with \`latency_ms\` and the schema version it is at) and \`secrets\`
  (whether every secret this configuration needs is set; names only, never values: \`LIBSQL_AUTH_TOKEN\` when
  deployed). \`unhealthy\` answers 503. \`?include_providers=true\` adds a \`providers\` list: whether
  each provider's credentials are accepted and its latency, never the provider's own words (admins see them). In production \`uptime_seconds\` counts from the Worker isolate's start.
- \`GET /api/cloud/health/live\`: \`{"status":"ok"}\` while the Worker answers.
- \`GET /api/cloud/health/ready\`: 200 once the database is reachable and migrated, else 503.`,
  },
  {
    name: "Dashboard",
    description: `The web dashboard at \`/\`: log in with a username and password (a session cookie), then the queue, live
training, GPUs and workers, and (by level) approvals, limits, users, keys, provider settings, metrics and the audit trail.
It is built from \`edge/ui\` into the Worker (no CDN), calls only this API, and offers only what the user's level may do:
the API decides, the page only hides what would be refused. Its Content-Security-Policy allows this origin's script and
stylesheet only (no inline code); images may also be \`data:\` URIs (validation previews).`,
  },
  {
    name: "Documentation",
    description: `This document, at \`/openapi.json\` (OpenAPI 3.1), browsable with Swagger UI at \`/docs\` and ReDoc at \`/redoc\`. Both
pages are served from the npm packages embedded in the Worker, so they work without internet. Each operation's
"Access:" line, its \`x-access\` extension and its \`security\` are generated from the route declarations in
\`shared/permissions.ts\`.`,
  },
];
