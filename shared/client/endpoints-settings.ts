import { AuditList, AuditQuery, AuditVerification } from "../schemas/audit";
import { CloudSettings, CloudSettingsUpdate, HardwareRates } from "../schemas/cloud";
import { MetricsConfig, MetricsConfigUpdate, MetricsPreviewQuery, MetricTemplateParam } from "../schemas/metrics";
import { ProviderList, ProviderParam, ProviderSettings, ProviderSettingsUpdate } from "../schemas/providers";
import {
  ApprovalRules,
  ApprovalRulesUpdate,
  ConcurrencySettings,
  ConcurrencyUpdate,
  StallRules,
  StallRulesUpdate,
  UserIdParam,
  UserStallPolicy,
  UserStallPolicyUpdate,
} from "../schemas/queue";
import { Budgets, BudgetsUpdate, CostQuery, CostReport, GpuPrices, GpuPricesUpdate } from "../schemas/spend";
import { endpoint } from "./endpoint";

/** Settings: limits, approval rules, cloud and provider settings, rates, metrics, audit. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const settingsEndpoints = {
  // ---- queue limits and approval rules
  concurrency: endpoint({ method: "GET", path: "/api/queue/concurrency", response: ConcurrencySettings }),
  concurrencyUpdate: endpoint({ method: "POST", path: "/api/queue/concurrency", body: ConcurrencyUpdate, response: ConcurrencySettings }),
  approvalRules: endpoint({ method: "GET", path: "/api/queue/approval-rules", response: ApprovalRules }),
  approvalRulesUpdate: endpoint({ method: "PUT", path: "/api/queue/approval-rules", body: ApprovalRulesUpdate, response: ApprovalRules }),

  // ---- stall detection: the rules (admin) and each user's policy
  stallDetection: endpoint({ method: "GET", path: "/api/admin/stall-detection", response: StallRules }),
  stallDetectionUpdate: endpoint({ method: "PUT", path: "/api/admin/stall-detection", body: StallRulesUpdate, response: StallRules }),
  userStallPolicy: endpoint({ method: "GET", path: "/api/users/{user_id}/stall-policy", params: UserIdParam, response: UserStallPolicy }),
  userStallPolicyUpdate: endpoint({
    method: "PUT",
    path: "/api/users/{user_id}/stall-policy",
    params: UserIdParam,
    body: UserStallPolicyUpdate,
    response: UserStallPolicy,
  }),

  // ---- cloud settings, rates and providers
  cloudSettings: endpoint({ method: "GET", path: "/api/cloud/settings", response: CloudSettings }),
  cloudSettingsUpdate: endpoint({ method: "PUT", path: "/api/cloud/settings", body: CloudSettingsUpdate, response: CloudSettings }),
  cloudRates: endpoint({ method: "GET", path: "/api/cloud/rates", response: HardwareRates }),
  cloudRatesUpdate: endpoint({ method: "PUT", path: "/api/cloud/rates", body: HardwareRates, response: HardwareRates }),
  cloudProviders: endpoint({ method: "GET", path: "/api/cloud/providers", response: ProviderList }),
  providerSettings: endpoint({ method: "GET", path: "/api/cloud/providers/{provider}", params: ProviderParam, response: ProviderSettings }),
  providerSettingsUpdate: endpoint({
    method: "PUT",
    path: "/api/cloud/providers/{provider}",
    params: ProviderParam,
    body: ProviderSettingsUpdate,
    response: ProviderSettings,
  }),

  // ---- metrics export
  metricsConfig: endpoint({ method: "GET", path: "/api/cloud/metrics/config", response: MetricsConfig }),
  metricsConfigUpdate: endpoint({ method: "PUT", path: "/api/cloud/metrics/config", body: MetricsConfigUpdate, response: MetricsConfig }),
  metricsTemplate: endpoint({
    method: "POST",
    path: "/api/cloud/metrics/config/templates/{template}",
    params: MetricTemplateParam,
    response: MetricsConfig,
  }),
  /** Prometheus text: read the Response's text. */
  metricsPreview: endpoint({ method: "GET", path: "/api/cloud/metrics/config/preview", query: MetricsPreviewQuery, response: "raw" }),

  // ---- spend: the cost report, GPU prices and budgets
  cost: endpoint({ method: "GET", path: "/api/cost", query: CostQuery, response: CostReport }),
  gpuPrices: endpoint({ method: "GET", path: "/api/admin/gpu-prices", response: GpuPrices }),
  gpuPricesUpdate: endpoint({ method: "PUT", path: "/api/admin/gpu-prices", body: GpuPricesUpdate, response: GpuPrices }),
  budgets: endpoint({ method: "GET", path: "/api/admin/budgets", response: Budgets }),
  budgetsUpdate: endpoint({ method: "PUT", path: "/api/admin/budgets", body: BudgetsUpdate, response: Budgets }),

  // ---- the audit trail
  auditList: endpoint({ method: "GET", path: "/api/audit", query: AuditQuery, response: AuditList }),
  auditVerify: endpoint({ method: "GET", path: "/api/audit/verify", response: AuditVerification }),
} as const;
