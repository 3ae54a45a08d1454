import { createRoute } from "@hono/zod-openapi";
import { ErrorBody } from "../../shared/schemas/common";
import {
  ConfigListQuery,
  DataloaderRegenerated,
  Environment,
  EnvironmentActivated,
  EnvironmentCreate,
  EnvironmentDeleted,
  EnvironmentExport,
  EnvironmentList,
  EnvironmentParams,
  EnvironmentReadQuery,
  EnvironmentUpdate,
  ExampleList,
} from "../../shared/schemas/environments";
import { activateEnvironment } from "../environments/activate";
import { regenerateDataloader } from "../environments/dataloader";
import {
  createEnvironment,
  deleteEnvironment,
  exportEnvironment,
  getEnvironment,
  listEnvironments,
  updateEnvironment,
} from "../environments/environments";
import { EXAMPLE_ENVIRONMENTS } from "../environments/examples";
import { principalOf } from "../middleware/authorize";
import { savedOptionProblems } from "../training/options";
import { createRouter } from "../router";
import { json, jsonBody } from "./openapi";

export const environments = createRouter();

const tags = ["Environments"];
const errors = {
  401: json(ErrorBody, "No valid credential"),
  403: json(ErrorBody, "Credential valid but level too low"),
  422: json(ErrorBody, "Invalid name, body or query"),
};
const notFound = { 404: json(ErrorBody, "No environment of that name") };
const notOwner = { 403: json(ErrorBody, "Level too low, or not_owner: only the owner, a lead or an admin may change it") };
const notOwnerUnmasked = { 403: json(ErrorBody, "Level too low, or not_owner: only the owner, a lead or an admin may read it unmasked") };

environments.openapi(
  createRoute({
    method: "post",
    path: "/api/configs/environments",
    tags,
    summary: "Create an environment with a starter option map and dataloader",
    description:
      "The option map starts with `--model_family`, `--model_flavour`, `--model_type` and `--lora_type` for the fields given. " +
      "The dataloader starts with one image dataset read from `datasets/<name>` and the default text-embed dataset, cached under `cache/<name>/`.",
    request: jsonBody(EnvironmentCreate),
    responses: { 201: json(Environment, "Created"), 409: json(ErrorBody, "The name is taken"), ...errors },
  }),
  async (c) => {
    const env = await createEnvironment(c.get("db"), c.req.valid("json"), principalOf(c).user.id);
    c.get("log").info("environment created", { environment: env.name, by: principalOf(c).user.id });
    return c.json(env, 201);
  },
);

// Served with and without the trailing slash: clients in the field call both.
for (const path of ["/api/configs/", "/api/configs"] as const) {
  environments.openapi(
    createRoute({
      method: "get",
      path,
      tags,
      summary: path.endsWith("/") ? "List environments" : "List environments (same as GET /api/configs/)",
      description:
        "Every environment, without `config` and `dataloader`, with its `owner` and whether it is your active one. `config_type` may only be `model`, the default.",
      request: { query: ConfigListQuery },
      responses: { 200: json(EnvironmentList, "Every environment, by name"), ...errors },
    }),
    async (c) => c.json({ environments: await listEnvironments(c.get("db"), principalOf(c).user.id) }, 200),
  );
}

// Registered before /api/configs/{name}, which "examples" would otherwise match.
environments.openapi(
  createRoute({
    method: "get",
    path: "/api/configs/examples",
    tags,
    summary: "The example environments shipped with the service",
    description:
      'The templates shipped with the service (FLUX.1 LoRA, SDXL full fine-tune, SD 3.5 LyCORIS, and `demo`: the built-in demo trainer on the CPU). Start one with `POST /api/configs/environments` and `"from_example": "<name>"`.',
    responses: { 200: json(ExampleList, "Templates to copy"), 401: errors[401] },
  }),
  (c) => c.json({ examples: [...EXAMPLE_ENVIRONMENTS] }, 200),
);

environments.openapi(
  createRoute({
    method: "get",
    path: "/api/configs/{name}",
    tags,
    summary: "An environment with its option map (`config`) and dataloader",
    description:
      "With `active` (whether it is yours) and `owner`. Secret-looking values in `config` and `dataloader` read `********`, for everyone; " +
      "with `unmasked=true` its owner, a lead or an admin reads them as stored (anyone else: 403 `not_owner`). An unknown name is 404.",
    request: { params: EnvironmentParams, query: EnvironmentReadQuery },
    responses: { 200: json(Environment, "The environment"), ...notFound, ...errors, ...notOwnerUnmasked },
  }),
  async (c) => {
    const { name } = c.req.valid("param");
    const view = c.req.valid("query").unmasked ? "unmasked" : "masked";
    const env = await getEnvironment(c.get("db"), name, principalOf(c).user, view);
    if (view === "unmasked") c.get("log").info("environment read unmasked", { environment: name, by: principalOf(c).user.id });
    return c.json(env, 200);
  },
);

environments.openapi(
  createRoute({
    method: "put",
    path: "/api/configs/{name}",
    tags,
    summary: "Rename an environment or replace its description, tags, option map or dataloader",
    description:
      "Fields left out are kept. `config` replaces the whole option map (it is not merged): send every option to keep. " +
      "`model_family`, `model_flavour`, `model_type` and `lora_type` follow the new map's `--model_family`, `--model_flavour`, `--model_type` and `--lora_type`. " +
      "A rename keeps the environment active if it was, and keeps its dataloader paths (regenerate the dataloader to follow the new name). " +
      "`dataloader` replaces the whole dataloader: unique ids, `instance_data_dir` an uploaded dataset `datasets/<path>` (an absolute path on the box only from an admin), cache folders inside the job's directory (else 422 `invalid_dataloader`, each problem named). " +
      "Only its owner, a lead or an admin may change it (else 403 `not_owner`). An option sent as `********` keeps its stored value; `--trainer_command` only from an admin (else 422 `admin_only_option`).",
    request: { params: EnvironmentParams, ...jsonBody(EnvironmentUpdate) },
    responses: { 200: json(Environment, "Saved"), ...notFound, 409: json(ErrorBody, "The new name is taken"), ...errors, ...notOwner },
  }),
  async (c) => {
    const { name } = c.req.valid("param");
    const env = await updateEnvironment(c.get("db"), name, c.req.valid("json"), principalOf(c).user, savedOptionProblems);
    c.get("log").info("environment updated", { environment: env.name, was: name, by: principalOf(c).user.id });
    return c.json(env, 200);
  },
);

environments.openapi(
  createRoute({
    method: "post",
    path: "/api/configs/{name}/activate",
    tags,
    summary: "Make this your active environment (each user has at most one)",
    description:
      "The training forms use the caller's active environment. Only its owner, a lead or an admin may activate it (else 403 `not_owner`).",
    request: { params: EnvironmentParams },
    responses: { 200: json(EnvironmentActivated, "Activated"), ...notFound, ...errors, ...notOwner },
  }),
  async (c) => {
    const { name } = c.req.valid("param");
    await activateEnvironment(c.get("db"), name, principalOf(c).user);
    c.get("log").info("environment activated", { environment: name, by: principalOf(c).user.id });
    return c.json({ success: true as const, active: name }, 200);
  },
);

environments.openapi(
  createRoute({
    method: "post",
    path: "/api/configs/{name}/dataloader",
    tags,
    summary: "Replace the dataloader with the starter one for this name",
    description:
      "The dataloader is rebuilt for the environment's current name (a rename alone leaves its paths as they were). Only its owner, a lead or an admin (else 403 `not_owner`).",
    request: { params: EnvironmentParams },
    responses: { 200: json(DataloaderRegenerated, "The new dataloader"), ...notFound, ...errors, ...notOwner },
  }),
  async (c) => {
    const { name } = c.req.valid("param");
    const dataloader = await regenerateDataloader(c.get("db"), name, principalOf(c).user);
    c.get("log").info("environment dataloader regenerated", { environment: name, by: principalOf(c).user.id });
    return c.json({ success: true as const, dataloader }, 200);
  },
);

environments.openapi(
  createRoute({
    method: "get",
    path: "/api/configs/{name}/export",
    tags,
    summary: "Download an environment as `<name>.json`",
    description:
      "The environment as a JSON attachment (`Content-Disposition`), secret-looking values masked as in every answer; " +
      "with `unmasked=true` as stored, for its owner, a lead or an admin (anyone else: 403 `not_owner`).",
    request: { params: EnvironmentParams, query: EnvironmentReadQuery },
    responses: {
      200: json(EnvironmentExport, "The exported configuration, as an attachment"),
      ...notFound,
      ...errors,
      ...notOwnerUnmasked,
    },
  }),
  async (c) => {
    const { name } = c.req.valid("param");
    const view = c.req.valid("query").unmasked ? "unmasked" : "masked";
    const exported = await exportEnvironment(c.get("db"), name, principalOf(c).user, view);
    if (view === "unmasked") c.get("log").info("environment exported unmasked", { environment: name, by: principalOf(c).user.id });
    return c.json(exported, 200, { "Content-Disposition": `attachment; filename="${exported.name}.json"` });
  },
);

environments.openapi(
  createRoute({
    method: "delete",
    path: "/api/configs/{name}",
    tags,
    summary: "Delete an environment",
    description:
      "Only its owner, a lead or an admin (else 403 `not_owner`). Jobs already submitted are unaffected: each runs the configuration snapshotted when it was submitted. Anyone who had it active has no active environment afterwards.",
    request: { params: EnvironmentParams },
    responses: { 200: json(EnvironmentDeleted, "Deleted"), ...notFound, ...errors, ...notOwner },
  }),
  async (c) => {
    const { name } = c.req.valid("param");
    await deleteEnvironment(c.get("db"), name, principalOf(c).user);
    c.get("log").info("environment deleted", { environment: name, by: principalOf(c).user.id });
    return c.json({ success: true as const, deleted: name }, 200);
  },
);
