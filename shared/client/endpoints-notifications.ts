import {
  DeliveriesQuery,
  NotificationDeliveryList,
  NotificationPreferences,
  NotificationPreferencesUpdate,
  SmtpSettings,
  SmtpSettingsUpdate,
  SmtpTest,
  SmtpTestAnswer,
} from "../schemas/notifications";
import { endpoint } from "./endpoint";

/** Notifications: preferences, deliveries, SMTP settings. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const notificationEndpoints = {
  notificationPreferences: endpoint({ method: "GET", path: "/api/users/me/notifications", response: NotificationPreferences }),
  notificationPreferencesUpdate: endpoint({
    method: "PUT",
    path: "/api/users/me/notifications",
    body: NotificationPreferencesUpdate,
    response: NotificationPreferences,
  }),
  notificationDeliveries: endpoint({
    method: "GET",
    path: "/api/users/me/notifications/deliveries",
    query: DeliveriesQuery,
    response: NotificationDeliveryList,
  }),
  smtpSettings: endpoint({ method: "GET", path: "/api/admin/notifications/smtp", response: SmtpSettings }),
  smtpSettingsUpdate: endpoint({ method: "PUT", path: "/api/admin/notifications/smtp", body: SmtpSettingsUpdate, response: SmtpSettings }),
  smtpTest: endpoint({ method: "POST", path: "/api/admin/notifications/smtp/test", body: SmtpTest, response: SmtpTestAnswer }),
};
