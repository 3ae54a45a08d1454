# A stand-in for SimpleTuner's train.py (4.8.0, upstream commit bc8e6ab), written from its source
# and from the recordings of real runs in test/fixtures/simpletuner/ (copied beside this file as
# recordings/ by test/helpers/simpletuner.ts). It behaves as train.py does where the service
# meets it:
#
# - Options: `--option=value`, `--option value` and bare flags. Unless CONFIG_BACKEND or
#   SIMPLETUNER_CONFIG_BACKEND is "cmd", a config/config.json in the working directory wins and
#   every command-line option is ignored (helpers/configuration/loader.py).
# - Events: POSTed as raw webhooks to each `webhook_type: raw` target of --webhook_config, in the
#   recorded shapes (the recording's own bodies, with this run's job id, paths and numbers):
#   log.message for every log record (also printed, with colours), lifecycle.stage phases,
#   training.status with progress per step, training.checkpoint, training.validation with bare
#   base64 images, error then training.status failed on an uncaught error, training.status
#   interrupted on SIGINT. job_id is SIMPLETUNER_JOB_ID (null when unset).
# - Datasets: its local metadata backend writes aspect_ratio_bucket_indices_<id>.json and
#   aspect_ratio_bucket_metadata_<id>.json into each dataset's instance_data_dir at every start,
#   through a temporary file in that folder (atomicwrites): a read-only folder fails it there.
# - Signal file (SIMPLETUNER_ACCELERATE_SIGNAL_FILE): stat once per optimizer step, re-read when
#   st_mtime increased, one action per counter increase; a validation is only consumed when
#   validation is configured (--validation_prompt).
# - Import: like train.py, importing it wraps stdout so every write ends with a colour reset, and
#   creates or empties debug.log in the working directory.
# - Scripts: it runs --post_checkpoint_script, --post_upload_script and
#   --validation_external_script itself (subprocess), as train.py does; with
#   --validation_method=external-script and no script it refuses to start.
# - Signals: no handler of its own. SIGINT is KeyboardInterrupt: `interrupted` is posted, nothing
#   is saved, exit 0. SIGTERM ends it at once, no event.
#
# Stand-in options (never SimpleTuner's): --standin_step_seconds (default 0.05),
# --standin_startup_seconds (default 0: how long its start-up takes before the first step),
# --standin_replay=lora-run|failed-run (post a recording whole instead of training),
# --standin_fail_at_step=N (raise at that step), --standin_ignore_signals (ignore SIGINT and
# SIGTERM and start a child marked --standin_marker, to test that a kill takes the whole tree).
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from datetime import datetime, timezone

# What importing train.py does before anything else (helpers/log_format.py): colorama's init(autoreset=True)
# wraps stdout so that every write ends with a colour reset, and debug.log in the working directory is
# created or emptied.
class _AutoReset:
    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(f"{text}\x1b[0m" if text else text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


sys.stdout = _AutoReset(sys.stdout)
open("debug.log", "w").close()

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDINGS = os.path.join(HERE, "recordings")
STEP_TEMPLATE_INDEX = 101  # the first training.status with progress in webhooks-lora-run.jsonl


def parse_options(argv):
    out, i = {}, 0
    while i < len(argv):
        name = argv[i]
        if not name.startswith("--"):
            raise SystemExit(f"train.py: error: unrecognized arguments: {name}")
        if "=" in name:
            key, value = name.split("=", 1)
            out[key] = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[name] = argv[i + 1]
            i += 1
        else:
            out[name] = "true"
        i += 1
    return out


def load_options():
    backend = os.environ.get("SIMPLETUNER_CONFIG_BACKEND", os.environ.get("CONFIG_BACKEND", os.environ.get("CONFIG_TYPE")))
    if backend != "cmd" and os.path.exists("config/config.json"):
        with open("config/config.json") as handle:
            loaded = json.load(handle)
        # The file wins: the command line is not read at all.
        return {(k if k.startswith("--") else f"--{k}"): (json.dumps(v) if isinstance(v, (list, dict)) else str(v)) for k, v in loaded.items()}
    return parse_options(sys.argv[1:])


# Set when run as a script (setup()): importing this module, as the runner's probe does, runs nothing.
opts = {}
JOB_ID = None
OUTPUT_DIR = ""
TARGETS = []


def recording(name):
    with open(os.path.join(RECORDINGS, name)) as handle:
        return handle.read()


def recorded_events(name):
    return [json.loads(line) for line in recording(name).splitlines() if line.strip()]


def webhook_targets():
    raw = opts.get("--webhook_config")
    if not raw:
        return []
    hooks = json.loads(raw)
    if isinstance(hooks, dict):
        hooks = [hooks]
    return [h["callback_url"] for h in hooks if h.get("webhook_type") == "raw" and h.get("callback_url")]




def post(body):
    body = dict(body)
    body["job_id"] = JOB_ID
    body.setdefault("timestamp", datetime.now(tz=timezone.utc).isoformat())
    data = json.dumps(body).encode()
    for url in TARGETS:
        try:
            request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"}, method="POST")
            urllib.request.urlopen(request, timeout=10).read()
        except Exception as error:  # SimpleTuner logs a failed webhook and goes on
            print(f"[ERROR] Error sending raw webhook to {url}: {error}", flush=True)


COLOURS = {"INFO": "\x1b[32m", "WARNING": "\x1b[33m", "ERROR": "\x1b[31m"}


def log(level, message, logger="SimpleTuner"):
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"\x1b[0m[RANK 0] {COLOURS[level]}{stamp} [{level}] {message}\x1b[0m", flush=True)
    post({"type": "log.message", "logger": logger, "message": message, "severity": level.lower()})


def stage(key, label, status, message=None, **progress):
    body = {"type": "lifecycle.stage", "severity": "info", "stage": {"key": key, "label": label, "status": status, "progress": {"label": label, **progress}}}
    if message:
        body["message"] = message
        body["title"] = message
    post(body)


def retarget(value, dataset_dirs):
    """A recorded body with this run's paths in place of the recording's."""
    text = json.dumps(value)
    text = text.replace("/srv/run/out", OUTPUT_DIR)
    for directory in dataset_dirs[:1]:
        text = text.replace("/srv/run/data", directory)
    return json.loads(text)


def data_backends():
    path = opts.get("--data_backend_config")
    if not path:
        return []
    with open(path) as handle:
        return json.load(handle)


def write_bucket_metadata(backends):
    """SimpleTuner's local metadata backend, at every start: two files into each instance_data_dir, written atomically."""
    for backend in backends:
        directory = backend.get("instance_data_dir")
        if not directory or backend.get("dataset_type") == "text_embeds":
            continue
        images = sorted(f for f in os.listdir(directory) if f.lower().endswith((".png", ".jpg", ".jpeg", ".webp")))
        log("INFO", "Discovering new files...", "BaseMetadataBackend")
        ident = backend.get("id", "dataset")
        for name, payload in (
            (f"aspect_ratio_bucket_indices_{ident}.json", {"1.0": [os.path.join(directory, f) for f in images]}),
            (f"aspect_ratio_bucket_metadata_{ident}.json", {os.path.join(directory, f): {"aspect_ratio": 1.0} for f in images}),
        ):
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
            with os.fdopen(fd, "w") as handle:
                json.dump(payload, handle)
            os.replace(tmp, os.path.join(directory, name))
        log("INFO", f"Sample processing statistics: {{'total_processed': {len(images)}}}", "BaseMetadataBackend")


class SignalConsumer:
    """train.py's _build_signal_consumer: stat, re-read on an mtime increase, one action per increase."""

    def __init__(self, path, key):
        self.path, self.key = path, key
        self.seen = self.pending = 0
        self.mtime = None
        self.warned = False

    def __call__(self):
        if not self.path:
            return False
        try:
            mtime = os.stat(self.path).st_mtime
        except FileNotFoundError:
            if not self.warned:
                log("WARNING", f"Accelerate trigger file missing at {self.path}")
                self.warned = True
            return False
        if self.mtime is None or mtime > self.mtime:
            self.mtime = mtime
            try:
                with open(self.path) as handle:
                    count = int(json.load(handle).get(self.key, 0))
            except Exception as error:
                if not self.warned:
                    log("WARNING", f"Failed to read accelerate trigger file {self.path}: {error}")
                    self.warned = True
                return False
            if count > self.seen:
                self.pending += count - self.seen
                self.seen = count
        if self.pending > 0:
            self.pending -= 1
            return True
        return False


def run_script(option, **values):
    template = opts.get(option)
    if not template:
        return
    command = template.format(**values)
    log("INFO", f"Running {option[2:]}: {command}")
    subprocess.run(command.split(), check=False)


class Trainer:
    def __init__(self):
        self.recorded = recorded_events("webhooks-lora-run.jsonl")
        self.total = int(opts.get("--max_train_steps", "8"))
        self.step = 0
        self.step_seconds = float(opts.get("--standin_step_seconds", "0.05"))
        self.validation_configured = bool(opts.get("--validation_prompt"))
        self.checkpoint_every = int(opts.get("--checkpoint_step_interval", opts.get("--checkpointing_steps", "0")) or 0)
        self.validation_every = int(opts.get("--validation_step_interval", opts.get("--validation_steps", "0")) or 0)
        self.fail_at = int(opts.get("--standin_fail_at_step", "0") or 0)
        signal_file = os.environ.get("SIMPLETUNER_ACCELERATE_SIGNAL_FILE")
        self.manual_validation = SignalConsumer(signal_file, "manual_validation")
        self.manual_checkpoint = SignalConsumer(signal_file, "manual_checkpoint")
        method = opts.get("--validation_method", "simpletuner-local").replace("_", "-")
        if method == "external-script" and not opts.get("--validation_external_script"):
            raise ValueError("--validation_external_script is required when --validation_method=external-script.")
        self.external = method == "external-script"

    def startup(self, backends):
        # The recorded start-up up to the data backends: its log records, notices and phases.
        dirs = [b["instance_data_dir"] for b in backends if b.get("instance_data_dir")]
        for body in self.recorded[:10]:
            post(retarget(body, dirs))
        stage("init_data_backend", "Configuring data backends", "running", "Configuring data backends... (this may take a while!)")
        # Loading models and caching embeddings takes real SimpleTuner a while before its first step.
        time.sleep(float(opts.get("--standin_startup_seconds", "0")))
        write_bucket_metadata(backends)
        stage("init_data_backend", "Configuring data backends", "completed", "Completed configuring data backends.", current=1, total=1, percent=100)
        for body in self.recorded[68:99]:
            post(retarget(body, dirs))

    def progress_body(self, loss):
        body = json.loads(json.dumps(self.recorded[STEP_TEMPLATE_INDEX]))
        body.pop("timestamp", None)
        body["data"].update({"global_step": self.step, "total_num_steps": self.total, "steps_remaining_at_start": self.total})
        body["progress"].update(
            {"current": self.step, "total": self.total, "percent": 100.0 * self.step / self.total, "eta_seconds": (self.total - self.step) * self.step_seconds}
        )
        body["progress"]["metrics"].update({"loss": loss, "seconds_per_step": self.step_seconds})
        return body

    def validate(self, final=False):
        key, label = ("final_validation", "Running Final Validations") if final else ("validation", "Running Validation")
        stage(key, label, "running", "Validation is starting." if not final else "Generating final validation images...")
        if self.external:
            run_script("--validation_external_script", local_checkpoint_path=self.latest_checkpoint(), global_step=self.step)
        else:
            for body in self.recorded[114:116]:
                post({k: v for k, v in body.items() if k != "timestamp"})
        stage(key, label, "completed", "Validation completed." if not final else "Final validation images completed")

    def latest_checkpoint(self):
        found = sorted((int(n.split("-")[1]), n) for n in os.listdir(OUTPUT_DIR) if n.startswith("checkpoint-")) if os.path.isdir(OUTPUT_DIR) else []
        return os.path.join(OUTPUT_DIR, found[-1][1]) if found else ""

    def checkpoint(self, manual=False):
        path = os.path.join(OUTPUT_DIR, f"checkpoint-{self.step}")
        stage("checkpoint_save", "Saving Checkpoint", "running", f"Saving checkpoint to {path}")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "pytorch_lora_weights.safetensors"), "wb") as handle:
            handle.write(b"\0" * 64)
        log("INFO", f"[RANK 0] Saving current state to {path}")
        stage("checkpoint_save", "Saving Checkpoint", "completed", f"Saved checkpoint to {path}")
        post({"type": "training.checkpoint", "severity": "info", "checkpoint": {"path": path, "label": f"Checkpoint saved to {path}", "is_final": False}, "title": f"Checkpoint saved to {path}"})
        run_script("--post_checkpoint_script", local_checkpoint_path=path, global_step=self.step)
        run_script("--post_upload_script", local_checkpoint_path=path, remote_checkpoint_path="", global_step=self.step)

    def train(self):
        first = self.recorded[99]
        first = {**first, "data": {**first["data"], "total_num_steps": self.total, "remaining_num_steps": self.total}, "progress": {**first["progress"], "total": self.total}}
        first.pop("timestamp", None)
        post(first)
        loss = 1.2
        while self.step < self.total:
            time.sleep(self.step_seconds)
            self.step += 1
            if self.fail_at and self.step == self.fail_at:
                raise RuntimeError(f"stand-in failure at step {self.step}")
            loss = loss * 0.97
            bar = f"Epoch 1/1, Steps: {int(100 * self.step / self.total):3d}%| | {self.step}/{self.total} [00:0{self.step % 10}<00:00, lr=0.0001, step_loss={loss:.3g}]"
            sys.stdout.write(f"\r{bar}")
            sys.stdout.flush()
            post(self.progress_body(loss))
            validations = 0
            while self.validation_configured and self.manual_validation():
                validations += 1
            if validations or (self.validation_every and self.step % self.validation_every == 0 and self.validation_configured):
                for _ in range(max(1, validations)):
                    self.validate()
            checkpoints = 0
            while self.manual_checkpoint():
                checkpoints += 1
            for _ in range(checkpoints):
                post({"type": "notification", "severity": "info", "message": f"Checkpoint: `Manual checkpoint requested. Step {self.step} of {self.total}`", "title": "Checkpoint"})
                self.checkpoint(manual=True)
            if not checkpoints and self.checkpoint_every and self.step % self.checkpoint_every == 0:
                self.checkpoint()
        sys.stdout.write("\n")
        if not self.checkpoint_every or self.step % self.checkpoint_every:
            self.checkpoint()
        log("INFO", f"Training has completed.\n -> global_step = {self.step}, max_train_steps = {self.total}, epoch = 1, num_train_epochs = 1")
        stage("model_save", "Saving Final Model", "running", f"Finalizing model and saving to {OUTPUT_DIR}")
        if self.validation_configured:
            self.validate(final=True)
        with open(os.path.join(OUTPUT_DIR, "pytorch_lora_weights.safetensors"), "wb") as handle:
            handle.write(b"\0" * 64)
        stage("model_save", "Saving Final Model", "completed", f"Model saved to {OUTPUT_DIR}")
        run_script("--post_upload_script", local_checkpoint_path=OUTPUT_DIR, remote_checkpoint_path="", global_step=self.step)
        post({"type": "lifecycle.stage", "severity": "info", "stage": {"key": "training_complete", "label": "Training Complete", "status": "completed", "progress": {"label": "Training Complete", "percent": 100}}, "message": "Training run complete.", "title": "Training run complete."})


def replay(name):
    """A recorded run posted as it happened, its terminal output printed between its webhooks."""
    backends = data_backends()
    dirs = [b["instance_data_dir"] for b in backends if b.get("instance_data_dir")]
    bodies = recorded_events("webhooks-lora-run.jsonl" if name == "lora-run" else "failed-run-webhooks.jsonl")
    printed = recording("completed-run-stdout.txt" if name == "lora-run" else "failed-run-stdout.txt").split("\n")
    if name == "failed-run":
        # What accelerate printed is accelerate's to print (its CalledProcessError, with this run's command line).
        cut = next(i for i, line in enumerate(printed) if line.startswith("Traceback") and i + 1 < len(printed) and "bin/accelerate" in printed[i + 1])
        printed = printed[:cut]
    shown = 0
    for i, body in enumerate(bodies):
        body = retarget(body, dirs)
        body.pop("timestamp", None)
        if body.get("type") == "training.checkpoint":
            os.makedirs(body["checkpoint"]["path"], exist_ok=True)
        post(body)
        upto = (i + 1) * len(printed) // len(bodies)
        while shown < upto:
            print(printed[shown], flush=True)
            shown += 1
    if name == "failed-run":
        sys.exit(1)


def main():
    if opts.get("--standin_ignore_signals") == "true":
        def ignore(number, _frame):
            # os.write, not print: a handler that prints while the main thread is inside
            # sys.stdout.write raises "reentrant call inside BufferedWriter" and fails the run.
            os.write(1, f"standin: got {signal.Signals(number).name}, ignoring it\n".encode())
            post({"type": "standin.signal", "title": f"got {signal.Signals(number).name}", "data": {"signal": signal.Signals(number).name}})

        signal.signal(signal.SIGINT, ignore)
        signal.signal(signal.SIGTERM, ignore)
        marker = opts.get("--standin_marker", "standin-child")
        child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)", f"{marker}:child"])
        post({"type": "standin.child", "title": "child started", "data": {"marker": marker, "pid": child.pid}})
    if opts.get("--standin_replay"):
        replay(opts["--standin_replay"])
        return
    trainer = None
    try:
        trainer = Trainer()
        trainer.startup(data_backends())
        trainer.train()
    except KeyboardInterrupt:
        post({"type": "training.status", "status": "interrupted", "severity": "info"})
    except Exception as error:
        post({"type": "error", "title": f"Training failed: {type(error).__name__}", "message": str(error), "traceback": traceback.format_exc(), "severity": "error"})
        post({"type": "training.status", "status": "failed", "severity": "error"})
        raise
    finally:
        if trainer is not None:
            log("INFO", "Unloading all model components...", "simpletuner.helpers.models.common")


def setup():
    global opts, JOB_ID, OUTPUT_DIR, TARGETS
    opts = load_options()
    JOB_ID = os.environ.get("SIMPLETUNER_JOB_ID") or None
    OUTPUT_DIR = os.path.abspath(opts.get("--output_dir", "output"))
    TARGETS = webhook_targets()


if __name__ == "__main__":
    setup()
    main()
