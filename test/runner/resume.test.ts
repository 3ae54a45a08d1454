// A retry's resume on the box (runner/agent/resume.ts): the first named checkpoint the box still
// has is copied into the new job's output directory and the trainer told to resume; names that
// point outside a job's directory are never read.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { prepareResume } from "../../runner/agent/resume";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function box() {
  const workDir = mkdtempSync(join(tmpdir(), "resume-"));
  dirs.push(workDir);
  const checkpoint = (jobId: string, name: string, weights = name) => {
    const dir = join(workDir, "jobs", jobId, "output", name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "weights.json"), JSON.stringify(weights));
  };
  return { workDir, checkpoint, output: (jobId: string) => join(workDir, "jobs", jobId, "output") };
}

describe("prepareResume", () => {
  it("copies the newest checkpoint it finds, skipping those gone, and sets --resume_from_checkpoint latest", () => {
    const b = box();
    b.checkpoint("old", "checkpoint-10");
    const config: Record<string, unknown> = {};
    const resumed = prepareResume(
      b.workDir,
      {
        resume_from: [
          { job_id: "old", path: "output/checkpoint-20", step: 20 },
          { job_id: "old", path: "output/checkpoint-10", step: 10 },
        ],
      },
      b.output("new"),
      config,
    );
    expect(resumed).toEqual({ from: { job_id: "old", checkpoint: "checkpoint-10", step: 10 }, missing: ["old/output/checkpoint-20"] });
    expect(config["--resume_from_checkpoint"]).toBe("latest");
    expect(JSON.parse(readFileSync(join(b.output("new"), "checkpoint-10", "weights.json"), "utf8"))).toBe("checkpoint-10");
  });

  it("copies nothing for a job with checkpoints of its own (an automatic requeue of the retry resumes from those)", () => {
    const b = box();
    b.checkpoint("old", "checkpoint-10");
    b.checkpoint("new", "checkpoint-30");
    const config: Record<string, unknown> = {};
    expect(
      prepareResume(b.workDir, { resume_from: [{ job_id: "old", path: "output/checkpoint-10", step: 10 }] }, b.output("new"), config),
    ).toBeNull();
    expect(config["--resume_from_checkpoint"]).toBe("latest");
    expect(existsSync(join(b.output("new"), "checkpoint-10"))).toBe(false);
  });

  it("never reads outside a job's directory, whatever the names say", () => {
    const b = box();
    const secret = join(b.workDir, "checkpoint-1");
    mkdirSync(secret);
    writeFileSync(join(secret, "token"), "runner secret");
    b.checkpoint("other", "checkpoint-5");
    const hostile = [
      { job_id: "old", path: "../../checkpoint-1", step: 1 },
      { job_id: "../..", path: "checkpoint-1", step: 1 },
      { job_id: "old", path: "/etc", step: 1 },
      { job_id: "old", path: "../other/output/checkpoint-5", step: 5 },
      { job_id: "old", path: "output/not-a-checkpoint", step: 1 },
    ];
    const resumed = prepareResume(b.workDir, { resume_from: hostile }, b.output("new"), {});
    expect(resumed).toEqual({ from: null, missing: hostile.map((h) => `${h.job_id}/${h.path}`) });
    expect(existsSync(join(b.output("new"), "checkpoint-1"))).toBe(false);
    expect(existsSync(join(b.output("new"), "checkpoint-5"))).toBe(false);
  });

  it("leaves a job that is not a retry alone", () => {
    const config: Record<string, unknown> = { "--resume_from_checkpoint": "checkpoint-3" };
    expect(prepareResume(box().workDir, {}, "/nowhere", config)).toBeNull();
    expect(config).toEqual({ "--resume_from_checkpoint": "checkpoint-3" });
  });
});
