// The dashboard's script as the Worker serves it (edge/local/ui-build.ts): zod's translations of
// its messages stay out (the dashboard shows English), its English messages stay in.
import { describe, expect, it } from "vitest";
import { buildDashboard } from "../../edge/local/ui-build";

describe("the dashboard's script", () => {
  it("carries zod's English messages but none of its other locales", async () => {
    const { js } = await buildDashboard();
    expect(js).toContain("Invalid input");
    for (const foreign of ["Ungültige Eingabe", "Nieprawidłowe dane", "Entrada inválida", "無効な入力"]) expect(js).not.toContain(foreign);
    // Without the locales the script is about 430 KB (690 KB with them): `npm run bench:dashboard` prints it.
    expect(js.length).toBeLessThan(600_000);
  });
});
