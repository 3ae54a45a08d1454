import { realpathSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import type { z } from "zod";
import type { TrainerAvailability } from "../../shared/schemas/workers";
import { RunnerConfigError, userIds, type RunnerConfig } from "./config";
import type { BoxPolicy } from "./job";
import { findProgram, hiddenBy, RUNNER_INSTALL } from "./sandbox";

/*
 * What this box runs, resolved once when the runner starts: its config checked against the box
 * (bubblewrap found or not, run_as possible or not), the installations its sandbox keeps visible,
 * and the trainers it tells the edge it can run.
 */

/**
 * What the box runs, with the sandbox resolved: bubblewrap found (or not) where the config says.
 * Throws RunnerConfigError when the box cannot meet its config: a required sandbox without
 * bubblewrap, run_as without root or without bubblewrap.
 */
export function boxPolicy(config: RunnerConfig, log: (line: string) => void): BoxPolicy {
  const found = config.sandbox === "off" ? null : findProgram(config.bwrap, config.path);
  // A runner as root runs trainers as nobody unless its config names a user: root in a sandbox
  // is still root (the job directory's owner, ptrace of its own tree, writable /proc/sys?).
  let runAs = config.runAs;
  if (!runAs && found && process.getuid?.() === 0) {
    try {
      runAs = userIds("nobody");
    } catch {
      runAs = { uid: 65534, gid: 65534 };
    }
  }
  const visible = found ? declaredInstallations(config) : [];
  // Changing user takes root; bubblewrap then keeps only what setpriv needs for the switch.
  if (config.runAs && process.getuid?.() !== 0)
    throw new RunnerConfigError(`runner config ${config.configFile ?? "(none)"}: run_as needs the runner to run as root`);
  if (config.runAs && !found)
    throw new RunnerConfigError(`runner config ${config.configFile ?? "(none)"}: run_as needs the sandbox (bubblewrap) on this box`);
  if (config.sandbox === "off")
    log("WARNING: sandbox is off in the runner config: trainers and scripts run with this runner's rights and see its files");
  else if (!found && config.sandbox === "required")
    throw new RunnerConfigError(
      `runner config ${config.configFile ?? "(none)"}: sandbox is "required" but bubblewrap (${config.bwrap}) is not installed on this box`,
    );
  else if (!found)
    log(
      `WARNING: bubblewrap (${config.bwrap}) is not installed on this box: only the built-in trainers (simpletuner, demo) and the declared scripts will run, without a sandbox; install bubblewrap (apt-get install bubblewrap)`,
    );
  else
    log(
      `trainers and scripts run sandboxed by ${found}${runAs ? ` as uid ${runAs.uid}${config.runAs ? "" : " (nobody: run_as is unset and the runner is root)"}` : ""}, ${
        config.network === "isolated"
          ? `each in a network of its own${config.allowHosts.length ? ` (reaching ${config.allowHosts.join(", ")})` : ""}`
          : "on the box's network (network: host)"
      }`,
    );
  return {
    trainers: config.trainers,
    allowRawCommands: config.allowRawCommands,
    bwrap: found,
    sandbox: config.sandbox,
    runAs,
    hide: config.hide,
    visible: [...RUNNER_INSTALL, ...visible],
    network: config.network,
    allowHosts: config.allowHosts,
    // Checked when the runner starts (Runner.start): the probe imports SimpleTuner, which takes a while.
    simpletuner: { available: false, detail: "not checked yet" },
    path: config.path,
    passEnv: config.passEnv,
  };
}

/**
 * The installations the box declares, which its sandbox keeps visible (read-only) wherever they
 * live - a Python under the home the sandbox hides (pyenv), say: each declared trainer's program
 * and SimpleTuner's interpreter, by the prefix of where its link leads (`<prefix>/bin/python`),
 * and SimpleTuner's virtual environment. Refuses, at start, one that cannot be shown without
 * showing what must stay hidden (a program in the work directory, a secrets folder, or right in
 * the hidden home), naming the path.
 */
function declaredInstallations(config: RunnerConfig): string[] {
  const hide = [config.workDir, ...config.hide];
  const visible: string[] = [];
  const within = (parent: string, child: string) => {
    const rel = relative(parent, child);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  };
  const keep = (what: string, path: string | null, prefixOf = true) => {
    if (!path || !isAbsolute(path)) return;
    let real = path;
    try {
      real = realpathSync(path);
    } catch {}
    for (const candidate of new Set([path, real])) {
      if (!hiddenBy(candidate, hide, [...RUNNER_INSTALL, ...visible])) continue;
      const prefix = prefixOf ? dirname(dirname(candidate)) : candidate;
      // Shown, it must not show anything hidden: no hidden path at or inside it, and not inside the work directory.
      if (prefix === "/" || hide.some((h) => within(prefix, h)) || within(config.workDir, prefix) || within("/tmp", prefix))
        throw new RunnerConfigError(
          `runner config ${config.configFile ?? "(none)"}: ${what} ${path} lies under ${hiddenBy(candidate, hide)}, which the sandbox hides from trainers (the work directory, /tmp, the home directory and the secrets it hides); install it elsewhere`,
        );
      visible.push(prefix);
    }
  };
  for (const [name, argv] of Object.entries(config.trainers)) keep(`trainers.${name}`, findProgram(argv[0]!, config.path));
  for (const script of config.scripts) keep("the script", script.includes("*") ? script.slice(0, script.indexOf("*")) : script);
  if (config.simpletuner) {
    keep("simpletuner", config.simpletuner, false);
    keep("simpletuner's Python", join(config.simpletuner, "bin", "python"));
  }
  return [...new Set(visible)];
}

/**
 * What this box can run, for the edge to give it only such jobs: SimpleTuner as found at start,
 * the demo trainer, and the config's own trainers (sandboxed, or with the sandbox off).
 */
export function trainerAvailability(box: BoxPolicy): z.input<typeof TrainerAvailability>[] {
  const sandboxed = box.bwrap !== null || box.sandbox === "off";
  const st = box.simpletuner;
  return [
    st.available
      ? { name: "simpletuner", available: true, version: st.install.version }
      : { name: "simpletuner", available: false, detail: st.detail.slice(0, 500) },
    { name: "demo", available: true },
    ...Object.keys(box.trainers).map((name) =>
      sandboxed ? { name, available: true } : { name, available: false, detail: "bubblewrap is not installed on this box (its sandbox)" },
    ),
  ];
}
