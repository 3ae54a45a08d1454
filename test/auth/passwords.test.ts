import { describe, expect, it } from "vitest";
import { constantTimeEqual } from "../../edge/auth/crypto";
import { hashPassword, PBKDF2_ITERATIONS, verifyPassword } from "../../edge/auth/passwords";

describe("password hashing", () => {
  it("stores PBKDF2-SHA256 at the Workers cap of 100,000 iterations with its parameters", async () => {
    expect(PBKDF2_ITERATIONS).toBe(100_000);
    const stored = await hashPassword("correct horse battery");
    expect(stored).toMatch(/^pbkdf2-sha256\$100000\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
  });

  it("salts every hash differently", async () => {
    expect(await hashPassword("same password")).not.toBe(await hashPassword("same password"));
  });

  it("verifies the right password and refuses a wrong one", async () => {
    const stored = await hashPassword("correct horse battery");
    expect(await verifyPassword("correct horse battery", stored)).toBe(true);
    expect(await verifyPassword("correct horse batterY", stored)).toBe(false);
  });

  it("refuses malformed hashes and counts above the cap instead of throwing", async () => {
    const stored = await hashPassword("pw-pw-pw-pw");
    const [, , salt, hash] = stored.split("$");
    for (const bad of [
      "",
      "plain",
      `md5$1$${salt}$${hash}`,
      `pbkdf2-sha256$200000$${salt}$${hash}`,
      `pbkdf2-sha256$0$${salt}$${hash}`,
      `pbkdf2-sha256$abc$${salt}$${hash}`,
    ]) {
      expect(await verifyPassword("pw-pw-pw-pw", bad)).toBe(false);
    }
  });

  it("compares in constant time over equal lengths", () => {
    expect(constantTimeEqual("abc", "abc")).toBe(true);
    expect(constantTimeEqual("abc", "abd")).toBe(false);
    expect(constantTimeEqual("abc", "abcd")).toBe(false);
  });
});
