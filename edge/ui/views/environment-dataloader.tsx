import { useState } from "preact/hooks";
import type { z } from "zod";
import type { DataloaderDataset, Environment } from "../../../shared/schemas/environments";
import { call, endpoints } from "../api";
import { ErrorNote } from "../components/error-note";
import { Panel } from "../components/page";
import { useAction } from "../components/use-load";
import { FieldError } from "../components/field";
import { fieldErrors, idFor } from "./environment-fields";

type Env = z.output<typeof Environment>;
type Dataset = z.output<typeof DataloaderDataset>;

interface Spec {
  key: string;
  kind: "text" | "number" | "boolean" | "select" | "list";
  values?: string[];
  help: string;
}

// The fields shared/schemas/environments.ts names (DataloaderDataset); others a dataset carries are kept as they are.
const FIELDS: Spec[] = [
  { key: "id", kind: "text", help: "Unique in the dataloader." },
  { key: "type", kind: "select", values: ["local"], help: "Where the files are read from." },
  { key: "dataset_type", kind: "select", values: ["image", "text_embeds", "conditioning"], help: "image, text_embeds or conditioning." },
  { key: "instance_data_dir", kind: "text", help: "An uploaded dataset: datasets/<folder>." },
  {
    key: "caption_strategy",
    kind: "select",
    values: ["textfile", "filename", "instanceprompt", "parquet"],
    help: "Where captions come from.",
  },
  { key: "resolution", kind: "number", help: "1024 with pixel_area, or 1.0 with area." },
  { key: "resolution_type", kind: "select", values: ["pixel_area", "area", "pixel"], help: "How resolution is read." },
  { key: "minimum_image_size", kind: "number", help: "Smaller images are skipped." },
  { key: "maximum_image_size", kind: "number", help: "Larger images are downsampled." },
  { key: "target_downsample_size", kind: "number", help: "Downsample target for large images." },
  { key: "crop", kind: "boolean", help: "Crop images to the resolution." },
  { key: "crop_style", kind: "select", values: ["random", "center", "corner", "face"], help: "Where to crop." },
  { key: "crop_aspect", kind: "select", values: ["square", "preserve", "closest", "random"], help: "The crop's aspect." },
  { key: "metadata_backend", kind: "select", values: ["discovery", "parquet"], help: "How image metadata is found." },
  { key: "cache_dir_vae", kind: "text", help: "VAE cache, inside the job's directory." },
  { key: "conditioning_data", kind: "list", help: "Ids of conditioning datasets paired with this one, separated by commas." },
  { key: "conditioning_type", kind: "select", values: ["reference_strict", "reference_loose"], help: "strict: file names must match." },
  { key: "default", kind: "boolean", help: "The default text_embeds dataset." },
  { key: "cache_dir", kind: "text", help: "Text-embed cache, inside the job's directory." },
  { key: "write_batch_size", kind: "number", help: "Text embeds written per batch." },
];
const KNOWN = new Set(FIELDS.map((f) => f.key));

/** What the dataset's field holds, as its control shows it. */
function textOf(dataset: Dataset, spec: Spec): string {
  const value = dataset[spec.key];
  if (value === undefined || value === null) return "";
  if (spec.kind === "list" && Array.isArray(value)) return value.join(", ");
  return String(value);
}

/** The field set from its control's text; blank leaves it out. */
function withField(dataset: Dataset, spec: Spec, text: string): Dataset {
  const next: Record<string, unknown> = { ...dataset };
  const trimmed = text.trim();
  if (trimmed === "" && spec.key !== "id") delete next[spec.key];
  else if (spec.kind === "number") next[spec.key] = Number.isFinite(Number(trimmed)) ? Number(trimmed) : text;
  else if (spec.kind === "boolean") next[spec.key] = trimmed === "true";
  else if (spec.kind === "list")
    next[spec.key] = trimmed
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  else next[spec.key] = text;
  return next as Dataset;
}

/** The folder under datasets/ a dataset reads, or null when it is not an uploaded one. */
const uploadedFolder = (dir: unknown) => (typeof dir === "string" && dir.startsWith("datasets/") ? dir.slice("datasets/".length) : null);
const IMAGE = /\.(png|jpe?g|webp|bmp|gif|tiff?|jxl|avif)$/i;

/** Edit and reference images pair by file name: the images of one folder without a namesake in the other, each way. */
async function unmatchedNames(edit: string, reference: string): Promise<{ edit: string[]; reference: string[] }> {
  const names = async (path: string) => {
    const page = await call(endpoints.datasetList, { query: { path, limit: 1000 } });
    return new Set(page.files.map((f) => f.name).filter((n) => IMAGE.test(n)));
  };
  const [a, b] = await Promise.all([names(edit), names(reference)]);
  return { edit: [...a].filter((n) => !b.has(n)), reference: [...b].filter((n) => !a.has(n)) };
}

/** The dataloader (multidatabackend.json) as a list of datasets, each field a control; saved whole. */
export function DataloaderEditor({ env, editable, onSaved }: { env: Env; editable: boolean; onSaved: () => unknown }) {
  const [datasets, setDatasets] = useState<Dataset[]>(env.dataloader);
  const [matches, setMatches] = useState<string[] | null>(null);
  // The editor keeps what it sent (that is what was saved); "Dataloader saved" says so until the next change.
  const [saved, setSaved] = useState(false);
  const save = useAction(
    () => call(endpoints.configUpdate, { params: { name: env.name }, body: { dataloader: datasets } }),
    async () => {
      setSaved(true);
      await onSaved();
    },
  );
  const regenerate = useAction(
    () => call(endpoints.configDataloader, { params: { name: env.name } }),
    async (answer) => {
      setDatasets(answer.dataloader);
      setSaved(true);
      await onSaved();
    },
  );
  const check = useAction(async () => {
    const lines: string[] = [];
    for (const image of datasets) {
      const edit = uploadedFolder(image.instance_data_dir);
      for (const id of Array.isArray(image.conditioning_data) ? image.conditioning_data : []) {
        const ref = datasets.find((d) => d.id === id);
        const reference = uploadedFolder(ref?.instance_data_dir);
        if (!edit || !reference) continue;
        const missing = await unmatchedNames(edit, reference);
        lines.push(
          missing.edit.length === 0 && missing.reference.length === 0
            ? `${image.id} and ${id}: every file name matches`
            : `${image.id} and ${id}: ${missing.edit.length} file(s) of ${image.id} without a match in ${id}${missing.edit.length ? ` (${missing.edit.slice(0, 5).join(", ")})` : ""}; ${missing.reference.length} of ${id} without one in ${image.id}${missing.reference.length ? ` (${missing.reference.slice(0, 5).join(", ")})` : ""}`,
        );
      }
    }
    setMatches(lines.length ? lines : ["No image dataset is paired with an uploaded conditioning dataset."]);
  });
  const apiErrors = fieldErrors(save.error, "body.dataloader.");
  const update = (i: number, next: Dataset) => {
    setDatasets(datasets.map((d, j) => (j === i ? next : d)));
    save.clear();
    setSaved(false);
  };
  return (
    <Panel title="Dataloader" id="env-dataloader">
      <p class="muted">
        The datasets training reads (SimpleTuner's <code>multidatabackend.json</code>). Image datasets read an uploaded folder,{" "}
        <code>datasets/&lt;folder&gt;</code>; a conditioning dataset pairs with an image dataset that names it.
      </p>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault();
          void save.run();
        }}
      >
        {datasets.map((dataset, i) => (
          <fieldset class="dataset" key={i} disabled={!editable}>
            <legend>
              Dataset {i + 1}: {dataset.id || "(no id)"}
            </legend>
            <div class="options-grid">
              {FIELDS.map((spec) => {
                const id = idFor(`ds${i}`, spec.key);
                const error = apiErrors[`${i}.${spec.key}`];
                const text = textOf(dataset, spec);
                const common = {
                  id,
                  "aria-describedby": `${id}-help${error ? ` ${id}-error` : ""}`,
                  "aria-invalid": error ? ("true" as const) : undefined,
                };
                let input;
                if (spec.kind === "select" || spec.kind === "boolean") {
                  const values = spec.kind === "boolean" ? ["true", "false"] : [...(spec.values ?? [])];
                  if (text !== "" && !values.includes(text)) values.push(text);
                  input = (
                    <select {...common} value={text} onChange={(e) => update(i, withField(dataset, spec, e.currentTarget.value))}>
                      <option value="">Not set</option>
                      {values.map((v) => (
                        <option key={v} value={v}>
                          {v}
                        </option>
                      ))}
                    </select>
                  );
                } else
                  input = (
                    <input
                      {...common}
                      value={text}
                      autoComplete="off"
                      inputMode={spec.kind === "number" ? "decimal" : undefined}
                      onChange={(e) => update(i, withField(dataset, spec, e.currentTarget.value))}
                    />
                  );
                return (
                  <div class="option-row" key={spec.key}>
                    <label for={id} class="option-name">
                      <code>{spec.key}</code>
                    </label>
                    {input}
                    <div class="option-help muted" id={`${id}-help`}>
                      {spec.help}
                    </div>
                    <FieldError id={id} error={error} />
                  </div>
                );
              })}
            </div>
            {Object.keys(dataset).some((k) => !KNOWN.has(k)) ? (
              <p class="muted">
                Kept as they are: <code>{JSON.stringify(Object.fromEntries(Object.entries(dataset).filter(([k]) => !KNOWN.has(k))))}</code>
              </p>
            ) : null}
            {editable ? (
              <button type="button" onClick={() => setDatasets(datasets.filter((_, j) => j !== i))} aria-label={`Remove dataset ${i + 1}`}>
                Remove dataset
              </button>
            ) : null}
          </fieldset>
        ))}
        {editable ? (
          <div class="row">
            <button
              type="button"
              onClick={() =>
                setDatasets([
                  ...datasets,
                  {
                    id: `${env.name}-dataset-${datasets.length + 1}`,
                    type: "local",
                    dataset_type: "image",
                    instance_data_dir: `datasets/${env.name}`,
                  },
                ])
              }
            >
              Add dataset
            </button>
            <button type="submit" class="primary" disabled={save.busy}>
              Save dataloader
            </button>
            <button type="button" onClick={() => void regenerate.run()} disabled={regenerate.busy}>
              Reset to the starter dataloader
            </button>
          </div>
        ) : null}
        {saved ? <p role="status">Dataloader saved.</p> : null}
        <div class="row">
          <button type="button" onClick={() => void check.run()} disabled={check.busy}>
            Match edit and reference file names
          </button>
        </div>
        {matches ? (
          <ul aria-live="polite">
            {matches.map((line) => (
              <li key={line}>{line}</li>
            ))}
          </ul>
        ) : null}
        <ErrorNote error={save.error} />
        <ErrorNote error={regenerate.error} />
        <ErrorNote error={check.error} />
      </form>
    </Panel>
  );
}
