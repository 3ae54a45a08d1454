import type { Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import type { NotificationPreferences, NotificationPreferencesUpdate } from "../../../shared/schemas/notifications";
import { showControls } from "../../../shared/terminal-text";
import { cli } from "../context";
import { cell } from "../format-job";
import { UsageError, type Output } from "../output";

interface SetOptions {
  kinds?: string;
  webhook?: string;
  slack?: string;
  email?: string;
  clearWebhook?: boolean;
  clearSlack?: boolean;
  clearEmail?: boolean;
}

/** `jobs notifications`: your notification preferences shown and changed, and what was sent to you. */
export function addNotifications(program: Command): void {
  const notifications = program
    .command("notifications")
    .description("Your notification preferences (what you hear of, and where) and the messages sent to you.");

  notifications
    .command("show", { isDefault: true })
    .description("Your preferences: the kinds you want, your channels and your webhook's signing secret (the default).")
    .addHelpText("after", "\nExample:\n  $ jobs notifications\n  $ jobs notifications show --format json")
    .action(async (_options: object, command: Command) => {
      const { out, client } = cli(command);
      const preferences = await client.call(endpoints.notificationPreferences, {});
      if (out.json) return out.printJson(preferences);
      print(out, preferences);
    });

  notifications
    .command("set")
    .description("Changes your preferences: what you name changes, the rest stays as it is.")
    .option(
      "--kinds <kinds>",
      "the kinds you want, separated by commas (job.started, job.stalled, job.completed, ...); none: an empty string",
    )
    .option("--webhook <url>", "a Standard Webhooks receiver, signed with your secret")
    .option("--slack <url>", "a Slack-compatible incoming webhook")
    .option("--email <address>", "an e-mail address (the admin's SMTP server sends)")
    .option("--clear-webhook", "turn the webhook off")
    .option("--clear-slack", "turn Slack off")
    .option("--clear-email", "turn e-mail off")
    .addHelpText(
      "after",
      "\nThe service checks every value: an unknown kind, a bad address or a URL on a private address is refused, naming it, and nothing changes.\n\nExample:\n  $ jobs notifications set --kinds job.completed,job.failed --slack https://hooks.slack.com/services/T/B/X --email me@example.com\n  $ jobs notifications set --clear-slack",
    )
    .action(async (options: SetOptions, command: Command) => {
      const { out, client } = cli(command);
      for (const channel of ["webhook", "slack", "email"] as const) {
        const clear = `clear${channel[0]!.toUpperCase()}${channel.slice(1)}` as "clearWebhook" | "clearSlack" | "clearEmail";
        if (options[channel] !== undefined && options[clear])
          throw new UsageError(`--${channel} and --clear-${channel} contradict each other`);
      }
      const named = Object.values(options).some((value) => value !== undefined);
      if (!named) throw new UsageError("nothing to change: name --kinds, --webhook, --slack, --email or a --clear-... option");
      const current = await client.call(endpoints.notificationPreferences, {});
      const body: NotificationPreferencesUpdate = {
        kinds:
          options.kinds === undefined
            ? current.kinds
            : (options.kinds
                .split(",")
                .map((kind) => kind.trim())
                .filter(Boolean) as NotificationPreferencesUpdate["kinds"]),
        channels: {
          webhook: options.clearWebhook ? null : options.webhook !== undefined ? { url: options.webhook } : current.channels.webhook,
          slack: options.clearSlack ? null : options.slack !== undefined ? { url: options.slack } : current.channels.slack,
          email: options.clearEmail ? null : options.email !== undefined ? { address: options.email } : current.channels.email,
        },
      };
      const saved = await client.call(endpoints.notificationPreferencesUpdate, { body });
      if (out.json) return out.printJson(saved);
      print(out, saved);
      out.note("Saved.");
    });

  notifications
    .command("deliveries")
    .description("The messages sent to you, newest first: kind, channel, target, outcome, attempts, the next retry or the last error.")
    .option("--limit <n>", "how many (1 to 200)", "50")
    .option("--kind <kind>", "only this kind (job.completed, ...)")
    .addHelpText(
      "after",
      "\nExample:\n  $ jobs notifications deliveries --kind job.failed\n  $ jobs notifications deliveries --format json",
    )
    .action(async (options: { limit: string; kind?: string }, command: Command) => {
      const { out, client } = cli(command);
      // Sent as written: the service checks both and says what is wrong.
      const query = { limit: options.limit, ...(options.kind ? { kind: options.kind } : {}) } as never;
      const answer = await client.call(endpoints.notificationDeliveries, { query });
      if (out.json) return out.printJson(answer);
      if (!answer.deliveries.length) return out.note("Nothing sent to you yet.");
      out.table(
        ["WHEN", "KIND", "CHANNEL", "TARGET", "STATUS", "ATTEMPTS", "NEXT RETRY", "LAST ERROR"],
        answer.deliveries.map((d) => [
          d.event_at,
          d.kind,
          d.channel,
          cell(d.target),
          d.status,
          String(d.attempts),
          d.status === "pending" ? cell(d.next_attempt_at) : "-",
          cell(d.last_error),
        ]),
      );
    });
}

/** The preferences as `name: value` lines; a control character in a value is shown as an escape, never sent raw. */
function print(out: Output, preferences: NotificationPreferences): void {
  const { webhook, slack, email } = preferences.channels;
  const lines: [string, string][] = [
    ["kinds", preferences.kinds.length ? preferences.kinds.join(",") : "(none)"],
    ["webhook", webhook ? webhook.url : "-"],
    ["webhook secret", preferences.webhook_secret || "- (made when you first save)"],
    ["slack", slack ? slack.url : "-"],
    ["email", email ? email.address : "-"],
    ["updated", preferences.updated_at ?? "never saved: nothing is sent to you"],
  ];
  for (const [name, value] of lines) out.line(`${`${name}:`.padEnd(16)}${showControls(value)}`);
}
