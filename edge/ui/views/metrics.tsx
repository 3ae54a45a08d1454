import { useEffect, useState } from "preact/hooks";
import {
  METRIC_CATEGORIES,
  METRIC_TEMPLATE_NAMES,
  METRIC_TEMPLATES,
  type MetricCategory,
  type MetricTemplate,
} from "../../../shared/metric-categories";
import { asServiceError, call, endpoints, type ServiceError } from "../api";
import { ErrorNote } from "../components/error-note";
import { Page, Panel } from "../components/page";
import { useAction, useLoad } from "../components/use-load";
import type { ViewProps } from "../view-props";
import { SavedNote } from "./settings-form";

/** What each category exports, shown beside its checkbox. */
const CATEGORY_HINTS: Record<MetricCategory, string> = {
  jobs: "job counts by status, active jobs, cost, average duration",
  http: "requests, errors and latency per endpoint",
  rate_limits: "rate-limit violations and tracked clients",
  approvals: "approval requests pending and by status",
  audit: "audit entries, in all and in the last 24 h",
  health: "uptime and database latency",
  circuit_breakers: "each provider's breaker state and failures",
  provider: "spending limit used and credit balance per provider",
};

/** Metrics (admin): the Prometheus export's categories, the templates, and a preview of the scrape. */
export function MetricsView(_props: ViewProps) {
  const config = useLoad(() => call(endpoints.metricsConfig, {}), []);
  const [enabled, setEnabled] = useState(false);
  const [chosen, setChosen] = useState<MetricCategory[]>([]);
  const [saved, setSaved] = useState<string | null>(null);
  const [preview, setPreview] = useState<{ text: string; of: MetricCategory[] } | null>(null);
  const [previewError, setPreviewError] = useState<ServiceError | null>(null);

  const loadPreview = async (categories: MetricCategory[]) => {
    setPreviewError(null);
    try {
      const response = await call(endpoints.metricsPreview, { query: { categories } });
      // None chosen: the service renders the configured ones.
      setPreview({ text: await response.text(), of: categories.length ? categories : (config.data?.prometheus_categories ?? []) });
    } catch (caught) {
      setPreviewError(asServiceError(caught));
    }
  };

  useEffect(() => {
    if (!config.data) return;
    setEnabled(config.data.prometheus_enabled);
    setChosen(config.data.prometheus_categories);
    void loadPreview(config.data.prometheus_categories);
  }, [config.data]);

  const save = useAction(
    () => call(endpoints.metricsConfigUpdate, { body: { prometheus_enabled: enabled, prometheus_categories: chosen } }),
    async () => {
      await config.reload();
      setSaved("Metrics configuration saved.");
    },
  );
  const apply = useAction(
    (template: MetricTemplate) => call(endpoints.metricsTemplate, { params: { template } }),
    async (answer) => {
      await config.reload();
      setSaved(`Template applied: ${answer.prometheus_categories.join(", ")}.`);
    },
  );

  if (config.error)
    return (
      <Page title="Metrics">
        <ErrorNote error={config.error} />
      </Page>
    );
  if (!config.data)
    return (
      <Page title="Metrics">
        <p aria-busy="true">Loading…</p>
      </Page>
    );
  const toggle = (category: MetricCategory, on: boolean) =>
    setChosen(METRIC_CATEGORIES.filter((c) => (c === category ? on : chosen.includes(c))));
  return (
    <Page title="Metrics">
      <Panel title="Prometheus export" id="export">
        <form
          class="stack settings-form"
          aria-label="Prometheus export"
          onSubmit={(event) => {
            event.preventDefault();
            setSaved(null);
            void save.run();
          }}
        >
          <label class="check">
            <input type="checkbox" name="prometheus_enabled" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} />
            <span>
              Export enabled{" "}
              <span class="field-hint">
                (<code>GET /api/cloud/metrics/prometheus</code> answers; off: 404)
              </span>
            </span>
          </label>
          <fieldset>
            <legend>Categories</legend>
            <div class="settings-grid">
              {METRIC_CATEGORIES.map((category) => (
                <label class="check" key={category}>
                  <input
                    type="checkbox"
                    name="prometheus_categories"
                    value={category}
                    checked={chosen.includes(category)}
                    onChange={(e) => toggle(category, e.currentTarget.checked)}
                  />
                  <span>
                    <code>{category}</code> <span class="field-hint">{CATEGORY_HINTS[category]}</span>
                  </span>
                </label>
              ))}
            </div>
          </fieldset>
          <div class="row">
            <button type="submit" class="primary" disabled={save.busy}>
              Save metrics configuration
            </button>
            <button type="button" onClick={() => void loadPreview(chosen)}>
              Preview these categories
            </button>
            <SavedNote message={saved} />
          </div>
          <ErrorNote error={save.error} />
        </form>
      </Panel>
      <Panel title="Templates" id="templates">
        <p class="muted">A template replaces the categories at once; whether export is enabled does not change.</p>
        <div class="row">
          {METRIC_TEMPLATE_NAMES.map((template) => (
            <button
              type="button"
              key={template}
              disabled={apply.busy}
              onClick={() => {
                setSaved(null);
                void apply.run(template);
              }}
            >
              Apply {template}
            </button>
          ))}
        </div>
        <ul class="muted">
          {METRIC_TEMPLATE_NAMES.map((template) => (
            <li key={template}>
              <strong>{template}</strong>: {METRIC_TEMPLATES[template].join(", ")}
            </li>
          ))}
        </ul>
        <ErrorNote error={apply.error} />
      </Panel>
      <Panel title="Preview" id="preview">
        <p class="muted">
          What the scrape answers with {preview ? (preview.of.length ? preview.of.join(", ") : "no category") : "the categories"}; nothing
          is changed.
        </p>
        <ErrorNote error={previewError} />
        <pre class="metrics-preview" tabIndex={0} aria-label="Metrics preview">
          {preview?.text ?? "Loading…"}
        </pre>
      </Panel>
    </Page>
  );
}
