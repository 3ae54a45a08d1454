import { computed, signal } from "@preact/signals";
import type { z } from "zod";
import { levelAtLeast, type Level } from "../../shared/levels";
import type { Me } from "../../shared/schemas/users";
import { call, endpoints, ServiceError, whenUnauthenticated } from "./api";

/** The logged-in user: undefined while the page asks, null when nobody is logged in. */
export const me = signal<z.output<typeof Me> | null | undefined>(undefined);

/** Set when a session ended under the user (a 401 from any call): the login form says so. */
export const sessionEnded = signal(false);

whenUnauthenticated(() => {
  if (me.value) sessionEnded.value = true;
  me.value = null;
});

/** Asks the service who is logged in (the session cookie decides). */
export async function loadSession(): Promise<void> {
  try {
    me.value = await call(endpoints.me, {});
    sessionEnded.value = false;
  } catch (error) {
    if (error instanceof ServiceError && error.status === 401) me.value = null;
    else throw error;
  }
}

/** Ends the session on the service, then on the page. */
export async function logOut(): Promise<void> {
  try {
    await call(endpoints.logout, {});
  } finally {
    me.value = null;
  }
}

/**
 * Whether the logged-in user holds at least `level`: what the page offers. The API decides
 * anyway; this only hides what it would refuse.
 */
export const can = (level: Level): boolean => levelAtLeast(me.value?.level ?? null, level);

/** The user's highest level, for display. */
export const levelName = computed(() => me.value?.level ?? "none");
