// Script command lines (--post_checkpoint_script and the like): split without a shell,
// placeholders filled per word.
import { describe, expect, it } from "vitest";
import { fillPlaceholders, placeholderValues, splitCommand } from "../../shared/placeholders";

describe("splitCommand", () => {
  it("splits words like a shell, without expanding anything", () => {
    expect(splitCommand(`python "my script.py" --step {global_step}`)).toEqual(["python", "my script.py", "--step", "{global_step}"]);
    expect(splitCommand(`a 'b c' "d \\"e\\" \\\\" f\\ g   h`)).toEqual(["a", "b c", 'd "e" \\', "f g", "h"]);
    expect(splitCommand(`echo $HOME | cat > x; $(rm -rf /)`)).toEqual(["echo", "$HOME", "|", "cat", ">", "x;", "$(rm", "-rf", "/)"]);
    expect(splitCommand(`x ''`)).toEqual(["x", ""]);
    expect(splitCommand("   ")).toEqual([]);
    expect(() => splitCommand(`a "b`)).toThrow('unclosed " in the command');
    expect(() => splitCommand(`a 'b`)).toThrow("unclosed ' in the command");
  });
});

describe("placeholders", () => {
  const options = {
    "--model_family": "flux",
    "--model_type": "lora",
    "--lora_type": "standard",
    "--tracker_run_name": "run-1",
    "--validation_prompt": "a cat; rm -rf /",
    "--validation_num_inference_steps": 20,
  };

  it("fills the {name} placeholders per word; a value stays one word whatever it holds", () => {
    const values = placeholderValues("post_checkpoint", options, { localCheckpointPath: "/w/out/checkpoint-5", globalStep: 5 });
    expect(
      fillPlaceholders(
        splitCommand("up.sh {local_checkpoint_path} --step={global_step} {validation_prompt} {remote_checkpoint_path} {unknown}"),
        values,
      ),
    ).toEqual(["up.sh", "/w/out/checkpoint-5", "--step=5", "a cat; rm -rf /", "", "{unknown}"]);
    expect(values).toMatchObject({ tracker_run_name: "run-1", model_family: "flux", validation_num_inference_steps: "20" });
    expect(values).not.toHaveProperty("model_type");
  });

  it("gives the post-upload script the remote path, model_type and lora_type; validation none of them", () => {
    expect(placeholderValues("post_upload", options, { remoteCheckpointPath: "s3://b/k" })).toMatchObject({
      remote_checkpoint_path: "s3://b/k",
      model_type: "lora",
      lora_type: "standard",
    });
    expect(placeholderValues("validation", options, { remoteCheckpointPath: "s3://b/k", globalStep: 3 })).toMatchObject({
      remote_checkpoint_path: "",
      global_step: "3",
      local_checkpoint_path: "",
    });
  });
});

describe("webhookToEvent", async () => {
  const { webhookToEvent } = await import("../../runner/agent/callback");
  it("keeps a type, uses SimpleTuner's message_type, and wraps anything else", () => {
    expect(webhookToEvent({ type: "a.b", x: 1 })).toEqual({ type: "a.b", x: 1 });
    expect(webhookToEvent({ message_type: "train_status", state: {} })).toEqual({
      type: "train_status",
      message_type: "train_status",
      state: {},
    });
    expect(webhookToEvent([1])).toEqual({ type: "webhook", data: [1] });
    expect(webhookToEvent("text")).toEqual({ type: "webhook", data: "text" });
  });
});
