// Stored settings over their defaults (edge/settings-store.ts): a pure function.
import { describe, expect, it } from "vitest";
import { mergeSetting, parseSetting } from "../../edge/settings-store";
import { CLOUD_SETTINGS_DEFAULTS } from "../../shared/schemas/cloud";

describe("mergeSetting", () => {
  it("merges nested objects field by field; arrays, null and values replace; undefined keeps", () => {
    const base = { a: 1, list: [1, 2], n: { x: 1, y: 2, deep: { z: 1 } }, maybe: 5 as number | null };
    expect(mergeSetting(base, { n: { y: 3, deep: { w: 2 } }, list: [9], maybe: null, a: undefined })).toEqual({
      a: 1,
      list: [9],
      n: { x: 1, y: 3, deep: { z: 1, w: 2 } },
      maybe: null,
    });
    expect(base.n).toEqual({ x: 1, y: 2, deep: { z: 1 } }); // the base is not changed
  });

  it("gives a stored setting the defaults of nested fields added since it was saved", () => {
    const stored = JSON.stringify({ consent_mode: "allow", publishing: { hub: { enabled: true } } });
    const cloud = parseSetting("cloud", stored);
    expect(cloud.consent_mode).toBe("allow");
    expect(cloud.publishing.hub).toEqual({ ...CLOUD_SETTINGS_DEFAULTS.publishing.hub, enabled: true });
    expect(cloud.publishing.s3).toEqual(CLOUD_SETTINGS_DEFAULTS.publishing.s3);
  });
});
